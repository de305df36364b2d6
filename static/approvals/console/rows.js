// The inbox's compact rows: one line of facts (kind, tool, host or requester, run starter, age, deadline)
// and the prompt, per request or per group of alike requests. Text is set with textContent only.

import { age, deadlineOf, el, refreshDeadline } from "./dom.js";
import { requesterOf, starterOf } from "./query.js";
import { decisionOf, executionText, tombstoneText } from "./verdict.js";
import { claimText } from "./claims.js";

export function requestRow(request, group = null) {
  const id = String(request.id);
  const row = el("div", {
    class: "row", role: "listitem", tabindex: "-1", "data-request-id": id, "data-kind": request.kind,
    "data-run": request.run ?? null, "aria-label": `${request.kind} ${request.tool || ""}: ${request.prompt || ""}`,
  });
  const check = el("input", { type: "checkbox", class: "row-select", "aria-label": "Select for a bulk answer" });
  const origin = request.host || requesterOf(request);
  const origins = groupOrigins(group);
  const starter = starterOf(request);
  const meta = el("div", { class: "row-meta" },
    el("span", { class: "kind", text: request.kind }),
    el("span", { class: "tool", text: request.tool || "(no tool)" }),
    origins ? el("span", { class: "origin", title: origins.title, text: origins.count })
      : origin ? el("span", { class: "origin", title: `${request.host ? "host" : "requester"}: ${origin}`, text: origin }) : null,
    starter ? el("span", { class: "starter", text: `by ${starter}` }) : null,
    group ? el("span", { class: "alike", text: groupLabel(group) }) : null,
    el("span", { class: "presence", "aria-live": "polite" }),
    el("span", { class: "claim", "aria-live": "polite" }),
    el("span", { class: "row-state" }),
    el("time", { class: "age", "data-since": request.created_at, datetime: request.created_at, text: age(request.created_at) }),
    deadlineOf(request),
  );
  row.append(
    el("label", { class: "row-check" }, check),
    el("div", { class: "row-main" }, meta, el("div", { class: "row-prompt", text: request.prompt || "" })),
    el("a", { class: "permalink", href: `/requests/${encodeURIComponent(id)}/`, title: "Open this request's own page", "aria-label": "Open this request's own page", text: "↗" }),
  );
  row.request = request;
  row.group = group;
  updateRow(row, request);
  return row;
}

export function groupLabel(group) {
  // A group of one is just its request: no "1 alike".
  if (!group || group.count <= 1) return "";
  if (group.by === "run") {
    if (group.run === null || group.run === undefined) return `${group.count} without a run`;
    return `${group.count} in this run`;
  }
  return `${group.count} alike`;
}

function listed(names, count) {
  // "ci-1, ci-2 and ci-3"; "ci-1, …, ci-20 and 4 more" when the server named only the first of them.
  const more = count - names.length;
  if (more > 0) return `${names.join(", ")} and ${more} more`;
  return names.length > 1 ? `${names.slice(0, -1).join(", ")} and ${names[names.length - 1]}` : names.join("");
}

export function groupOrigins(group) {
  // Where a group's requests came from, when more than one place: "4 hosts" (each named in `title` and
  // `names`), else null and the row names its request's own host or requester.
  if (!group) return null;
  const hosts = group.hosts || [], requesters = group.requesters || [];
  const hostCount = group.host_count ?? hosts.length, requesterCount = group.requester_count ?? requesters.length;
  if (hostCount + requesterCount <= 1) return null;
  const plural = (n, noun) => `${n} ${noun}${n === 1 ? "" : "s"}`;
  return {
    count: [hostCount ? plural(hostCount, "host") : "", requesterCount ? plural(requesterCount, "requester") : ""].filter(Boolean).join(" and "),
    title: [hostCount ? `hosts: ${hosts.join(", ")}${hostCount > hosts.length ? ` and ${hostCount - hosts.length} more` : ""}` : "",
      requesterCount ? `requesters: ${requesters.join(", ")}${requesterCount > requesters.length ? ` and ${requesterCount - requesters.length} more` : ""}` : ""]
      .filter(Boolean).join("; "),
    names: listed([...hosts, ...requesters], hostCount + requesterCount),
  };
}

export function groupIds(row) {
  // Every request a row stands for: a group's ids, else its own.
  return row.group && Array.isArray(row.group.ids) && row.group.ids.length ? row.group.ids.map(String) : [row.dataset.requestId];
}

export function updateRow(row, request) {
  // What this viewer may do with it, as the server says (policy.may_answer, assigned_to_me).
  row.request = request;
  const policy = request.policy || {};
  row.classList.toggle("read-only", policy.may_answer === false);
  row.dataset.assigned = policy.assigned_to_me ? "1" : "0";
  const claim = row.querySelector(".claim");
  if (claim) claim.textContent = claimText(request);
  const state = row.querySelector(".row-state");
  // An extension or an escalation moved the deadline, or the policy kept it open past it; a reminder marks it.
  if (!row.classList.contains("closed")) refreshDeadline(row, request);
  row.querySelector(".row-meta .countdown")?.classList.toggle("reminded", Boolean(request.deadline && request.deadline.reminded));
  if (state && !row.classList.contains("closed")) {
    state.textContent = policy.may_answer === false ? "view only" : "";
    state.title = policy.may_answer === false ? policy.why_not || "" : "";
  }
}

export function tombstoneRow(row, request, text = null) {
  // Someone else answered it, or it expired: the row stays, saying who and when, until dismissed.
  row.classList.add("closed");
  row.classList.remove("read-only");
  const check = row.querySelector(".row-select");
  if (check) { check.checked = false; check.disabled = true; }
  row.querySelector(".countdown")?.remove();
  const state = row.querySelector(".row-state");
  if (state) { state.textContent = text || tombstoneText(request) || "No longer open"; state.title = ""; }
  if (request) row.request = request;
  const outcome = decisionOf(request)?.outcome;
  if (outcome) row.dataset.outcome = outcome;
  showRowExecution(row, request);
}

function showRowExecution(row, request) {
  // After the decision: what its tool did ("Executing…", "Succeeded: …", "Approved, not yet reported").
  const text = executionText(request && request.execution);
  let span = row.querySelector(".row-execution");
  if (!text) { span?.remove(); return; }
  if (!span) {
    span = document.createElement("span");
    span.className = "row-execution";
    row.querySelector(".row-state")?.after(span);
  }
  span.dataset.state = request.execution.state;
  span.textContent = text;
}

export function setGroupCount(row, count) {
  if (!row.group) return;
  row.group.count = count;
  const badge = row.querySelector(".alike");
  if (badge) badge.textContent = groupLabel(row.group);
}
