// Runs: the dashboard's active and recent runs, and the run page.

import { age, asText, csrfToken, el, readableTime, timeNode } from "./dom.js";
import { page } from "./state.js";
import { send } from "./socket.js";
import { refreshCounts } from "./notifications.js";
import { toast } from "./toasts.js";
import { bringIntoView, guard, hold } from "./guard.js";

const ACTIVE = new Set(["queued", "running", "waiting"]);

function mayCancel(run) {
  // Only on the server's word for this viewer (policies.cancel_refusal): a run view without it shows no button.
  return Boolean(run.cancel && run.cancel.may_cancel === true);
}

function runRow(run) {
  const cancel = mayCancel(run) ? el("button", {
    type: "button", class: "danger small", text: run.cancel_requested ? "Cancelling…" : "Cancel run",
    disabled: run.cancel_requested, "data-cancel-run": run.id,
    onclick: () => askToCancelRun(cancel, run, () => send({ type: "cancel_run", run: run.id }, row)),
  }) : null;
  // Classes and data-label captions let console.css stack a row into a labelled block on a phone.
  const row = el("tr", { "data-run-id": run.id, "data-tool": run.tool },
    el("td", { class: "run" }, el("a", { href: `/runs/${run.id}/`, text: `#${run.id}` })),
    el("td", { class: "tool", text: run.tool }),
    el("td", { class: "args", "data-label": "Args", text: asText(run.args) }),
    el("td", { class: "state" }, el("span", { class: "status", "data-status": run.status, text: run.status })),
    el("td", { class: "started", "data-label": "Started" },
      el("time", { class: "age", "data-since": run.created_at, datetime: run.created_at, title: readableTime(run.created_at), text: age(run.created_at) })),
    el("td", { class: "actions" }, cancel, el("span", { class: "card-error error" })),
  );
  return row;
}

export function finishedRow(run) {
  // What became of it in words (shapes.run_outcome): "Declined by alice: too risky", not the §10 result.
  const result = run.outcome_text ?? (run.result ? run.result.output : "");
  return el("tr", { "data-run-id": run.id },
    el("td", { class: "run" }, el("a", { href: `/runs/${run.id}/`, text: `#${run.id}` })),
    el("td", { class: "tool", text: run.tool }),
    el("td", { class: "state" }, el("span", { class: "status", "data-status": run.status, text: run.status_label || run.status })),
    el("td", { class: "result" + (run.result && run.result.is_error ? " is-error" : ""), "data-label": "Result", text: result }),
    el("td", { class: "finished", "data-label": "Finished" }, run.finished_at ? timeNode(run.finished_at) : null),
  );
}

// -- cancelling, asked once more inline (never window.confirm) ----------------------------------------

export function askToCancelRun(button, run, onCancel) {
  // "Cancel run #4 (refund)?" below the button, which stays where it was, out of reach, until the reviewer
  // answers (guard.js: the question arms first); Escape or Keep running keeps it running.
  const holder = button.parentElement;
  holder.querySelector(".cancel-panel")?.remove();
  const close = () => { panel.remove(); hold(button, false); };
  const keep = () => { close(); button.focus(); };
  const yes = el("button", {
    type: "button", class: "danger confirm-cancel", text: "Cancel run",
    onclick: () => {
      close();
      // The button turns busy; its row (or the run's section) holds focus until the run leaves the list.
      const place = button.closest("tr, section") || button;
      if (!place.matches("button, a, [tabindex]")) place.tabIndex = -1;
      place.focus({ preventScroll: true });
      onCancel();
    },
  });
  const question = el("p", { class: "confirm-question", text: `Cancel run #${run.id} (${run.tool})? The tool is stopped and its open requests withdrawn.` });
  const panel = el("div", { class: "confirm-panel cancel-panel" }, question,
    el("div", { class: "confirm-buttons" }, yes,
      el("button", { type: "button", class: "secondary", text: "Keep running", onclick: keep })));
  const openerBox = button.getBoundingClientRect();
  hold(button, true);
  button.after(panel);
  guard(panel, { label: question, onEscape: keep });
  yes.focus({ preventScroll: true });
  bringIntoView(panel, openerBox);
}

