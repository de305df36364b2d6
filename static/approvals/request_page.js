// toolnexus console, a request's own page: Approve or Decline with a comment, through the API's answer
// endpoint (the one door, as the dashboard's). The page reloads to show the decision in words.

import { csrfToken } from "./console/dom.js";

const form = document.getElementById("request-answer");
const detail = document.getElementById("request-detail");
const error = document.getElementById("request-error");

async function answer(ok, button) {
  const comment = form.elements.comment.value.trim();
  if (!ok && !comment) {
    error.textContent = "Say why you decline: the tool and the team read it.";
    error.hidden = false;
    form.elements.comment.focus();
    return;
  }
  for (const b of form.querySelectorAll("button")) b.disabled = true;
  button.setAttribute("aria-busy", "true");
  error.hidden = true;
  const body = ok ? { ok: true, comment } : { ok: false, reason: "declined", comment };
  try {
    const response = await fetch(`/api/v1/requests/${encodeURIComponent(detail.dataset.requestId)}/answer`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
      body: JSON.stringify(body),
    });
    if (response.ok) {
      window.location.reload();
      return;
    }
    const refusal = await response.json().catch(() => ({}));
    error.textContent = refusal.message || `The console refused (HTTP ${response.status}).`;
  } catch {
    error.textContent = "The console could not be reached; nothing was sent. Try again.";
  }
  error.hidden = false;
  for (const b of form.querySelectorAll("button")) b.disabled = false;
  button.removeAttribute("aria-busy");
}

if (form) {
  for (const button of form.querySelectorAll("button[data-ok]")) {
    button.addEventListener("click", () => answer(button.dataset.ok === "true", button));
  }
}
