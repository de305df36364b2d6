// The inbox's one expanded request: which row is picked, its full card (a pane beside the list on a wide
// screen, under its row on a phone), and the sticky bar that keeps its prompt, tool and origin in sight.
// A card is built when its row is first picked and kept while its request is open, so text typed into it
// survives moving to another row and back.

import { el } from "./dom.js";
import { state } from "./state.js";
import { closedMessage, requestCard, tombstone } from "./cards.js";
import { groupIds, groupLabel, groupOrigins } from "./rows.js";
import { applyClaim } from "./claims.js";
import { unwatchCard, watchCard } from "./team.js";
import { requesterOf, starterOf, writeQuery } from "./query.js";

export const WIDE = typeof matchMedia === "function" ? matchMedia("(min-width: 900px)") : { matches: true, addEventListener() {} };

// On a touch screen a request is tapped, not clicked, and there is no J key to press.
const TOUCH = typeof matchMedia === "function" && matchMedia("(hover: none) and (pointer: coarse)").matches;
const HOW_TO_PICK = TOUCH ? "tap one" : "click one, or press J";

function emptyDetail() {
  // The pane with no request picked: why it is empty, and what to do about it.
  const asked = state.inbox.query.request;
  if (asked) {
    // The link named a request this list does not show (yet): say so, and offer its own page.
    return el("p", { class: "muted detail-empty" }, `Request ${asked} is not among the rows shown: it may be further down the list, `,
      "outside this filter, or closed. ", el("a", { href: `/requests/${encodeURIComponent(asked)}/`, text: "Open its own page" }), ".");
  }
  return el("p", { class: "muted detail-empty", text: `Pick a request from the list: ${HOW_TO_PICK}.` });
}

export function rowFor(id) {
  return id === null || id === undefined ? null : document.querySelector(`#requests > .row[data-request-id="${CSS.escape(String(id))}"]`);
}

export function rows({ open = false } = {}) {
  return [...document.querySelectorAll(`#requests > .row${open ? ":not(.closed)" : ""}`)];
}

export function selectedRow() {
  return rowFor(state.inbox.selected);
}

export function cardFor(id) {
  // The detail card of a listed request, built on first use; null when its row is gone.
  const key = String(id);
  let card = state.inbox.cards.get(key);
  if (!card) {
    const row = rowFor(key);
    if (!row || !row.request) return null;
    card = requestCard(row.request);
    card.dismiss = () => dismiss(key);
    const resolved = row.request.status && row.request.status !== "open";
    if (resolved || row.classList.contains("closed")) tombstone(card, resolved ? closedMessage(row.request) : "This request is no longer open.", resolved ? row.request : null);
    state.inbox.cards.set(key, card);
  }
  return card;
}

export function selectedCard() {
  return state.inbox.selected === null ? null : cardFor(state.inbox.selected);
}

export function selectRequest(id, { focus = false, scroll = true } = {}) {
  // Picks a row: its card fills the detail, the sticky bar names it, the URL remembers it.
  const key = id === null || id === undefined ? null : String(id);
  const row = rowFor(key);
  if (key !== null && !row) return;
  const before = state.inbox.selected;
  state.inbox.selected = key;
  for (const other of document.querySelectorAll('#requests > .row.selected, #requests > .row[tabindex="0"]')) {
    if (other !== row) { other.classList.remove("selected"); other.setAttribute("aria-selected", "false"); other.tabIndex = -1; }
  }
  if (row) { row.classList.add("selected"); row.setAttribute("aria-selected", "true"); row.tabIndex = 0; }
  else firstRowTabbable();
  forgetUntouched(before, key);
  showDetail();
  writeQuery({ ...state.inbox.query, request: key || undefined });
  state.inbox.query.request = key || undefined;
  if (row && scroll) row.scrollIntoView({ block: "nearest" });
  if (row && focus) row.focus({ preventScroll: !scroll });
}

function firstRowTabbable() {
  // With nothing picked, Tab still reaches the list: its first row takes the tab stop.
  const first = document.querySelector("#requests > .row");
  if (first && !document.querySelector('#requests > .row[tabindex="0"]')) first.tabIndex = 0;
}

function forgetUntouched(before, now) {
  // A card nobody typed into is rebuilt from the newest view when picked again; a touched one is kept.
  if (before === null || before === now) return;
  const card = state.inbox.cards.get(before);
  if (card && !card.touched && !card.inFlight && !card.classList.contains("closed")) state.inbox.cards.delete(before);
}

