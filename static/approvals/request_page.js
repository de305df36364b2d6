// toolnexus console, a request's own page. Open, it is the same card as the inbox's and the run page's
// (console/cards.js), answered through the console socket and kept live by it: a claim, a quorum's
// progress, another reviewer's answer and the expiry show as they happen, without a reload. Once this
// reviewer's answer is taken the page reloads to say what was decided (the draft is gone by then, see
// console/drafts.js). Resolved, it shows the same tool call, read-only, above the decision. Text from a
// tool or a host is set with textContent, never innerHTML.

import { el, readableTime, timeNode } from "./console/dom.js";
import { upsertRequest } from "./console/cards.js";
import { startConsole } from "./console/live.js";
import { applyClaim } from "./console/claims.js";
import { decisionOf, decisionText, executionText } from "./console/verdict.js";
import { otherData, toolCall } from "./console/toolcall.js";

const request = JSON.parse(document.getElementById("initial-request").textContent);
const detail = document.getElementById("request-detail");
const list = document.getElementById("requests");

function quorumText(policy) {
  return policy && policy.quorum > 1 ? ` · ${(policy.approvals || []).length} of ${policy.quorum} approvals` : "";
}

function follow(view) {
  // The facts beside the card, as the socket tells them: status, who is on it, the quorum, the decision.
  if (!view || String(view.id) !== detail.dataset.requestId) return;
  detail.dataset.status = view.status;
  const status = document.getElementById("request-status");
  if (status) { status.dataset.status = view.status; status.textContent = view.status; }
  const deadline = document.getElementById("request-deadline");
  const note = view.deadline_note || "";
  if (deadline && view.expiresAt && (deadline.dataset.expires !== view.expiresAt || (deadline.dataset.note || "") !== note)) {
    // Moved by an extension or an escalation, or kept open past it: the page's own line says so, as the card does.
    deadline.dataset.expires = view.expiresAt;
    deadline.dataset.note = note;
    deadline.replaceChildren(el("time", { datetime: view.expiresAt, title: view.expiresAt, text: readableTime(view.expiresAt) }));
    if (note) deadline.append(" ", el("span", { class: "deadline-note", text: `(${note})` }));
  }
  const policy = document.getElementById("request-policy");
  if (policy && view.policy) policy.textContent = `${view.policy.name}${quorumText(view.policy)}`;
  const claim = document.getElementById("request-claim");
  if (view.status === "open") {
    if (claim && !claim.querySelector(".focus-claim")) claim.replaceChildren(); // the server's name, now live
    if (claim) {
      applyClaim(claim, view);
      claim.closest("div").hidden = !claim.textContent.trim(); // nobody on it, and not yours to claim
    }
    return;
  }
  claim?.closest("div")?.remove();
  document.getElementById("requests-keys-hint")?.remove();
  showSignature(view);
  // Closed by someone else or the deadline: the card is a tombstone, and the decision is said here. After this
  // reviewer's own answer the card goes instead, and the page reloads to say it.
  if (list.querySelector("article.card.closed") && !document.getElementById("request-decision")) {
    const decision = decisionOf(view);
    status?.closest("div")?.after(el("div", {},
      el("dt", { text: "Decision" }),
      el("dd", { class: "decision", id: "request-decision", "data-outcome": decision.outcome }, el("strong", { text: decisionText(decision) }))));
  }
}

function digest(value, id) {
  // A call's digest, shown whole and wrapping; one click selects it all (request_page.css).
  return el("code", { class: "digest", id, tabindex: "0", title: value, text: value });
}

function showSignature(view) {
  // Once resolved, as the server draws it (request.html): the call it runs as when an approval changed it, and
  // the key that signed the answer with who and when, or that it was decided before answers were signed.
  if (!view || String(view.id) !== detail.dataset.requestId || view.status === "open") return;
  if (document.getElementById("request-signature")) return;
  const signature = view.answer && view.answer.signature;
  const facts = [];
  if (signature && signature.run_digest !== view.call_digest) {
    facts.push(el("div", { class: "call-facts" }, el("dt", { text: "Runs as" }), el("dd", {}, digest(signature.run_digest, "request-run-digest"))));
  }
  const said = signature
    ? ["Signed by key ", el("code", { class: "kid", text: signature.kid }),
      ` · ${signature.by || (signature.decided_by === "timeout" ? "the deadline" : "the console")} · `, timeNode(signature.at)]
    : ["Not signed (decided before the console signed answers)"];
  facts.push(el("div", { class: "call-facts" }, el("dt", { text: "Signature" }),
    el("dd", { id: "request-signature", "data-kid": signature ? signature.kid : "" }, ...said)));
  const after = document.getElementById("request-call-digest")?.closest("div");
  if (after) after.after(...facts);
  else detail.querySelector("dl.kv")?.append(...facts);
}

function showExecution(view) {
  // What became of the approved call's tool, live: executing, then how it ended, with its message whole.
  if (!view || String(view.id) !== detail.dataset.requestId) return;
  let row = document.getElementById("request-execution-row");
  if (!row && view.execution) {
    row = el("div", { id: "request-execution-row" }, el("dt", { text: "Execution" }),
      el("dd", { class: "execution", id: "request-execution", role: "status" }));
    const decision = document.getElementById("request-decision");
    const anchor = decision ? (decision.parentElement.tagName === "DIV" ? decision.parentElement : decision)
      : document.getElementById("request-status")?.closest("div");
    anchor?.after(row);
  }
  if (!row) return;
  row.hidden = !view.execution;
  const facts = document.getElementById("request-execution");
  if (!view.execution || !facts) return;
  facts.dataset.state = view.execution.state;
  facts.replaceChildren(executionText(view.execution, { withMessage: false }));
  if (view.execution.message) facts.append(el("pre", { class: "execution-message", text: view.execution.message }));
}

document.addEventListener("console:request", (event) => showExecution(event.detail));

if (request.status === "open" && list) {
  document.addEventListener("console:request", (event) => follow(event.detail));
  upsertRequest(request);
  follow(request);
  // The card leaves once this reviewer's answer is taken: show the decision. A card someone else's answer or
  // the deadline closed stays as a tombstone (with whatever was typed), and the facts above say what happened.
  new MutationObserver(() => {
    if (!list.querySelector("article.card")) window.location.reload();
  }).observe(list, { childList: true });
  startConsole();
} else {
  document.getElementById("request-call")?.append(toolCall(request));
  // Reject options were offered when declining; the decision names the one picked (Reason).
  const rest = otherData(request.data, { args: request.args || {}, omit: ["reject_options"] });
  if (rest) document.getElementById("request-data")?.append(rest);
  // Decided, its tool may still be running or its host may report yet: the socket keeps the line current.
  if (request.execution && ["executing", "unreported"].includes(request.execution.state)) startConsole();
}
