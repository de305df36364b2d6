// Bulk answers: check rows (or "all N matching this filter"), then Approve or Decline them with one comment.
// A dry run comes first and names how many and which tools; confirming sends exactly the requests it named
// (never one that arrived meanwhile); the result says how many were answered, which were skipped and why, and
// how many had already closed. The server answers each request through the one door and audits each
// (POST /api/v1/requests/bulk); the page only asks and reports.

import { csrfToken, el } from "./dom.js";
import { state } from "./state.js";
import { describeFilters, filtersOf, isFiltered } from "./query.js";
import { groupIds } from "./rows.js";
import { rows } from "./detail.js";
import { toast } from "./toasts.js";
import { countHooks } from "./notifications.js";
import { bringIntoView, guard } from "./guard.js";

export const BULK_MOST = 500; // the contract's most per call

const inbox = state.inbox;
const $ = (id) => document.getElementById(id);

function checkedRows() {
  return rows({ open: true }).filter((row) => row.querySelector(".row-select")?.checked);
}

function checkedIds() {
  return [...new Set(checkedRows().flatMap(groupIds))];
}

function matchingTotal() {
  const total = Number($("bulk-all")?.dataset.count);
  return Number.isFinite(total) && total > 0 ? total : null;
}

export function showBulkBar() {
  // "3 selected", the offer of every request matching the view, and the answer buttons while any is chosen.
  const ids = checkedIds();
  const total = matchingTotal();
  const chosen = inbox.allMatching ? total : ids.length;
  $("bulk-actions").hidden = !chosen;
  $("bulk-bar").classList.toggle("active", Boolean(chosen));
  $("bulk-count").textContent = inbox.allMatching
    ? `All ${total} ${isFiltered(inbox.query) ? "matching this filter" : "open requests"}`
    : ids.length ? `${ids.length} selected` : "";
  const all = $("bulk-all");
  const shown = rows({ open: true }).length;
  all.hidden = inbox.allMatching || !ids.length || total === null || total <= shown || Boolean(inbox.query.group);
  const tooMany = total !== null && total > BULK_MOST;
  all.disabled = tooMany;
  all.textContent = tooMany
    ? `All ${total} match: narrow the filter to ${BULK_MOST} or fewer to answer them at once`
    : `Select all ${total} ${isFiltered(inbox.query) ? "matching this filter" : "open requests"}`;
  const every = $("select-shown");
  const open = rows({ open: true });
  every.checked = open.length > 0 && open.every((row) => row.querySelector(".row-select")?.checked);
  every.indeterminate = !every.checked && ids.length > 0;
  for (const row of rows()) row.classList.toggle("checked", Boolean(row.querySelector(".row-select")?.checked));
}

export function clearBulk() {
  for (const row of rows()) { const box = row.querySelector(".row-select"); if (box) box.checked = false; }
  inbox.allMatching = false;
  showBulkBar();
}

function target() {
  // What the bulk call names: every request matching the view's filter, or the checked rows' ids.
  return inbox.allMatching ? { filter: { status: "open", ...filtersOf(inbox.query) } } : { ids: checkedIds() };
}

async function postBulk(body) {
  const response = await fetch("/api/v1/requests/bulk", {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrfToken() },
    body: JSON.stringify(body),
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.message || `The console answered ${response.status}; nothing was answered.`);
  return data;
}

function toolsText(tools) {
  return Object.entries(tools || {}).sort((a, b) => b[1] - a[1]).map(([tool, n]) => `${tool || "(no tool)"} ${n}`).join(", ");
}

