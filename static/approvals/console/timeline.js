// The run page's timeline: the newest events as the server drew them, each later one as the socket
// brings it, on every (re)connect the ones after the last shown (read from the database, so none made
// while the socket was away is missed), and earlier ones a page at a time on "Show earlier".

import { el, timeNode } from "./dom.js";
import { socket } from "./socket.js";

const TIMELINE_REF = "timeline";

function list() {
  return document.getElementById("timeline");
}

function runId() {
  return document.getElementById("run-detail")?.dataset.runId;
}

function place(event) {
  // Each event once, in the order of its number, whichever way it came.
  const box = list();
  if (!box || box.querySelector(`[data-seq="${event.seq}"]`)) return;
  let before = null;
  for (let node = box.lastElementChild; node && Number(node.dataset.seq) > event.seq; node = node.previousElementSibling) before = node;
  // In words, as the server drew the others ("Cancel asked by demo"); the event's name for whoever needs it.
  box.insertBefore(el("li", { "data-seq": event.seq, "data-action": event.action },
    timeNode(event.at), " ", el("span", { class: "timeline-words", text: event.words || event.action })), before);
}

function shownSeqs() {
  return [...(list()?.children || [])].map((node) => Number(node.dataset.seq));
}

function askTimeline(range) {
  if (!list() || !socket || socket.readyState !== WebSocket.OPEN) return false;
  socket.send(JSON.stringify({ type: "timeline", run: Number(runId()), ...range, ref: TIMELINE_REF }));
  return true;
}

export function appendTimeline(frame) {
  // A live event of this run (or of one of its requests).
  const id = runId();
  if (id && (String(frame.run_id) === id || (frame.request && String(frame.request.run) === id))) place(frame);
}

export function catchUpTimeline() {
  // The socket (re)connected: ask for the events after the last one shown.
  askTimeline({ after: Math.max(0, ...shownSeqs()) });
}

export function applyTimeline(frame) {
  if (String(frame.run) !== runId()) return;
  const events = frame.events || [];
  for (const event of events) place(event);
  if (frame.before !== null && frame.before !== undefined) {
    const button = document.getElementById("timeline-earlier");
    if (button) { button.disabled = false; button.closest(".timeline-earlier").hidden = !frame.more; }
  } else if (frame.more && events.length) {
    askTimeline({ after: events[events.length - 1].seq }); // the catch-up goes on where this page ended
  }
}

export function setupTimeline() {
  const button = document.getElementById("timeline-earlier");
  button?.addEventListener("click", () => {
    const error = document.getElementById("timeline-error");
    const asked = askTimeline({ before: Math.min(...shownSeqs()) });
    button.disabled = asked;
    if (error) error.textContent = asked ? "" : "Not connected to the console; reconnecting. Try again in a moment.";
  });
}
