// toolnexus console: a run's transcript on the run page, live.
// Entries arrive as `run.transcript` events on the console socket (their own connection,
// beside run.js's); a gap in the entry numbers or a reconnect re-reads them from the
// API. Everything a model, a tool or a request wrote is set with textContent, never innerHTML.

import { csrfToken, el, timeNode } from "./console/dom.js";
import { answerGiven } from "./console/run_requests.js";

const panel = document.getElementById("transcript-panel");
const ACTIVE = new Set(["queued", "running", "waiting"]);
const RETRYABLE = new Set(["interrupted", "failed", "cancelled", "timed_out"]);

// statusFrames counts the frames that said the run's status: a read begun before one of them is older than it.
const state = { runId: null, status: "", statusFrames: 0, entries: new Map(), last: 0, socket: null, retryDelay: 500 };

function json(value) {
  return JSON.stringify(value ?? {});
}

function answerText(entry) {
  // The decision in words ("Declined by bob: too large"), with what was chosen; bare wire words for an
  // entry recorded without one.
  const answer = entry.data;
  if (entry.decision) {
    // An approval's edited args are in its decision's words already.
    const given = answerGiven({ answer, kind: entry.decision.outcome === "approved" ? "approval" : "" });
    return given ? `${entry.decision.text} · ${given}` : entry.decision.text;
  }
  if (!answer) return "";
  if (answer.ok) return answer.data ? `answered: ${json(answer.data)}` : "approved";
  return answer.reason || "declined";
}

function refusalOf(entry) {
  // The decision behind a "declined/expired: <prompt>" result (§10 fixes that wording): the same call's answer.
  if (!entry.is_error || !String(entry.text || "").startsWith("declined/expired:")) return null;
  let answer = null;
  for (const other of state.entries.values()) {
    if (other.kind === "answer" && other.call_id === entry.call_id && other.seq < entry.seq && other.decision
      && (!answer || other.seq > answer.seq)) answer = other;
  }
  return answer ? answer.decision : null;
}

// ---- one entry -----------------------------------------------------------------------

function entryBody(entry) {
  const tool = entry.tool ? el("code", { text: entry.tool }) : null;
  switch (entry.kind) {
    case "prompt":
      return [el("strong", { text: "Prompt" }), el("pre", { class: "transcript-text", text: entry.text })];
    case "thinking":
      return [el("strong", { text: `Model turn ${entry.turn ?? ""}` })];
    case "assistant": {
      const calls = (entry.data && entry.data.tool_calls) || [];
      const parts = [];
      if (entry.text) {
        parts.push(el("span", { text: calls.length ? "The model says:" : "The model answers:" }));
        parts.push(el("pre", { class: "transcript-text", text: entry.text }));
      }
      if (calls.length) {
        parts.push(el("span", { text: calls.length === 1 ? "The model calls a tool:" : `The model calls ${calls.length} tools at once:` }));
        parts.push(el("ul", { class: "transcript-calls" }, ...calls.map((c) =>
          el("li", {}, el("code", { text: c.name }), " ", el("span", { class: "args", text: json(c.args) })))));
      }
      if (!parts.length) parts.push(el("span", { class: "muted", text: "(empty reply)" }));
      return parts;
    }
    case "tool_result": {
      const refusal = refusalOf(entry);
      return [tool, entry.is_error ? " returned an error:" : " returned:",
        el("pre", { class: "transcript-text" + (entry.is_error ? " is-error" : ""), text: entry.text }),
        refusal ? el("p", { class: "transcript-decision", "data-outcome": refusal.outcome, text: refusal.text }) : null];
    }
    case "pending":
      return [tool, ` asks a reviewer (${(entry.data && entry.data.kind) || "request"}): `, el("q", { text: entry.text })];
    case "asked":
      return [tool, ` asks from inside its call (${(entry.data && entry.data.kind) || "request"}): `, el("q", { text: entry.text })];
    case "waiting":
      return ["Waiting for a reviewer to answer ", tool || "the request", "."];
    case "answer":
      return ["Answer for ", tool || "the request", ": ",
        el("span", { class: "transcript-decision", "data-outcome": entry.decision ? entry.decision.outcome : "", text: answerText(entry) })];
    case "resumed":
      return [el("strong", { text: "Resumed" }), " ", entry.text];
    case "stopped":
      return [el("strong", { text: "Stopped" }), " ", el("span", { class: "is-error", text: entry.text })];
    case "finished": {
      // The final answer itself is the last assistant entry; this one says how the loop ended.
      const info = entry.data || {};
      const counts = `${info.turns ?? "?"} model turns, ${info.tool_calls ?? 0} tool calls`;
      if (info.status === "done") return [el("strong", { text: "Finished" }), ` after ${counts}.`];
      return [el("strong", { text: "Stopped" }), ` after ${counts}: `, el("span", { class: "is-error", text: entry.text })];
    }
    default:
      return [el("span", { text: `${entry.kind}: ${entry.text || ""}` })];
  }
}

function entryNode(entry) {
  return el("li", { class: `transcript-entry kind-${entry.kind}`, "data-seq": entry.seq, "data-kind": entry.kind },
    timeNode(entry.at), " ", ...entryBody(entry));
}

// ---- the list ---------------------------------------------------------------------------

