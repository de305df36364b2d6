// Asking once more, inside the card (never window.confirm): the reason for a decline (a named reject option and
// free text), a reply or the changes asked for instead of running the tool, the changes to a
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

function rejectOptions(card) {
  // The named reasons this request offers (its own, then its policy's), as the server lists them.
  const offered = card.request && card.request.policy && card.request.policy.reject_options;
  return Array.isArray(offered) ? offered.filter((option) => option && typeof option.key === "string") : [];
}

function fromHost(card) {
  // A remote host's request (no console run): the host receives the answer; what its model reads is up to it.
  return !(card.request && card.request.run);
}

function optionPicker(options, { label, host = false }) {
  // A select of the request's reject options and, under it, the words the model will read for the one picked.
  if (!options.length) return null;
  const select = el("select", { class: "reject-option", "aria-label": label },
    el("option", { value: "", text: "No named reason" }),
    ...options.map((option) => el("option", { value: option.key, text: option.label })));
  // Always one line of words, so the panel keeps its height (and its buttons their place) as the pick changes.
  const told = el("p", { class: "muted option-text", "aria-live": "polite" });
  const show = () => {
    const picked = options.find((option) => option.key === select.value);
    const reads = host ? "The host receives" : "The model reads";
    told.textContent = !picked ? `${reads} who declined, and anything you write.`
      : `${reads}: ${picked.text || picked.label}`;
  };
  select.addEventListener("change", show);
  show();
  const node = el("label", { class: "confirm-question option-question" }, el("span", { text: `${label} ` }), select);
  return { node, told, read: () => select.value || null };
}

export function askToDecline(card, { reason = "", onDecline }) {
  // "Why decline?": a named reason (the request's reject options), and free text that goes with the answer as its
  // comment; the model reads both. Enter declines, Escape keeps it open.
  const input = el("input", { type: "text", class: "decline-reason", maxlength: "2000", "aria-label": "Reason for declining" });
  input.value = reason;
  const picker = optionPicker(rejectOptions(card), { label: "Reason:", host: fromHost(card) });
  const decline = () => answerOnce(card, panel, () => onDecline(input.value.trim(), picker ? picker.read() : null));
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.isComposing) { event.preventDefault(); decline(); }
  });
  const question = el("span", { text: picker ? "Anything to add? " : "Why decline? " });
  const panel = el("div", { class: "confirm-panel decline-panel" },
    picker ? picker.node : null, picker ? picker.told : null,
    el("label", { class: "confirm-question" }, question, el("span", { class: "muted decline-hint", text: fromHost(card)
      ? "(optional; sent to the host with the answer and shown to the team)"
      : "(optional; sent with the answer, shown to the team and read by the model)" }), input),
    el("div", { class: "confirm-buttons" },
      el("button", { type: "button", class: "danger confirm-decline", text: "Decline", onclick: decline }),
      el("button", { type: "button", class: "secondary", text: "Keep it open", onclick: () => closePanels(card) })));
  showPanel(card, panel, { focusOn: picker ? panel.querySelector(".reject-option") : input, label: picker ? picker.node : question });
}

// A console run's model reads the message; a remote host's request (no run) hands it to the host, and what the
// host's model reads is up to the host: the words say so (``host``).
const RESPONSES = {
  respond: {
    question: "Reply instead of running the tool",
    hint: "The tool does not run: the model reads your reply as its result.",
    host: "The host is told not to run the tool and receives your reply; what its model reads is up to the host.",
    send: "Send reply",
    empty: "Write the reply the model reads.",
    hostEmpty: "Write the reply the host receives.",
  },
  request_changes: {
    question: "What should change?",
    hint: "The call is declined: the model reads your instructions and may call again with them.",
    host: "The call is declined and the host receives your instructions; what its model reads is up to the host.",
    send: "Request changes",
    empty: "Write the changes the model should make.",
    hostEmpty: "Write the changes the host receives.",
  },
};

export function askToRespond(card, { response, message: typed = "", onSend }) {
  // Respond / request changes: a required message (at most 4000 characters) and, for changes, a named reason.
  // Ctrl+Enter (or Cmd+Enter) sends; Escape keeps the request open; an empty message is refused here, kept open.
  const words = RESPONSES[response];
  const host = fromHost(card);
  const message = el("textarea", {
    class: "respond-message", rows: "3", maxlength: "4000", required: true, "aria-label": words.question,
  });
  message.value = typed; // what this reviewer wrote before a reload (drafts.js)
  const picker = response === "request_changes" ? optionPicker(rejectOptions(card), { label: "Reason:", host }) : null;
  const error = el("p", { class: "error respond-error", role: "alert" });
  const send = () => {
    if (!isArmed(panel)) return;
    if (!message.value.trim()) {
      error.textContent = host ? words.hostEmpty : words.empty;
      message.setAttribute("aria-invalid", "true");
      message.focus();
      return;
    }
    answerOnce(card, panel, () => onSend(message.value.trim(), picker ? picker.read() : null));
  };
  message.addEventListener("input", () => { error.textContent = ""; message.removeAttribute("aria-invalid"); });
  message.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && !event.isComposing) { event.preventDefault(); send(); }
  });
  const question = el("span", { text: `${words.question} ` });
  const panel = el("div", { class: `confirm-panel respond-panel ${response.replace("_", "-")}-panel`, "data-response": response },
    el("label", { class: "confirm-question" }, question, el("span", { class: "muted respond-hint", text: `(required) ${host ? words.host : words.hint}` }), message),
    picker ? picker.node : null, picker ? picker.told : null, error,
    el("div", { class: "confirm-buttons" },
      el("button", { type: "button", class: "primary confirm-respond", text: words.send, onclick: send }),
      el("button", { type: "button", class: "secondary", text: "Keep it open", onclick: () => closePanels(card) })));
  showPanel(card, panel, { focusOn: message, label: question });
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
