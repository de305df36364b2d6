// The socket's frames: connect and reconnect, the snapshot, events in sequence (a gap asks for
// a resync), page frames, and the console's replies to what a card sent.

import { page, state } from "./state.js";
import { focusFirstInvalid, setBusy, showCardError, showFieldErrors } from "./forms.js";
import { setSocket, socket } from "./socket.js";
import { applyCountChange, refreshCounts } from "./notifications.js";
import { focusNextInView } from "./keyboard.js";
import { applyPresence, onScreen, sendViewing } from "./team.js";
import { closedMessage, tombstone, upsertRequest } from "./cards.js";
import { cancelRequested, finishedRow, updateRunPage, upsertRun } from "./runs.js";
import { appendTimeline, applyTimeline, catchUpTimeline } from "./timeline.js";
import { applyPage, requestRunPage } from "./paging.js";
import { RESTORE_REF, onRequest, onRestoredPage, onSnapshot } from "./inbox.js";
import { answeredHere, refusedHere } from "./inbox_view.js";
import { toast } from "./toasts.js";
import { refreshRunRequests, showRunRequest } from "./run_requests.js";
import { onStartedRunEvent } from "./started.js";
import { forgetAllDrafts, forgetClosedDrafts, forgetDraft } from "./drafts.js";
import { extendedHere } from "./deadlines.js";

let retryDelay = 500;

export function applySnapshot(snapshot) {
  state.seq = snapshot.seq;
  state.counts = snapshot.counts || null;
  state.loading = { requests: false, runs: false };
  state.asked = {};
  // Keep cards that are still open so a reviewer's half-typed input survives a resync.
  if (page === "run") requestRunPage(null); // the snapshot's page is the console's first, not this run's
  else if (page === "dashboard") onSnapshot(snapshot);
  state.started = true;
  if (page === "dashboard") {
    document.getElementById("runs").replaceChildren();
    state.runsNext = snapshot.runs_next || null;
    for (const run of snapshot.runs) upsertRun(run);
    const recent = document.getElementById("recent-runs");
    recent.replaceChildren();
    for (const run of snapshot.recent_runs || []) recent.append(finishedRow(run));
  } else if (page === "run") {
    const detail = document.getElementById("run-detail");
    const mine = snapshot.runs.find((r) => String(r.id) === detail.dataset.runId);
    if (mine) updateRunPage(mine);
    else fetch(`/api/v1/runs/${detail.dataset.runId}`).then((r) => r.json()).then(updateRunPage).catch(() => {});
    refreshRunRequests(snapshot.seq);
    catchUpTimeline();
  } else if (page === "request") {
    // A request's own page: what became of it while the socket was away (it may have closed meanwhile).
    const id = document.getElementById("request-detail").dataset.requestId;
    fetch(`/api/v1/requests/${encodeURIComponent(id)}`).then((r) => (r.ok ? r.json() : null))
      .then((view) => { if (view) upsertRequest(view); }).catch(() => {});
  }
  refreshCounts();
  forgetClosedDrafts(); // a draft of a request that closed while this page was away
}

function applyEvent(frame) {
  if (frame.seq <= state.seq) return;
  if (frame.prev !== state.seq) {
    // A gap: this page missed something. The database has it; ask for a fresh snapshot.
    socket.send(JSON.stringify({ type: "resync" }));
    return;
  }
  state.seq = frame.seq;
  applyCountChange(frame.count_change);
  if (frame.request) {
    if (frame.request.status !== "open") forgetDraft(frame.request.id);
    if (page === "dashboard") onRequest(frame.request, frame.action);
    else upsertRequest(frame.request);
  }
  if (frame.run && page !== "request") upsertRun(frame.run);
  if (page === "dashboard") onStartedRunEvent(frame);
  appendTimeline(frame);
  if (page === "run") showRunRequest(frame);
  refreshCounts();
}