function render() {
  const list = document.getElementById("transcript");
  if (!list) return; // a tool run: no transcript, only Retry
  const sorted = [...state.entries.values()].sort((a, b) => a.seq - b.seq);
  list.replaceChildren(...sorted.map(entryNode));
  document.getElementById("transcript-empty").hidden = sorted.length > 0;
  updateProgress();
}

function add(entry) {
  if (state.entries.has(entry.seq)) return;
  state.entries.set(entry.seq, entry);
  state.last = Math.max(state.last, entry.seq);
  const list = document.getElementById("transcript");
  if (!list) return;
  const node = entryNode(entry);
  const after = [...list.children].find((child) => Number(child.dataset.seq) > entry.seq);
  list.insertBefore(node, after || null);
  document.getElementById("transcript-empty").hidden = true;
  updateProgress();
}

function replaceAll(entries) {
  state.entries = new Map(entries.map((e) => [e.seq, e]));
  state.last = entries.reduce((most, e) => Math.max(most, e.seq), 0);
  render();
}

// Entries never change once written: a read adds the ones this page lacks and drops none a frame brought meanwhile.
function merge(entries) {
  for (const entry of entries) state.entries.set(entry.seq, entry);
  state.last = entries.reduce((most, e) => Math.max(most, e.seq), state.last);
  render();
}

async function reload() {
  const framesBefore = state.statusFrames;
  try {
    if (panel.dataset.runKind === "agent") {
      const response = await fetch(`/api/v1/runs/${state.runId}/transcript`, { credentials: "same-origin" });
      if (response.ok) merge((await response.json()).entries);
    }
    const run = await fetch(`/api/v1/runs/${state.runId}`, { credentials: "same-origin" });
    const { status } = run.ok ? await run.json() : {};
    // A frame that came while this read was on its way is newer than what the read says.
    if (state.statusFrames === framesBefore) setStatus(status);
  } catch (error) {
    console.warn("transcript: could not reload", error);
  }
}

// ---- progress and retry --------------------------------------------------------------------

function progressText() {
  const last = state.entries.get(state.last);
  if (!last) return "Starting…";
  switch (last.kind) {
    case "thinking": return `The model is thinking (turn ${last.turn ?? ""})…`;
    case "waiting": return `Waiting for a reviewer to answer ${last.tool || "a request"}…`;
    case "answer": return `Running ${last.tool || "the tool"} with the answer…`;
    case "assistant":
    case "pending":
    case "asked":
    case "tool_result": return "Running tools…";
    default: return "Working…";
  }
}

function updateProgress() {
  const box = document.getElementById("transcript-progress");
  if (!box) return;
  const active = ACTIVE.has(state.status);
  box.hidden = !active;
  box.dataset.state = active ? (state.entries.get(state.last) || {}).kind || "starting" : "";
  if (active) document.getElementById("transcript-progress-text").textContent = progressText();
}

function setStatus(status) {
  if (!status) return;
  state.status = status;
  panel.dataset.runStatus = status;
  document.getElementById("run-retry-box").hidden = !RETRYABLE.has(status);
  document.getElementById("run-interrupted-note").hidden = status !== "interrupted";
  updateProgress();
}

function setupRetry() {
  const button = document.getElementById("run-retry");
  const errorBox = document.getElementById("run-retry-error");
  button.addEventListener("click", async () => {
    button.disabled = true;
    errorBox.hidden = true;
    try {
      const response = await fetch(`/api/v1/runs/${state.runId}/retry`, {
        method: "POST", headers: { "X-CSRFToken": csrfToken() }, credentials: "same-origin",
      });
      const data = await response.json().catch(() => ({}));
      if (!response.ok) throw new Error(data.message || `The console answered ${response.status}.`);
      window.location.assign(`/runs/${data.id}/`);
    } catch (error) {
      errorBox.textContent = error.message;
      errorBox.hidden = false;
      button.disabled = false;
    }
  });
}

// ---- live ------------------------------------------------------------------------------------

function onFrame(frame) {
  if (frame.type === "snapshot") {
    reload(); // connected or reconnected: whatever happened meanwhile is in the database
    return;
  }
  if (frame.type !== "event" || String(frame.run_id) !== String(state.runId)) return;
  if (frame.run) {
    state.statusFrames += 1;
    setStatus(frame.run.status);
  }
  if (frame.action !== "run.transcript" || !frame.payload || panel.dataset.runKind !== "agent") return;
  const entry = frame.payload;
  if (entry.seq > state.last + 1) reload(); // a gap: read the transcript again
  else add(entry);
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const socket = new WebSocket(`${scheme}://${location.host}/ws/console/`);
  state.socket = socket;
  socket.addEventListener("open", () => { state.retryDelay = 500; });
  socket.addEventListener("message", (message) => {
    try { onFrame(JSON.parse(message.data)); } catch (error) { console.error("transcript: bad frame", error); }
  });
  socket.addEventListener("close", () => {
    setTimeout(connect, state.retryDelay);
    state.retryDelay = Math.min(state.retryDelay * 2, 5000);
  });
}

if (panel) {
  state.runId = panel.dataset.runId;
  const initial = document.getElementById("initial-transcript");
  replaceAll(initial ? JSON.parse(initial.textContent) : []);
  setStatus(panel.dataset.runStatus);
  setupRetry();
  connect();
}