export function cancelRequested(row, runId) {
  // The console took the cancel: say so, and keep the button saying what is happening until the run ends.
  const tool = row?.dataset.tool;
  toast(`Cancelled run #${runId}${tool ? ` (${tool})` : ""}`);
  const button = row?.querySelector("[data-cancel-run]");
  if (button) { button.textContent = "Cancelling…"; button.disabled = true; }
}

function focusAfterLeaving(active, oldRow, newRow) {
  // A reviewer working down the list keeps their place: the run's own button, else the next run's, else the
  // section's heading (the table hides when no run is left).
  const target = newRow?.querySelector("[data-cancel-run]:not([disabled])") || newRow
    || oldRow.nextElementSibling?.querySelector("[data-cancel-run]")
    || oldRow.previousElementSibling?.querySelector("[data-cancel-run]") || document.getElementById("runs-title");
  if (!target) return;
  if (!target.matches("button, a, [tabindex]")) target.tabIndex = -1;
  target.focus({ preventScroll: true });
}

export function upsertRun(run) {
  if (page === "run") return updateRunPage(run);
  const active = document.getElementById("runs");
  const recent = document.getElementById("recent-runs");
  const old = active.querySelector(`[data-run-id="${run.id}"]`);
  const hadFocus = Boolean(old && old.contains(document.activeElement));
  let fresh = null;
  if (ACTIVE.has(run.status)) {
    // Oldest first, as the server pages them: a page's rows go before runs that started since.
    let before = null;
    for (let row = active.lastElementChild; row && Number(row.dataset.runId) > run.id; row = row.previousElementSibling) {
      if (row !== old) before = row;
    }
    fresh = runRow(run);
    active.insertBefore(fresh, before);
  }
  if (old && hadFocus) focusAfterLeaving(active, old, fresh);
  old?.remove();
  if (!ACTIVE.has(run.status)) {
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
  // Another console process may have taken the run over (its owner died): kept for operators, not shown.
  if (run.owner) detail.dataset.owner = run.owner;
  const result = document.getElementById("run-result");
  if (run.result) {
    // Said once: a run a refusal ended reads as the decision, the §10 result the tool got kept in the title.
    const shown = document.getElementById("run-decision"); // the latest request's, kept current by its events
    const decision = (run.request && run.request.decision)
      || (shown && shown.dataset.outcome ? { text: shown.textContent, outcome: shown.dataset.outcome } : null);
    const inWords = Boolean(decision && run.outcome_text && run.outcome_text === decision.text);
    result.textContent = inWords ? run.outcome_text : run.result.output;
    result.dataset.output = run.result.output;
    result.title = inWords ? `The tool was told: ${run.result.output}` : "";
    result.classList.toggle("is-error", run.result.is_error && !inWords);
    result.classList.toggle("decision", inWords);
    if (inWords) result.dataset.outcome = decision.outcome;
    const decisionRow = document.getElementById("run-decision-row");
    if (decisionRow) decisionRow.hidden = inWords;
  }
  // A finished run asks nothing more: its requests are all under "Requests and decisions".
  const openPanel = document.getElementById("open-request-panel");
  if (openPanel) openPanel.hidden = !ACTIVE.has(run.status);
  const cancel = document.getElementById("run-cancel");
  if (cancel && !ACTIVE.has(run.status)) cancel.remove();
  else if (cancel) cancel.hidden = !mayCancel(run);
}

export function setupRunPage() {
  const button = document.getElementById("run-cancel");
  if (!button) return;
  const run = { id: button.dataset.run, tool: button.dataset.tool };
  button.addEventListener("click", () => askToCancelRun(button, run, async () => {
    button.disabled = true;
    button.textContent = "Cancelling…";
    const response = await fetch(`/api/v1/runs/${run.id}/cancel`, {
      method: "POST", headers: { "X-CSRFToken": csrfToken() }, credentials: "same-origin",
    });
    if (response.ok) {
      toast(`Cancelled run #${run.id} (${run.tool})`);
    } else {
      const data = await response.json().catch(() => ({}));
      button.textContent = "Cancel run";
      button.disabled = false;
      toast(data.message || "Could not cancel the run; try again.", { kind: "warn" });
    }
  }));
}
