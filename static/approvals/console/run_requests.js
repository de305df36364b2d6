// The run page's list of its requests, open and decided: each with its prompt and, once decided, the
// decision in words ("Declined by bob: too large"), what was chosen, who, when and the comment. The
// server draws it (templates/approvals/_run_request.html, the same markup); the console socket keeps
// it current. Text from a request is set with textContent, never innerHTML.

import { el, timeNode } from "./dom.js";
import { executionText, shownValue } from "./verdict.js";

const refreshing = { active: false, seen: [] }; // events that arrive while the list is read again

function list() {
  return document.getElementById("run-requests");
}

export function answerGiven(request) {
  // What the answer chose or typed beyond its comment and an approval's args (its decision's changes say
  // those in words), as compact JSON ("" when nothing): frames.answer_given.
  const answer = request.answer || {};
  const data = answer.ok && answer.data && typeof answer.data === "object" ? answer.data : {};
  const beside = request.kind === "approval" ? ["comment", "args"] : ["comment"];
  const given = Object.fromEntries(Object.entries(data).filter(([key]) => !beside.includes(key)));
  return Object.keys(given).length ? JSON.stringify(given) : "";
}

export function changesList(changes) {
  // What an approval edited, whole: "amount 33 → 4" per line, as the diff panel showed it before sending.
  return el("ul", { class: "decision-changes" }, ...changes.map((change) => el("li", {},
    el("code", { class: "change-field", text: change.field }), " ",
    el("del", { text: shownValue(change.from) }), " → ", el("ins", { text: shownValue(change.to) }))));
}

function decisionFacts(request) {
  const decision = request.decision;
  const given = answerGiven(request);
  const changes = Array.isArray(decision.changes) ? decision.changes : [];
  return el("dl", { class: "kv decision-facts" },
    changes.length ? el("dt", { text: "Changed" }) : null,
    changes.length ? el("dd", {}, changesList(changes)) : null,
    given ? el("dt", { text: "Answer" }) : null,
    given ? el("dd", {}, el("code", { class: "decision-given", text: given })) : null,
    el("dt", { text: "By" }), el("dd", { class: "decision-by", text: decision.decided_by === "timeout" ? "nobody: the deadline passed" : decision.by || "the console" }),
    el("dt", { text: "When" }), el("dd", {}, timeNode(decision.at, { class: "decision-at" })),
    decision.comment ? el("dt", { text: "Comment" }) : null,
    decision.comment ? el("dd", { class: "decision-comment", text: decision.comment }) : null,
  );
}

function requestRow(request) {
  const decision = request.decision;
  const row = el("li", { class: "run-request", "data-request-id": request.id, "data-status": request.status },
    el("p", { class: "run-request-head muted" },
      el("span", { class: "kind", text: request.kind }),
      request.tool ? " " : null, request.tool ? el("code", { text: request.tool }) : null,
      " · asked ", timeNode(request.created_at)),
    el("p", { class: "prompt", text: request.prompt }),
    decision
      ? el("p", { class: "decision", "data-outcome": decision.outcome }, el("strong", { class: "decision-text", text: decision.text }))
      : el("p", { class: "decision muted", "data-outcome": "open", text: "Waiting for an answer." }),
    request.execution ? el("p", {
      class: "execution", role: "status", "data-state": request.execution.state, title: request.execution.message || "",
      text: executionText(request.execution),
    }) : null,
    decision ? decisionFacts(request) : null,
  );
  return row;
}

function showRunDecision(request) {
  // A tool run asks one thing at a time: its latest request's decision sits beside the run's result.
  const node = document.getElementById("run-decision");
  if (!node || !request.decision) return;
  node.textContent = request.decision.text;
  node.dataset.outcome = request.decision.outcome;
}

function showEmpty() {
  const box = list();
  const empty = document.getElementById("run-requests-empty");
  if (box && empty) empty.hidden = box.children.length > 0;
}

export function showRunRequest(frame) {
  // Every event, in sequence: the list is current to it. One about this run's requests redraws its row,
  // or adds it when this is the list's last page.
  const box = list();
  const detail = document.getElementById("run-detail");
  if (!box || !detail) return;
  if (refreshing.active) refreshing.seen.push(frame);
  if (frame.seq > Number(box.dataset.seq)) box.dataset.seq = frame.seq;
  const request = frame.request;
  if (!request || String(request.run) !== detail.dataset.runId) return;
  showRunDecision(request);
  const existing = box.querySelector(`[data-request-id="${CSS.escape(String(request.id))}"]`);
  if (existing) existing.replaceWith(requestRow(request));
  else if (box.dataset.lastPage === "true") box.append(requestRow(request));
  showEmpty();
}

export async function refreshRunRequests(seq) {
  // The socket (re)connected at `seq`: when the console moved on since the list was drawn, draw it again
  // from this very page, then re-apply whatever arrived meanwhile that the fresh copy predates.
  const box = list();
  if (!box || refreshing.active || !(Number(seq) > Number(box.dataset.seq))) return;
  refreshing.active = true;
  refreshing.seen = [];
  try {
    const response = await fetch(location.href, { credentials: "same-origin" });
    if (!response.ok) return;
    const fetched = new DOMParser().parseFromString(await response.text(), "text/html");
    const fresh = fetched.getElementById("run-requests");
    if (!fresh) return;
    const decided = fetched.getElementById("run-decision");
    const shown = document.getElementById("run-decision");
    if (decided && shown) {
      shown.textContent = decided.textContent;
      if (decided.dataset.outcome) shown.dataset.outcome = decided.dataset.outcome;
    }
    box.replaceChildren(...[...fresh.children].map((node) => document.importNode(node, true)));
    box.dataset.seq = fresh.dataset.seq;
    box.dataset.lastPage = fresh.dataset.lastPage;
    const later = refreshing.seen.filter((frame) => frame.seq > Number(fresh.dataset.seq));
    refreshing.active = false;
    for (const frame of later) showRunRequest(frame);
  } catch (error) {
    console.warn("run page: could not read its requests again", error);
  } finally {
    refreshing.active = false;
    showEmpty();
  }
}
