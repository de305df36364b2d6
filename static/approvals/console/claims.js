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

export function applyClaim(card, request) {
  // Rebuilt only when who holds it changes, so a name half-typed into "Hand to" survives other updates.
  const key = request.status === "open" ? `${request.claimed_by || ""}|${request.handed_to || ""}` : "";
  let bar = card.querySelector(".claim-bar");
  if (!key) { bar?.remove(); return; }
  if (bar && bar.dataset.state === key) return;
  if (!bar) {
    bar = el("div", { class: "claim-bar" });
    card.querySelector("header").after(bar);
  }
  bar.dataset.state = key;
  const error = el("span", { class: "claim-error error", role: "alert" });
  const mine = request.claimed_by === myName();
  const take = el("button", { type: "button", class: "small claim", text: mine ? "Release" : "Claim" });
  const to = el("input", { class: "hand-to", placeholder: "user or group:name", "aria-label": "Hand to", autocomplete: "off" });
  const hand = el("button", { type: "submit", class: "small", text: "Hand over" });
  const buttons = [take, hand];
  take.addEventListener("click", () => act(request, mine ? "release" : "claim", {}, error, buttons));
  const form = el("form", { class: "hand-form" }, to, hand);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!to.value.trim()) { error.textContent = "Whom to? A username or group:<name>."; to.focus(); return; }
    act(request, "hand", { to: to.value.trim() }, error, buttons);
  });
  bar.replaceChildren(el("span", { class: "claim-text", text: claimText(request) || "Nobody is on it yet." }), take, form, error);
}
