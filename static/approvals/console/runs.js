// Runs: the dashboard's active and recent runs, and the run page.

import { age, asText, csrfToken, el, timeNode } from "./dom.js";
import { page } from "./state.js";
import { send } from "./socket.js";
import { refreshCounts } from "./notifications.js";

const ACTIVE = new Set(["queued", "running", "waiting"]);

function mayCancel(run) {
  // Only on the server's word for this viewer (policies.cancel_refusal): a run view without it shows no button.
  return Boolean(run.cancel && run.cancel.may_cancel === true);
}

function runRow(run) {
  const cancel = mayCancel(run) ? el("button", {
    type: "button", class: "danger small", text: run.cancel_requested ? "Cancelling…" : "Cancel run",
    disabled: run.cancel_requested, "data-cancel-run": run.id,
    onclick: () => send({ type: "cancel_run", run: run.id }, row),
  }) : null;
  // Classes and data-label captions let console.css stack a row into a labelled block on a phone.
  const row = el("tr", { "data-run-id": run.id },
    el("td", { class: "run" }, el("a", { href: `/runs/${run.id}/`, text: `#${run.id}` })),
    el("td", { class: "tool", text: run.tool }),
    el("td", { class: "args", "data-label": "Args", text: asText(run.args) }),
    el("td", { class: "state" }, el("span", { class: "status", "data-status": run.status, text: run.status })),
    el("td", { class: "started", "data-label": "Started" },
      el("time", { class: "age", "data-since": run.created_at, text: age(run.created_at) })),
    el("td", { class: "actions" }, cancel, el("span", { class: "card-error error" })),
  );
  return row;
}

export function finishedRow(run) {
  // What became of it in words (selectors.run_outcome): "Declined by alice: too risky", not the §10 result.
  const result = run.outcome_text ?? (run.result ? run.result.output : "");
  return el("tr", { "data-run-id": run.id },
    el("td", { class: "run" }, el("a", { href: `/runs/${run.id}/`, text: `#${run.id}` })),
    el("td", { class: "tool", text: run.tool }),
    el("td", { class: "state" }, el("span", { class: "status", "data-status": run.status, text: run.status_label || run.status })),
    el("td", { class: "result" + (run.result && run.result.is_error ? " is-error" : ""), "data-label": "Result", text: result }),
    el("td", { class: "finished", "data-label": "Finished" }, run.finished_at ? timeNode(run.finished_at) : null),
  );
}

export function upsertRun(run) {
  if (page === "run") return updateRunPage(run);
  const active = document.getElementById("runs");
  const recent = document.getElementById("recent-runs");
  active.querySelector(`[data-run-id="${run.id}"]`)?.remove();
  if (ACTIVE.has(run.status)) {
    // Oldest first, as the server pages them: a page's rows go before runs that started since.
    let before = null;
    for (let row = active.lastElementChild; row && Number(row.dataset.runId) > run.id; row = row.previousElementSibling) before = row;
    active.insertBefore(runRow(run), before);
  } else {
    recent.querySelector(`[data-run-id="${run.id}"]`)?.remove();
    recent.prepend(finishedRow(run));
    while (recent.children.length > 10) recent.lastElementChild.remove();
  }
  refreshCounts();
}

export function updateRunPage(run) {
  const detail = document.getElementById("run-detail");
  if (!detail || String(run.id) !== detail.dataset.runId) return;
  const status = document.getElementById("run-status");
  status.textContent = run.status_label || run.status;
  status.dataset.status = run.status;
  // Another console process may have taken the run over (its owner died).
  const owner = document.getElementById("run-owner");
  if (owner && run.owner) owner.textContent = run.owner;
  const result = document.getElementById("run-result");
  if (run.result) {
    result.textContent = run.result.output;
    result.classList.toggle("is-error", run.result.is_error);
  }
  const cancel = document.getElementById("run-cancel");
  if (cancel && !ACTIVE.has(run.status)) cancel.remove();
  else if (cancel) cancel.hidden = !mayCancel(run);
}

export function setupRunPage() {
  const button = document.getElementById("run-cancel");
  if (button) {
    button.addEventListener("click", async () => {
      button.disabled = true;
      button.textContent = "Cancelling…";
      const response = await fetch(`/api/v1/runs/${button.dataset.run}/cancel`, {
        method: "POST", headers: { "X-CSRFToken": csrfToken() }, credentials: "same-origin",
      });
      if (!response.ok) {
        const data = await response.json().catch(() => ({}));
        button.textContent = data.message || "Could not cancel";
      }
    });
  }
}