function plural(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

function reasonsList(skipped, most = 20) {
  const list = el("ul", { class: "bulk-skipped" }, ...skipped.slice(0, most).map((item) => el("li", {},
    el("code", { text: String(item.id) }), ": ", item.reason || "skipped")));
  if (skipped.length > most) list.append(el("li", { class: "muted", text: `and ${skipped.length - most} more` }));
  return list;
}

async function ask(ok) {
  // First the dry run: nothing is answered; the confirmation names how many, which tools, and who is skipped.
  const body = { ok, comment: $("bulk-comment").value.trim(), dry_run: true, ...target() };
  const box = $("bulk-confirm");
  $("bulk-result").hidden = true;
  let plan;
  try {
    plan = await postBulk(body);
  } catch (error) {
    return showResult(el("p", { class: "error", role: "alert", text: error.message }));
  }
  const verb = ok ? "Approve" : "Decline";
  const skipped = plan.skipped || [];
  const closed = (plan.closed || []).length;
  // What the confirmation names is what is sent: the ids the dry run would answer or record, with the filter
  // (if any) still required to match each, so nothing that arrives while it is open is answered too.
  const named = [...(plan.answered || []), ...(plan.recorded || [])];
  const answered = named.length;
  const parts = [el("p", { id: "bulk-confirm-text", class: "bulk-question" },
    el("strong", { text: answered ? `${verb} ${plural(answered, "request")}?` : `None of these can be ${ok ? "approved" : "declined"} by you.` }),
    answered ? ` Tools: ${toolsText(plan.tools)}.` : "")];
  if (inbox.allMatching) parts.push(el("p", { class: "muted", text: `Filter: ${describeFilters(inbox.query) || "every open request"}` }));
  if (body.comment) parts.push(el("p", { class: "muted", text: `With the comment: “${body.comment}”` }));
  if (ok) parts.push(el("p", { class: "muted", text: "Each is approved with its own arguments as asked; no edit is sent." }));
  if (answered) parts.push(el("p", { class: "muted", text: "Each goes through on its own, with its own audit entry; any you may not answer is skipped and listed." }));
  if (skipped.length) parts.push(el("p", { text: `${plural(skipped.length, "request")} will be skipped:` }), reasonsList(skipped));
  if (closed) parts.push(el("p", { class: "muted", text: `${closed} already closed.` }));
  const buttons = el("div", { class: "confirm-buttons" });
  if (answered) {
    buttons.append(el("button", {
      type: "button", class: ok ? "primary bulk-send" : "danger bulk-send", text: `${verb} ${answered}`,
      onclick: () => send({ ...body, ids: named, dry_run: false }, ok, plan),
    }));
  }
  buttons.append(el("button", { type: "button", class: "secondary", text: answered ? "Cancel" : "Close", onclick: () => closeConfirm({ refocus: true }) }));
  parts.push(buttons);
  box.replaceChildren(...parts);
  box.hidden = false;
  // Below the bar that opened it; its buttons arm first and a held key or an earlier press never passes it.
  opener = ok ? $("bulk-approve") : $("bulk-decline");
  guard(box, { label: $("bulk-confirm-text"), onEscape: () => closeConfirm({ refocus: true }) });
  box.querySelector("button")?.focus({ preventScroll: true });
  bringIntoView(box, opener.getBoundingClientRect());
}

let opener = null; // the bar's button that asked, for the focus to return to

function closeConfirm({ refocus = false } = {}) {
  const box = $("bulk-confirm");
  const hadFocus = box.contains(document.activeElement);
  box.hidden = true;
  box.replaceChildren();
  if (refocus && hadFocus && opener && !opener.closest("[hidden]")) opener.focus();
}

async function send(body, ok, plan) {
  // The result reports the whole confirmation: what the dry run already skipped or found closed, and what
  // the call did to the requests it sent.
  closeConfirm();
  let result;
  try {
    result = await postBulk(body);
  } catch (error) {
    return showResult(el("p", { class: "error", role: "alert", text: error.message }));
  }
  const answered = (result.answered || []).length;
  const recorded = (result.recorded || []).length;
  const skipped = [...(plan.skipped || []), ...(result.skipped || [])];
  const closed = [...(plan.closed || []), ...(result.closed || [])];
  const done = `${ok ? "Approved" : "Declined"} ${answered}`;
  const parts = [el("p", { class: "bulk-summary" }, el("strong", { text: done }),
    ` · ${skipped.length} skipped · ${closed.length} already closed`)];
  if (recorded) parts.push(el("p", { class: "muted", text: `${plural(recorded, "approval")} counted towards a quorum: still open for another reviewer.` }));
  if (skipped.length) parts.push(reasonsList(skipped, 100));
  if (closed.length) parts.push(el("p", { class: "muted bulk-closed", text: `Already closed: ${closed.slice(0, 20).join(", ")}${closed.length > 20 ? " …" : ""}` }));
  parts.push(el("button", { type: "button", class: "small", text: "Dismiss", onclick: () => { $("bulk-result").hidden = true; } }));
  showResult(...parts);
  toast(`${done} · ${skipped.length} skipped · ${closed.length} already closed`);
  clearBulk();
}

function showResult(...parts) {
  const box = $("bulk-result");
  box.replaceChildren(...parts);
  box.hidden = false;
}

export function setupBulk() {
  const list = $("requests");
  if (!list || !$("bulk-bar")) return;
  list.addEventListener("change", (event) => {
    if (!event.target.matches(".row-select")) return;
    if (!event.target.checked) inbox.allMatching = false;
    showBulkBar();
  });
  $("select-shown").addEventListener("change", (event) => {
    for (const row of rows({ open: true })) row.querySelector(".row-select").checked = event.target.checked;
    if (!event.target.checked) inbox.allMatching = false;
    showBulkBar();
  });
  $("bulk-all").addEventListener("click", () => {
    for (const row of rows({ open: true })) row.querySelector(".row-select").checked = true;
    inbox.allMatching = true;
    showBulkBar();
  });
  $("bulk-approve").addEventListener("click", () => ask(true));
  $("bulk-decline").addEventListener("click", () => ask(false));
  $("bulk-clear").addEventListener("click", clearBulk);
  countHooks.push(showBulkBar); // the list changed: what is checked, and how many match, may have too
  showBulkBar();
}
