// Paging: the rest of a long queue, one bounded page frame at a time.

import { state } from "./state.js";
import { socket } from "./socket.js";
import { refreshCounts } from "./notifications.js";
import { closeCard, compareKeys, requestKey, upsertRequest } from "./cards.js";
import { upsertRun } from "./runs.js";
import { onReachingEnd } from "./dom.js";

export function requestPage(of) {
  // Ask for the page after the last one shown; one page frame per list at a time.
  const after = of === "runs" ? state.runsNext : state.next;
  if (!after || state.loading[of] || !socket || socket.readyState !== WebSocket.OPEN) return;
  state.loading[of] = true;
  state.asked[of] = after;
  socket.send(JSON.stringify({ type: "page", of, after, ref: `page-${of}` }));
  refreshCounts();
}

export function requestRunPage(after) {
  // The run page shows its run's open requests, however far down the console's queue they are.
  const detail = document.getElementById("run-detail");
  if (!detail || !socket || socket.readyState !== WebSocket.OPEN) return;
  const frame = { type: "page", of: "requests", run: Number(detail.dataset.runId), ref: "page-run" };
  if (after) frame.after = after;
  socket.send(JSON.stringify(frame));
}

export function applyRequestPage(afterKey, requests, next) {
  // One page of open requests: its range runs from just after `afterKey` (the start when null) to its last
  // request, or to the end when it is the last page. Cards in that range it does not list are gone; cards
  // after it that the page does not vouch for yet stay, marked stale, until a later page does.
  const list = document.getElementById("requests");
  if (!list) return;
  const listed = new Set(requests.map((r) => String(r.id)));
  const endKey = next && requests.length ? requestKey(requests[requests.length - 1]) : null;
  for (const card of [...list.children]) {
    if (!card.sortKey || card.classList.contains("closed") || listed.has(card.dataset.requestId)) continue;
    if (afterKey && compareKeys(card.sortKey, afterKey) <= 0) continue;
    if (endKey && compareKeys(card.sortKey, endKey) > 0) { if (!afterKey) card.stale = true; continue; }
    closeCard(card, null);
  }
  state.paging = true;
  try {
    for (const request of requests) {
      upsertRequest(request);
      const card = list.querySelector(`[data-request-id="${CSS.escape(String(request.id))}"]`);
      if (card) card.stale = false;
    }
  } finally {
    state.paging = false;
  }
  if (requests.length) state.loadedUpTo = requestKey(requests[requests.length - 1]);
  state.next = next;
  refreshCounts();
}

export function applyPage(frame) {
  const of = frame.of === "runs" ? "runs" : "requests";
  if (frame.ref === `page-${of}` && frame.after !== state.asked[of]) return; // asked before a resync: outdated
  if (frame.of === "runs") {
    state.loading.runs = false;
    state.runsNext = frame.next;
    for (const run of frame.runs || []) upsertRun(run);
    refreshCounts();
    return;
  }
  if (frame.ref === "page-run") {
    // The run page's own requests: its first page starts the range, each later one goes on after the last.
    applyRequestPage(frame.after ? state.loadedUpTo : null, frame.requests || [], frame.next);
    state.next = null;
    if (frame.next) requestRunPage(frame.next);
    return;
  }
  state.loading.requests = false;
  applyRequestPage(state.loadedUpTo, frame.requests || [], frame.next);
  // After a resync, keep reading until every card kept from before is confirmed or closed.
  const list = document.getElementById("requests");
  if (frame.next && list && [...list.children].some((card) => card.stale)) requestPage("requests");
}

export function setupPaging() {
  // The active runs' list (the dashboard's inbox pages its own list: inbox.js).
  for (const of of ["runs"]) {
    const box = document.getElementById(`${of}-more`);
    if (!box) continue;
    box.querySelector("button")?.addEventListener("click", () => requestPage(of));
    onReachingEnd(box, () => requestPage(of)); // infinite scroll: reaching the control loads the next page too
  }
}
