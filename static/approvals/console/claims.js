// Claim and hand over: "bob is on it" on a request's row and card, and the buttons to take it, let it
// go or hand it to a user or group. The console's own event (request.claimed / released / handed)
// brings the new state to every reviewer's page, this one included.

import { csrfToken, el } from "./dom.js";
import { myName } from "./state.js";

export function claimText(request) {
  if (!request || request.status !== "open") return "";
  if (request.claimed_by) return request.claimed_by === myName() ? "you are on it" : `${request.claimed_by} is on it`;
  if (request.handed_to) return `handed to ${request.handed_to}`;
  return "";
}

async function act(request, action, body, error, buttons) {
  for (const b of buttons) b.disabled = true;
  error.textContent = "";
  try {
    const response = await fetch(`/api/v1/requests/${encodeURIComponent(request.id)}/${action}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
      body: JSON.stringify(body),
      credentials: "same-origin",
    });
    if (!response.ok) {
      const refusal = await response.json().catch(() => ({}));
      error.textContent = refusal.message || `The console answered ${response.status}.`;
    }
  } catch {
    error.textContent = "The console could not be reached; nothing changed.";
  }
  for (const b of buttons) b.disabled = false;
}

export function applyClaim(bar, request) {
  // In the sticky bar, beside what the keys act on: who is on the picked request, and Claim / Release /
  // Hand over. Rebuilt only when the pick or its holder changes, so a half-typed name survives updates.
  let box = bar.querySelector(".focus-claim");
  if (!box) {
    box = el("span", { class: "focus-claim" });
    const hint = bar.querySelector(".key-hint");
    if (hint) hint.before(box);
    else bar.append(box);
  }
  const policy = (request && request.policy) || {};
  const mayAct = request && request.status === "open" && (policy.may_answer || policy.may_decline);
  const key = mayAct ? `${request.id}|${request.claimed_by || ""}|${request.handed_to || ""}` : "";
  if (box.dataset.state === key) return;
  box.dataset.state = key;
  if (!mayAct) {
    const text = claimText(request);
    box.replaceChildren(...(text ? [el("span", { class: "claim-text", text })] : []));
    return;
  }
  const error = el("span", { class: "claim-error error", role: "alert" });
  const mine = request.claimed_by === myName();
  const take = el("button", { type: "button", class: "small claim", text: mine ? "Release" : "Claim" });
  const handOver = el("button", { type: "button", class: "small", text: "Hand over…" });
  const buttons = [take, handOver];
  take.addEventListener("click", () => act(request, mine ? "release" : "claim", {}, error, buttons));
  handOver.addEventListener("click", () => {
    const to = el("input", { class: "hand-to", placeholder: "user or group:name", "aria-label": "Hand to", autocomplete: "off" });
    const send = el("button", { type: "button", class: "small", text: "Hand over" });
    const go = () => {
      if (!to.value.trim()) { error.textContent = "Whom to? A username or group:<name>."; to.focus(); return; }
      act(request, "hand", { to: to.value.trim() }, error, [take, send]);
    };
    send.addEventListener("click", go);
    to.addEventListener("keydown", (event) => {
      if (event.key === "Enter") { event.preventDefault(); go(); }
      if (event.key === "Escape") { event.preventDefault(); box.dataset.state = ""; applyClaim(bar, request); }
    });
    handOver.replaceWith(to, send);
    to.focus();
  });
  box.replaceChildren(el("span", { class: "claim-text", text: claimText(request) || "Nobody is on it yet." }), take, handOver, error);
}
