// A run started from this page: once it asks, its request's row is highlighted and scrolled into view,
// and the Start-a-run form's status line offers to open it. Nothing here moves the keyboard: a row the
// reviewer picked stays picked and focused, and while they work in the inbox the list is not scrolled
// away from under them.

import { el } from "./dom.js";
import { rowFor, selectRequest } from "./detail.js";

const FINISHED = new Set(["succeeded", "failed", "cancelled", "timed_out", "interrupted"]);
const REMEMBERED_RUNS = 50;

const awaited = new Map(); // run id -> the status line that said "Started run #…"
const firstAsk = new Map(); // run id -> its first request, as the events told it (they may beat the POST's answer)

export function watchRun(runId, line) {
  // The POST answered: show the run's request now if it already asked, else when it does.
  const key = String(runId);
  const listed = document.querySelector(`#requests > .row[data-run="${CSS.escape(key)}"]`);
  const request = firstAsk.get(key) || (listed && listed.request);
  if (request) reveal(request, line);
  else awaited.set(key, line);
}

export function onStartedRunEvent(frame) {
  // Each socket event on the dashboard: a request a run opened, or a run that ended without asking.
  const request = frame.request;
  if (frame.action === "request.opened" && request && request.run !== null && request.run !== undefined) {
    const key = String(request.run);
    if (firstAsk.has(key)) return;
    firstAsk.set(key, request);
    if (firstAsk.size > REMEMBERED_RUNS) firstAsk.delete(firstAsk.keys().next().value);
    const line = awaited.get(key);
    if (line) { awaited.delete(key); reveal(request, line); }
    return;
  }
  const run = frame.run;
  if (run && FINISHED.has(run.status) && awaited.has(String(run.id))) {
    const line = awaited.get(String(run.id));
    awaited.delete(String(run.id));
    if (line.isConnected && line.dataset.run === String(run.id)) line.append(` It ended (${run.status}) without asking anything.`);
  }
}

function reveal(request, line) {
  const row = rowFor(request.id);
  const id = String(request.id);
  if (line.isConnected && line.dataset.run === String(request.run)) {
    line.append(" It asks: ", row
      ? el("button", { type: "button", class: "link-button show-started", text: "show its request",
        onclick: () => selectRequest(id, { focus: true }) })
      : el("a", { href: `/requests/${encodeURIComponent(id)}/`, text: "open its request" }), ".");
  }
  if (!row) return; // further down the list, or outside its filter: the link above opens it
  for (const other of document.querySelectorAll("#requests > .row.just-started")) other.classList.remove("just-started");
  row.classList.add("just-started");
  const inbox = document.getElementById("inbox");
  if (inbox && inbox.contains(document.activeElement)) return; // the reviewer is working the list: leave it be
  const calm = typeof matchMedia === "function" && matchMedia("(prefers-reduced-motion: reduce)").matches;
  row.scrollIntoView({ block: "center", behavior: calm ? "auto" : "smooth" });
}
