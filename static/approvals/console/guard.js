// One guard for every question asked once more (an edited or plain approval, Decline, Withdraw, Cancel run,
// a bulk answer): nothing the reviewer did before the question was readable may answer it. Its buttons arm
// for ARMING_MS after it appears (shown as a filling bar), a held key (event.repeat) never passes it, a click
// whose press began before it appeared is ignored, and Escape closes it. Callers place it clear of the
// control that opened it (below it), so a double-click on that control lands on nothing new.

export const ARMING_MS = 500;

let lastPointerDown = -Infinity; // event.timeStamp of the latest press anywhere, on the same clock as performance.now()

if (typeof document !== "undefined") {
  document.addEventListener("pointerdown", (event) => { lastPointerDown = event.timeStamp; }, true);
}

const ACTIVATING = new Set(["Enter", " "]);

export function isArmed(panel) {
  // True once the question has been on screen long enough to be answered.
  return Boolean(panel && panel.isConnected && panel.guard && !panel.hasAttribute("data-arming"));
}

function disarm(panel) {
  panel.setAttribute("data-arming", "");
  for (const button of panel.querySelectorAll("button")) button.setAttribute("aria-disabled", "true");
}

function arm(panel) {
  panel.removeAttribute("data-arming");
  for (const button of panel.querySelectorAll("button")) button.removeAttribute("aria-disabled");
}

function typesText(event) {
  // A key that only writes in a text box (a space in a reason, a new line in a message): it answers nothing,
  // so it is not held back while the question arms. Enter in a one-line box may answer: it still waits.
  const target = event.target;
  if (!target || !target.matches) return false;
  if (target.matches("textarea")) return true;
  return event.key === " " && target.matches("input[type=text], input:not([type])");
}

function listen(panel) {
  panel.addEventListener("click", (event) => {
    if (!event.target.closest || !event.target.closest("button")) return;
    // A pointer click (detail > 0) whose press began before the question was shown was meant for what was there.
    const early = event.detail > 0 && lastPointerDown < panel.guard.shownAt;
    if (isArmed(panel) && !early) return;
    event.preventDefault();
    event.stopImmediatePropagation();
  }, true);
  panel.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.preventDefault();
      event.stopPropagation();
      panel.guard.onEscape();
      return;
    }
    const activates = ACTIVATING.has(event.key) || (event.target.matches && event.target.matches("button"));
    if (activates && (event.repeat || (!isArmed(panel) && !typesText(event)))) {
      event.preventDefault();
      event.stopPropagation();
    }
  }, true);
}

export function guard(panel, { label, onEscape }) {
  // Make ``panel`` (already in the page) a guarded question: an alertdialog named by ``label`` (an element in
  // it, usually the question), armed after ARMING_MS. Calling it again on the same element re-arms it.
  panel.setAttribute("role", "alertdialog");
  if (label) {
    if (!label.id) label.id = `q-${Math.random().toString(36).slice(2)}`;
    panel.setAttribute("aria-labelledby", label.id);
  }
  if (!panel.guard) listen(panel);
  clearTimeout(panel.guard?.timer);
  panel.guard = { shownAt: performance.now(), onEscape, timer: 0 };
  panel.style.setProperty("--arming-ms", `${ARMING_MS}ms`);
  disarm(panel);
  panel.guard.timer = setTimeout(() => arm(panel), ARMING_MS);
}

function overlaps(a, b) {
  return a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
}

function scroller(node) {
  // The nearest ancestor that scrolls (the inbox's detail pane on a wide screen), else the page.
  for (let parent = node.parentElement; parent; parent = parent.parentElement) {
    const { overflowY } = getComputedStyle(parent);
    if ((overflowY === "auto" || overflowY === "scroll") && parent.scrollHeight > parent.clientHeight) return parent;
  }
  return document.scrollingElement || document.documentElement;
}

export function bringIntoView(panel, openerBox) {
  // Show the question, scrolling as little as needed, but never so that one of its buttons ends up where the
  // control that opened it was on screen (where the pointer of a double-click still is).
  panel.scrollIntoView({ block: "nearest" });
  if (!openerBox) return;
  const below = () => [...panel.querySelectorAll("button")].map((button) => button.getBoundingClientRect())
    .filter((box) => box.width && overlaps(box, openerBox));
  let hit = below();
  if (!hit.length) return;
  const box = scroller(panel);
  box.scrollTop += Math.max(...hit.map((b) => b.bottom)) - openerBox.top + 8; // past it, upwards
  hit = below();
  if (hit.length) box.scrollTop -= openerBox.bottom - Math.min(...hit.map((b) => b.top)) + 8; // no room: below it
}

export function hold(control, held) {
  // The control that opened a question stays where it was, out of reach (no click, no focus, not announced)
  // until the question is answered or closed.
  if (!control) return;
  control.inert = held;
  control.classList.toggle("held", held);
  if (held) control.setAttribute("aria-hidden", "true");
  else control.removeAttribute("aria-hidden");
}
