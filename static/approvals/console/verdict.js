// A request's outcome in words, as a person reads it everywhere: "Declined by bob: too large · 18:31 UTC",
// "Expired at 18:31 UTC". From the request view's "decision" when the server sends one, else from its status.

import { asText, el, readableTime } from "./dom.js";

const OUTCOMES = new Set(["approved", "answered", "declined", "cancelled", "expired"]);

export function decisionOf(request) {
  // {outcome, by, at, comment} of a resolved request view; null while it is open, or closed in a way not
  // yet known (status "resolved": only that it is no longer open).
  if (!request || request.status === "open" || request.status === "resolved") return null;
  const given = request.decision;
  if (given && typeof given === "object" && OUTCOMES.has(given.outcome)) {
    return { outcome: given.outcome, decided_by: given.decided_by || null, by: given.by || null, at: given.at || null, comment: given.comment || "", text: given.text };
  }
  let outcome = request.status;
  if (outcome === "answered") outcome = request.kind === "approval" ? "approved" : "answered";
  if (!OUTCOMES.has(outcome)) outcome = "answered";
  return { outcome, by: request.answered_by || null, at: request.answered_at || null, comment: request.comment || "" };
}

export function decisionText(decision) {
  // "Approved by alice", "Declined by bob: too large", "Cancelled by demo", "Expired at 18:31 UTC": the
  // server's own words when it sent them.
  if (!decision) return "";
  if (decision.text) return decision.text;
  // An expiry is never worded as a person's refusal.
  if (decision.outcome === "expired") return `${decision.at ? `Expired at ${readableTime(decision.at)}` : "Expired"}, nobody answered`;
  const by = ` by ${decision.by || "the console"}`;
  switch (decision.outcome) {
    case "approved": return `Approved${by}`;
    case "answered": return `Answered${by}`;
    case "declined": return `Declined${by}${decision.comment ? `: ${shortened(decision.comment, 120)}` : ""}`;
    case "cancelled": return `Cancelled${by}${decision.comment ? `: ${shortened(decision.comment, 120)}` : ""}`;
    default: return "Closed";
  }
}

export function tombstoneText(request) {
  // Who closed it and when: "Approved by carol · 18:31 UTC" (an expiry, or defaults applied by it, already say when).
  const decision = decisionOf(request);
  if (!decision) return "";
  const time = decision.outcome === "expired" || decision.decided_by === "timeout" ? "" : readableTime(decision.at);
  return time ? `${decisionText(decision)} · ${time}` : decisionText(decision);
}

export function shortened(text, most = 60) {
  // Cut at a word when one ends near the limit: "…for the order that arrived…", not "…arrived da…".
  const flat = String(text ?? "").replace(/\s+/g, " ").trim();
  if (flat.length <= most) return flat;
  let cut = flat.slice(0, most - 1);
  const space = cut.lastIndexOf(" ");
  if (space > most * 0.6) cut = cut.slice(0, space);
  return `${cut.trimEnd()}…`;
}

export function shownValue(value) {
  // A value as a person reads it: numbers bare, text as it is, true/false as yes/no, a list comma-joined,
  // nothing as "(empty)". The diff panel's (confirm.js) and the decision's words, as the server's outcomes.shown.
  if (Array.isArray(value)) return value.length ? value.map(asText).join(", ") : "(none)";
  if (value === true) return "yes";
  if (value === false) return "no";
  return value === null || value === undefined || value === "" ? "(empty)" : asText(value);
}

export function editedNote(changes) {
  // The values the reviewer changed before approving, for the toast: " with amount 5, note (empty)".
  if (!Array.isArray(changes) || !changes.length) return "";
  return ` with ${changes.map((change) => `${change.label} ${change.to}`).join(", ")}`;
}

export function answerVerb(request, frame) {
  // What my own answer did, for the toast: "Approved", "Submitted", "Declined", "Cancelled".
  if (frame && frame.ok === false) {
    if (frame.reason === "cancelled") return "Cancelled";
    const response = (frame.data && frame.data.response) || frame.response;
    return response === "respond" ? "Responded" : response === "request_changes" ? "Changes requested" : "Declined";
  }
  if (!request) return "Answered";
  if (request.kind === "approval") return "Approved";
  if (request.kind === "input" || request.kind === "question") return "Submitted";
  if (request.kind === "authorization") return "Done";
  return "Answered";
}

// What became of an approved call's tool (the request view's ``execution``): "Executing…", "Succeeded: paid 12",
// "Failed: card declined", "Approved, not yet reported" (a host's request it has not reported on). "" for none.
export function executionText(execution, { withMessage = true } = {}) {
  if (!execution || typeof execution !== "object") return "";
  const said = execution.message && withMessage ? `: ${shortened(execution.message, 160)}` : "";
  switch (execution.state) {
    case "executing": return "Executing…";
    case "succeeded": return `Succeeded${said}`;
    case "failed": return `Failed${said}`;
    case "unreported": return "Approved, not yet reported";
    default: return "";
  }
}

export function showExecution(parent, request, { tag = "p", before = null } = {}) {
  // The execution line in ``parent`` (``.execution``), added, updated or removed as ``request`` says; text only.
  const text = executionText(request && request.execution);
  let line = parent.querySelector(":scope > .execution");
  if (!text) { line?.remove(); return null; }
  if (!line) {
    line = el(tag, { class: "execution", role: "status" });
    if (before) parent.insertBefore(line, before); else parent.append(line);
  }
  line.dataset.state = request.execution.state;
  line.textContent = text;
  line.title = request.execution.message || "";
  return line;
}