const viewed = new Set(); // the detail card whose request this reviewer is said to be looking at

export function showDetail() {
  const detail = document.getElementById("request-detail");
  if (!detail) return;
  const key = state.inbox.selected;
  const card = key === null ? null : cardFor(key);
  const row = rowFor(key);
  if (!card) {
    const empty = emptyDetail();
    if (!detail.classList.contains("empty") || detail.textContent !== empty.textContent) detail.replaceChildren(empty);
    detail.classList.add("empty");
  } else {
    const parts = [];
    if (row && row.group && row.group.count > 1) {
      const origins = groupOrigins(row.group);
      const from = origins ? `, from ${origins.names}` : "";
      parts.push(el("p", { class: "group-note" },
        el("span", {}, el("strong", { text: groupLabel(row.group) }), row.group.by === "run" ? `${from}.` : `: the same tool and arguments${from}.`),
        el("button", { type: "button", class: "small select-group", text: `Select all ${groupIds(row).length} for a bulk answer`, onclick: () => row.selectGroup?.() })));
    }
    parts.push(card);
    parts.push(el("p", { class: "detail-links" },
      el("a", { href: `/requests/${encodeURIComponent(key)}/`, text: "Open this request's own page" })));
    // Redrawn only when what it holds changed, and never at the cost of the keyboard's place: moving a card
    // in the document takes the focus from the field being typed in (a snapshot on every reconnect comes here).
    const drawn = [...detail.children];
    const same = drawn.length === parts.length && drawn.every((child, i) => child === parts[i]
      || (child.matches(".detail-links") && parts[i].matches(".detail-links")
        && child.querySelector("a")?.getAttribute("href") === parts[i].querySelector("a")?.getAttribute("href")));
    if (!same) {
      const hadFocus = detail.contains(document.activeElement) ? document.activeElement : null;
      detail.replaceChildren(...parts);
      if (hadFocus && hadFocus.isConnected && hadFocus !== document.activeElement) hadFocus.focus({ preventScroll: true });
    }
    detail.classList.remove("empty");
  }
  // Presence: the reviewer looks at the picked request's card, not at every row the list shows.
  for (const shown of viewed) if (shown !== card) { unwatchCard(shown); viewed.delete(shown); }
  if (card) { viewed.add(card); watchCard(card); }
  placeDetail();
  updateFocusBar();
}

export function placeDetail() {
  // A pane beside the list on a wide screen; on a phone, the expanded part of its own row.
  const detail = document.getElementById("request-detail");
  const body = document.querySelector(".inbox-body");
  if (!detail || !body) return;
  const row = selectedRow();
  if (WIDE.matches || !row) {
    if (detail.parentElement !== body || detail.previousElementSibling?.id !== "requests") body.append(detail);
  } else if (row.nextElementSibling !== detail) {
    const hadFocus = detail.contains(document.activeElement) ? document.activeElement : null;
    row.after(detail);
    hadFocus?.focus({ preventScroll: true });
  }
  // With nothing listed the list says so itself (#requests-empty), unless a link named a request.
  const nothing = !rows().length && !state.inbox.loading && !state.inbox.query.request;
  detail.hidden = (!WIDE.matches && !row) || nothing;
  showBarPrompt();
}

export function followFocusBarHeight() {
  // Whatever scrolls into view (a picked row, a card, a field) stops below the sticky bar, however many
  // lines the bar takes: the page's scroll padding and the detail pane's top follow its height.
  const bar = document.getElementById("focus-bar");
  if (!bar || !window.ResizeObserver) return;
  const root = document.documentElement;
  new ResizeObserver(() => root.style.setProperty("--focus-bar-height", `${bar.offsetHeight}px`)).observe(bar);
}

export function showBarPrompt() {
  // Under its row (a narrow screen) the picked card says the prompt, and its row does not: the sticky bar
  // repeats it only while the card's own prompt is out of sight, so it is on screen once.
  const bar = document.getElementById("focus-bar");
  if (!bar) return;
  const card = WIDE.matches || state.inbox.selected === null ? null : state.inbox.cards.get(state.inbox.selected);
  const prompt = card && card.isConnected ? card.querySelector(".prompt") : null;
  let seen = false;
  if (prompt && prompt.getClientRects().length) {
    const box = prompt.getBoundingClientRect();
    seen = box.bottom > bar.getBoundingClientRect().bottom && box.top < window.innerHeight;
  }
  if (bar.classList.contains("prompt-seen") !== seen) bar.classList.toggle("prompt-seen", seen);
}