function onReply(card, frame) {
  // The console's answer to something this card sent.
  card.inFlight = null;
  // The console took this answer: what was typed for it is no longer a draft.
  if (frame.type === "answered" || frame.type === "approval_recorded") forgetDraft(card.dataset.requestId);
  const inInbox = page === "dashboard" && card.matches("article.card");
  if (frame.type === "approval_recorded") {
    if (inInbox) toast(`Approval recorded · ${frame.approvals.length} of ${frame.quorum}`);
    // Counted towards the quorum; the request stays open for the next reviewer.
    setBusy(card, false);
    const box = card.querySelector(".card-error");
    if (box) box.textContent = "";
    const line = card.querySelector(".policy-line");
    if (line) line.textContent = `${frame.approvals.length} of ${frame.quorum} approvals · approved by ${frame.approvals.join(", ")}`;
    return;
  }
  if (frame.type === "answered" && inInbox) return answeredHere(card, frame);
  if (frame.type === "answered") {
    // Focus was on this card, or fell to <body> when its clicked button was disabled while sending.
    const active = document.activeElement;
    if (!active || active === document.body || card.contains(active)) focusNextInView(card);
    if (card.closedRequest) card.remove();
    else { card.classList.remove("busy"); card.classList.add("sent"); }
    refreshCounts();
    return;
  }
  showCardError(card, frame.message);
  if (card.matches("article.card")) {
    showFieldErrors(card, frame.field_errors || {});
    // Answered from the card or its row (the A key): the reviewer goes on at the first field to fix.
    const active = document.activeElement;
    if (!active || active === document.body || card.contains(active) || active.closest("#requests")) focusFirstInvalid(card);
  }
  if (frame.error === "not_open") card.refusal = frame.message;
  if (card.closedRequest) {
    if (inInbox) refusedHere(card, frame.message);
    else tombstone(card, frame.message);
  } else if (frame.error === "not_open" && inInbox) {
    refusedHere(card, frame.message);
  }
}

function onFrame(frame) {
  const card = frame.ref ? state.pending.get(frame.ref) : null;
  if (frame.ref) state.pending.delete(frame.ref);
  switch (frame.type) {
    case "snapshot": return applySnapshot(frame);
    case "event": return applyEvent(frame);
    case "page": return frame.ref === RESTORE_REF ? onRestoredPage(frame) : applyPage(frame);
    case "timeline": return applyTimeline(frame);
    case "answered":
      if (card) onReply(card, frame);
      return;
    case "extended":
      if (card) extendedHere(card);
      return;
    case "cancel_requested":
      if (card) {
        card.inFlight = null;
        cancelRequested(card, frame.run);
      }
      return;
    case "approval_recorded":
      if (card) onReply(card, frame);
      return;
    case "presence":
      applyPresence(frame);
      return;
    case "error":
      if (card) onReply(card, frame);
      else if (typeof frame.ref === "string" && frame.ref.startsWith("page-")) pageRefused(frame);
      else console.warn("console:", frame.message);
      return;
    default:
      console.warn("console: unknown frame", frame.type);
  }
}

function pageRefused(frame) {
  // The console would not send the next page (a cursor it no longer accepts): start again from a snapshot.
  state.loading = { requests: false, runs: false };
  console.warn("console:", frame.message);
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "resync" }));
}

function setConnection(stateName, text) {
  const badge = document.getElementById("conn-status");
  if (badge) { badge.dataset.state = stateName; badge.textContent = text; }
}

export function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  setSocket(new WebSocket(`${scheme}://${location.host}/ws/console/`));
  socket.addEventListener("open", () => {
    retryDelay = 500;
    setConnection("live", "live");
    for (const id of onScreen) sendViewing(id); // a new socket: say again what is on screen
  });
  socket.addEventListener("message", (message) => {
    try { onFrame(JSON.parse(message.data)); } catch (e) { console.error("console: bad frame", e); }
  });
  socket.addEventListener("close", (event) => {
    if (event.code === 4401) {
      // This session ended (logged out here or elsewhere): reconnecting would be refused.
      setConnection("offline", "logged out");
      forgetAllDrafts();
      document.getElementById("requests")?.setAttribute("inert", "");
      return;
    }
    setConnection("offline", "reconnecting…");
    for (const card of state.pending.values()) {
      card.inFlight = null;
      const message = "The connection dropped before the console answered. Check the request and try again.";
      if (card.closedRequest && page === "dashboard") refusedHere(card, `${message} ${closedMessage(card.closedRequest)}`);
      else if (card.closedRequest) tombstone(card, `${message} ${closedMessage(card.closedRequest)}`, card.closedRequest);
      else showCardError(card, message);
    }
    state.pending.clear();
    setTimeout(connect, retryDelay);
    retryDelay = Math.min(retryDelay * 2, 5000);
  });
}
