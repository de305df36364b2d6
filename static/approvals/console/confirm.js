// Asking once more, inside the card (never window.confirm): the reason for a decline, and the changes
// to a request's arguments before they are approved ("amount 49.9 → 5").

import { asText, el } from "./dom.js";
import { present } from "./forms.js";

function shown(value) {
  if (Array.isArray(value)) return value.length ? value.map(asText).join(", ") : "(none)";
  if (value === true) return "yes";
  if (value === false) return "no";
  return present(value) ? asText(value) : "(empty)";
}

function sameValue(a, b) {
  if (Array.isArray(a) || Array.isArray(b)) {
    const list = (v) => (Array.isArray(v) ? v.map(String).sort().join("\u0000") : present(v) ? String(v) : "");
    return list(a) === list(b);
  }
  if (typeof a === "boolean" || typeof b === "boolean") return Boolean(a) === Boolean(b);
  const left = present(a) ? String(a).trim() : "";
  const right = present(b) ? String(b).trim() : "";
  if (left === right) return true;
  return left !== "" && right !== "" && !Number.isNaN(Number(left)) && Number(left) === Number(right);
}

export function changedFields(fields, values) {
  // The described fields whose value the reviewer changed from what the request asked for.
  return (Array.isArray(fields) ? fields : [])
    .filter((field) => !sameValue(field.default, values[String(field.name)]))
    .map((field) => ({ name: String(field.name), label: field.label || String(field.name), from: shown(field.default), to: shown(values[String(field.name)]) }));
}

export function openPanel(card) {
  return card.querySelector(".confirm-panel");
}

export function closePanels(card, { refocus = true } = {}) {
  const panel = openPanel(card);
  if (!panel) return;
  const hadFocus = panel.contains(document.activeElement);
  panel.remove();
  const actions = card.querySelector(".actions");
  if (actions) actions.hidden = false;
  if (refocus && hadFocus) card.focus({ preventScroll: true });
}

function showPanel(card, panel, focusOn) {
  closePanels(card, { refocus: false });
  const actions = card.querySelector(".actions");
  if (!actions) return;
  actions.hidden = true; // the panel's own buttons stand in for them until it is closed
  actions.before(panel);
  panel.addEventListener("keydown", (event) => {
    if (event.key === "Escape") { event.preventDefault(); event.stopPropagation(); closePanels(card); }
  });
  focusOn.focus({ preventScroll: true });
  panel.scrollIntoView({ block: "nearest" });
}

export function askToDecline(card, { reason = "", onDecline }) {
  // "Why decline?": the reason goes with the answer as its comment; Enter declines, Escape keeps it open.
  const input = el("input", { type: "text", class: "decline-reason", maxlength: "2000", "aria-label": "Reason for declining" });
  input.value = reason;
  const decline = () => { const text = input.value.trim(); closePanels(card, { refocus: false }); onDecline(text); };
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.isComposing) { event.preventDefault(); decline(); }
  });
  const panel = el("div", { class: "confirm-panel decline-panel", role: "group", "aria-label": "Decline this request" },
    el("label", { class: "confirm-question" }, "Why decline? ", el("span", { class: "muted", text: "(optional; sent with the answer and shown to the team)" }), input),
    el("div", { class: "confirm-buttons" },
      el("button", { type: "button", class: "danger confirm-decline", text: "Decline", onclick: decline }),
      el("button", { type: "button", class: "secondary", text: "Keep it open", onclick: () => closePanels(card) })));
  showPanel(card, panel, input);
}

export function askToConfirmChanges(card, changes, { verb = "Approve", onConfirm }) {
  // Edited arguments are shown as a diff and approved only on a second, explicit yes.
  const send = el("button", {
    type: "button", class: "primary confirm-send", text: `${verb} with ${changes.length === 1 ? "this change" : "these changes"}`,
    onclick: () => { closePanels(card, { refocus: false }); onConfirm(); },
  });
  const panel = el("div", { class: "confirm-panel diff-panel", role: "group", "aria-label": "Confirm your changes" },
    el("p", { class: "confirm-question", text: "You changed what the tool asked for. Send these values?" }),
    el("ul", { class: "diff" }, ...changes.map((change) => el("li", {},
      el("code", { class: "diff-name", text: change.label }), " ",
      el("del", { text: change.from }), " → ", el("ins", { text: change.to })))),
    el("div", { class: "confirm-buttons" }, send,
      el("button", { type: "button", class: "secondary", text: "Back to editing", onclick: () => closePanels(card) })));
  card.confirmChanges = () => send.click();
  showPanel(card, panel, send);
}