export function followPromptOnScreen() {
  let asked = false;
  const ask = () => {
    if (asked) return;
    asked = true;
    requestAnimationFrame(() => { asked = false; showBarPrompt(); });
  };
  window.addEventListener("scroll", ask, { passive: true });
  window.addEventListener("resize", ask);
  WIDE.addEventListener("change", ask);
}

export function updateFocusBar() {
  // The sticky bar: what the keys act on (kind, tool, origin, starter; the prompt on a line of its own,
  // so the claim controls never cut it short), or how to pick something.
  const bar = document.getElementById("focus-bar");
  if (!bar) return;
  const row = selectedRow();
  const request = row && row.request;
  const what = bar.querySelector(".focus-what");
  applyClaim(bar, request);
  const prompt = bar.querySelector(".focus-prompt");
  const promptText = request ? request.prompt || "" : "";
  if (prompt.textContent !== promptText) prompt.textContent = promptText; // a live region: say it once
  showBarPrompt();
  if (!request) {
    bar.dataset.requestId = "";
    what.replaceChildren(el("span", { class: "muted", text: `No request picked: ${HOW_TO_PICK}.` }));
    return;
  }
  bar.dataset.requestId = String(request.id);
  const origin = request.host || requesterOf(request);
  const origins = groupOrigins(row.group);
  const starter = starterOf(request);
  what.replaceChildren(...[
    el("span", { class: "kind", text: request.kind }),
    el("span", { class: "tool", text: request.tool || "(no tool)" }),
    origins ? el("span", { class: "origin", title: origins.title, text: `from ${origins.count}` })
      : origin ? el("span", { class: "origin", text: `from ${origin}` }) : null,
    starter ? el("span", { class: "starter", text: `by ${starter}` }) : null,
    row.classList.contains("closed") ? el("span", { class: "focus-closed", "data-outcome": row.dataset.outcome, text: row.querySelector(".row-state")?.textContent || "closed" }) : null,
  ].filter(Boolean));
}

export function nextOpenRow(from, step = 1) {
  // The row after (step 1) or before (-1) ``from`` that is still open; from the top when nothing is picked.
  const list = rows();
  const at = from ? list.indexOf(from) : -1;
  if (at === -1) return (step > 0 ? list : [...list].reverse()).find((row) => !row.classList.contains("closed")) || null;
  for (let i = at + step; i >= 0 && i < list.length; i += step) {
    if (!list[i].classList.contains("closed")) return list[i];
  }
  return null;
}

export function rowAfterAnswer(row) {
  // Where the keyboard goes on after an answer: the next row I may answer, after this one, else before it.
  const list = rows();
  const at = list.indexOf(row);
  const order = [...list.slice(at + 1), ...list.slice(0, Math.max(at, 0)).reverse()];
  const usable = (other) => other !== row && !other.matches(".closed, .read-only") && !state.inbox.cards.get(other.dataset.requestId)?.matches(".busy, .sent");
  return order.find(usable) || null;
}

export function removeRow(key) {
  // A row leaves the list (answered here, dismissed): the detail empties if it was the picked one.
  const row = rowFor(key);
  const wasSelected = state.inbox.selected === String(key);
  row?.remove();
  state.inbox.cards.delete(String(key));
  state.inbox.checked.delete(String(key));
  if (wasSelected) {
    state.inbox.selected = null;
    showDetail();
    writeQuery({ ...state.inbox.query, request: undefined });
    state.inbox.query.request = undefined;
  }
  firstRowTabbable();
}

export function dismiss(key) {
  const row = rowFor(key);
  const next = row && state.inbox.selected === String(key) ? nextOpenRow(row) || nextOpenRow(row, -1) : null;
  const hadFocus = document.getElementById("inbox")?.contains(document.activeElement);
  removeRow(key);
  if (next) selectRequest(next.dataset.requestId, { focus: hadFocus });
  else if (hadFocus) document.getElementById("requests")?.focus({ preventScroll: true });
}
