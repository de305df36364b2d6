// Asking once more, inside the card (never window.confirm): the reason for a decline, the changes to a
// request's arguments before they are approved ("amount 49.9 → 5"), a plain approval that must not go at
// once, and withdrawing a request. Every question is guarded (guard.js): it appears below the card's
// buttons, which stay where they were, out of reach, and its own buttons arm after half a second.

import { el } from "./dom.js";
import { present } from "./forms.js";
import { bringIntoView, guard, hold, isArmed } from "./guard.js";
import { argRows } from "./toolcall.js";
import { shownValue as shown } from "./verdict.js";

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

function wholeOnScreen(node) {
  // All of it between the sticky bar (on the dashboard) and the bottom of the window.
  const box = node.getBoundingClientRect();
  if (!box.width || !box.height) return false;
  const bar = document.getElementById("focus-bar");
  const barBox = bar ? bar.getBoundingClientRect() : null;
  const top = barBox && barBox.height && barBox.bottom > 0 ? barBox.bottom : 0;
  return box.top >= top - 1 && box.bottom <= window.innerHeight + 1;
}

export function whyAskBeforeApproving(card, { byKey = false } = {}) {
  // Why an approval with the arguments as asked must be confirmed first, or "" when it may go at once:
  // a value still clamped, the request's policy, or (for the A key) a call not wholly on screen.
  const policy = card.request && card.request.policy;
  if (policy && policy.confirm_approval === true) {
    return `Policy "${policy.name || "this policy"}" asks for a confirmation before approving.`;
  }
  if (card.querySelector(".tool-call .clamped")) return "Part of an argument is not shown yet (Show all).";
  // The call as toolcall.js draws it, first in every card; the sticky bar alone is not enough.
  const call = card.querySelector(".tool-call");
  if (byKey && call && !wholeOnScreen(call)) return "Not all of the call was on screen when you pressed A.";
  return "";
}

export function openPanel(card) {
  return card.querySelector(".confirm-panel");
}

export function closePanels(card, { refocus = true } = {}) {
  const panel = openPanel(card);
  if (!panel) return;
  const hadFocus = panel.contains(document.activeElement);
  panel.remove();
  hold(card.querySelector(".actions"), false);
  card.confirmApproval = null;
  if (refocus && hadFocus) card.focus({ preventScroll: true });
}

function showPanel(card, panel, { focusOn, label }) {
  closePanels(card, { refocus: false });
  const actions = card.querySelector(".actions");
  if (!actions) return;
  // The card's buttons stay where they were, out of reach; the question goes below them, so a second click
  // on the button that opened it lands on that button, never on the question's.
  const openerBox = actions.getBoundingClientRect();
  hold(actions, true);
  actions.after(panel);
  guard(panel, { label, onEscape: () => closePanels(card) });
  focusOn.focus({ preventScroll: true });
  bringIntoView(panel, openerBox);
}

function answerOnce(card, panel, act) {
  // The question's yes: closes it, gives the card the focus, then acts.
  if (!isArmed(panel)) return;
  closePanels(card, { refocus: false });
  card.focus({ preventScroll: true });
  act();
}

export function askToDecline(card, { reason = "", onDecline }) {
  // "Why decline?": the reason goes with the answer as its comment; Enter declines, Escape keeps it open.
  const input = el("input", { type: "text", class: "decline-reason", maxlength: "2000", "aria-label": "Reason for declining" });
  input.value = reason;
  const decline = () => answerOnce(card, panel, () => onDecline(input.value.trim()));
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.isComposing) { event.preventDefault(); decline(); }
  });
  const question = el("span", { text: "Why decline? " });
  const panel = el("div", { class: "confirm-panel decline-panel" },
    el("label", { class: "confirm-question" }, question, el("span", { class: "muted", text: "(optional; sent with the answer and shown to the team)" }), input),
    el("div", { class: "confirm-buttons" },
      el("button", { type: "button", class: "danger confirm-decline", text: "Decline", onclick: decline }),
      el("button", { type: "button", class: "secondary", text: "Keep it open", onclick: () => closePanels(card) })));
  showPanel(card, panel, { focusOn: input, label: question });
}

export function askToWithdraw(card, { onWithdraw }) {
  // Withdrawing ends the request for the tool as if it were cancelled: asked inline, like Cancel run.
  const question = el("p", { class: "confirm-question", text: "Withdraw this request? The tool is told it was cancelled, not declined." });
  const yes = el("button", {
    type: "button", class: "danger confirm-withdraw", text: "Withdraw request",
    onclick: () => answerOnce(card, panel, onWithdraw),
  });
  const panel = el("div", { class: "confirm-panel withdraw-panel" }, question,
    el("div", { class: "confirm-buttons" }, yes,
      el("button", { type: "button", class: "secondary", text: "Keep it", onclick: () => closePanels(card) })));
  showPanel(card, panel, { focusOn: yes, label: question });
}

export function askToConfirmChanges(card, changes, { verb = "Approve", onConfirm }) {
  // Edited arguments are shown as a diff and approved only on a second, explicit yes.
  const question = el("p", { class: "confirm-question", text: "You changed what the tool asked for. Send these values?" });
  const yes = () => answerOnce(card, panel, onConfirm);
  const send = el("button", {
    type: "button", class: "primary confirm-send", text: `${verb} with ${changes.length === 1 ? "this change" : "these changes"}`,
    onclick: yes,
  });
  const panel = el("div", { class: "confirm-panel diff-panel approve-panel" }, question,
    el("ul", { class: "diff" }, ...changes.map((change) => el("li", {},
      el("code", { class: "diff-name", text: change.label }), " ",
      el("del", { text: change.from }), " → ", el("ins", { text: change.to })))),
    el("div", { class: "confirm-buttons" }, send,
      el("button", { type: "button", class: "secondary", text: "Back to editing", onclick: () => closePanels(card) })));
  showPanel(card, panel, { focusOn: send, label: question });
  card.confirmApproval = yes; // the A key's second yes, armed like the button
}

export function askToApprove(card, { tool, args, order, why, onConfirm }) {
  // "Approve refund with these arguments?": the tool and every argument, whole, in a box that scrolls, drawn
  // as the card's tool call draws them (hidden characters marked, "5" unlike 5), so the yes is to what was read.
  const question = el("p", { class: "confirm-question", text: tool ? `Approve ${tool} with these arguments?` : "Approve this request with these arguments?" });
  const values = args || {};
  const names = [...(order || []).filter((name) => name in values), ...Object.keys(values).filter((name) => !(order || []).includes(name))];
  const list = names.length ? argRows(values, names, { whole: true }) : el("p", { class: "muted", text: "(no arguments)" });
  if (names.length) {
    list.classList.add("confirm-args");
    list.tabIndex = 0;
    list.setAttribute("aria-label", "Every argument, in full");
  }
  const yes = () => answerOnce(card, panel, onConfirm);
  const send = el("button", { type: "button", class: "primary confirm-approve", text: "Approve", onclick: yes });
  const panel = el("div", { class: "confirm-panel approve-panel" }, question,
    why ? el("p", { class: "muted confirm-why", text: why }) : null, list,
    el("div", { class: "confirm-buttons" }, send,
      el("button", { type: "button", class: "secondary", text: "Back", onclick: () => closePanels(card) })));
  showPanel(card, panel, { focusOn: send, label: question });
  card.confirmApproval = yes;
}
