// Team: who may answer (the policy line, read-only cards) and presence.

import { el } from "./dom.js";
import { applyDeadline } from "./deadlines.js";
import { socket } from "./socket.js";

const presenceText = new Map(); // request id -> "also here: …", as its last presence frame said

function policyText(policy) {
  // "1 of 2 approvals · approved by bob", who may answer, who it is assigned to.
  const parts = [];
  const approvals = policy.approvals || [];
  if (policy.quorum > 1) {
    parts.push(`${approvals.length} of ${policy.quorum} approvals` + (approvals.length ? ` · approved by ${approvals.join(", ")}` : ""));
  }
  const who = [...(policy.users || []), ...(policy.groups || []).map((g) => `group ${g}`)];
  if (who.length) parts.push(`answered by ${who.join(" or ")}`);
  if (policy.starter_may_answer === false) parts.push("four-eyes");
  if ((policy.assignees || []).length) parts.push(`assigned to ${policy.assignees.join(", ")}`);
  return parts.join(" · ");
}

export function applyPolicy(card, request) {
  // The server's verdict for this viewer (shapes.for_user). A card I may not answer is read-only:
  // it says why, who may answer and how to unblock it, and shows no inputs; when I may still decline
  // or cancel (my own run under four-eyes, or after my approval under a quorum) it keeps those two buttons.
  const policy = request.policy;
  if (!policy || card.classList.contains("closed")) return;
  applyDeadline(card, request); // its countdown, reminder mark and Extend button, as the event left them
  const header = card.querySelector("header");
  let line = card.querySelector(".policy-line");
  const text = policyText(policy);
  // Under the tool call, which stays first on the card.
  if (!line && text) { line = el("p", { class: "policy-line" }); (card.querySelector(".tool-call") || header).after(line); }
  if (line) line.textContent = text;
  if (!card.querySelector(".presence")) {
    // A card built after the presence frame (picked later) shows who is here all the same.
    header.append(el("span", { class: "presence", "aria-live": "polite", text: presenceText.get(card.dataset.requestId) || "" }));
  }
  const readOnly = policy.may_answer === false;
  const mayDecline = readOnly && policy.may_decline === true;
  card.classList.toggle("read-only", readOnly);
  card.classList.toggle("may-decline", mayDecline);
  card.dataset.assigned = policy.assigned_to_me ? "1" : "0";
  card.whyNot = readOnly ? (policy.why_not || "You may not answer this request.") : null;
  const body = card.querySelector(".card-body");
  if (body) {
    body.inert = readOnly && !mayDecline;
    // The fields go (the data they describe stays readable); they come back if I may answer again.
    for (const part of body.querySelector(".card-content")?.children || []) {
      if (part.matches("input, select, textarea, label") || part.querySelector("input, select, textarea")) part.hidden = readOnly;
    }
  }
  let note = card.querySelector(".why-not");
  if (readOnly) {
    if (!note) { note = el("p", { class: "why-not", role: "note" }); (line || header).after(note); }
    note.textContent = card.whyNot;
  } else if (note) {
    note.remove();
  }
}

export function applyPresence(frame) {
  // On the request's card and on its row in the inbox, whichever are drawn, and on a card drawn later.
  const text = frame.viewers && frame.viewers.length ? `also here: ${frame.viewers.join(", ")}` : "";
  if (text) presenceText.set(frame.request, text);
  else presenceText.delete(frame.request);
  for (const node of document.querySelectorAll(`[data-request-id="${CSS.escape(frame.request)}"]`)) {
    if (node.classList.contains("closed")) continue; // answered or gone: nobody is working on it any more
    const box = node.querySelector(":scope > header .presence, :scope .row-meta .presence");
    if (box) box.textContent = text;
  }
}

export function forgetPresence(id, drawn = []) {
  // The request closed: its row and card (now tombstones, shown or kept aside) stop saying who else is here.
  const key = String(id);
  presenceText.delete(key);
  const nodes = new Set([...document.querySelectorAll(`[data-request-id="${CSS.escape(key)}"]`), ...drawn.filter(Boolean)]);
  for (const node of nodes) {
    for (const box of node.querySelectorAll(":scope > header .presence, :scope .row-meta .presence")) box.textContent = "";
  }
}

export const VIEWING_EVERY_MS = 10000;

export const onScreen = new Set();

const cardWatcher = typeof IntersectionObserver === "undefined" ? null : new IntersectionObserver((entries) => {
  for (const entry of entries) {
    const id = entry.target.dataset.requestId;
    if (entry.isIntersecting) { if (!onScreen.has(id)) { onScreen.add(id); sendViewing(id); } } else onScreen.delete(id);
  }
});

export function sendViewing(id) {
  // Tell the console this request is on my screen; others see "also here: <me>" until it lapses.
  if (!document.querySelector(`#requests [data-request-id="${CSS.escape(id)}"]:not(.closed)`)) { onScreen.delete(id); return; }
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "viewing", request: id }));
}

export function watchCard(card) {
  if (cardWatcher && card) cardWatcher.observe(card);
}

export function unwatchCard(card) {
  // The card left the screen for good (another request picked): it is no longer renewed.
  if (!card) return;
  cardWatcher?.unobserve(card);
  onScreen.delete(card.dataset.requestId);
}
