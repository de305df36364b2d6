// The dashboard's inbox list: one compact row per request (or per group), read a page at a time from the
// socket's snapshot (the plain queue) or GET /api/v1/requests (a search, filter, sort or grouping), and
// kept current by the socket's events: counts and the rows on the page only. A new request joins the plain
// queue at its end; in any other view it is counted as "N new — show" instead of reshuffling the list.

import { myName, state } from "./state.js";
import { apiPath, isPlainQueue, matchesQuery } from "./query.js";
import { requestRow, setGroupCount, tombstoneRow, updateRow } from "./rows.js";
import { closedMessage, compareKeys, requestKey, showCardExecution, showFirstApproval, tombstone } from "./cards.js";
import { applyPolicy, forgetPresence } from "./team.js";
import { notify, refreshCounts } from "./notifications.js";
import { tombstoneText } from "./verdict.js";
import { placeDetail, removeRow, rowFor, rows, selectRequest, showDetail, updateFocusBar } from "./detail.js";
import { socket } from "./socket.js";

const PAGE_ROWS = 50;
const RELOAD_MOST_ROWS = 500; // the API's page limit: a reconnect reads again at most this many rows
export const RESTORE_REF = "page-inbox"; // the plain queue's page frames after a reconnect

const inbox = state.inbox;

export function list() {
  return document.getElementById("requests");
}

export async function getJson(path) {
  const response = await fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" } });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.message || `The console answered ${response.status}; reload the page to try again.`);
  return data;
}

function itemsOf(data) {
  // A list answer's rows: its groups (group=run|alike) when it has them, else one per request.
  if (Array.isArray(data.groups) && inbox.query.group) {
    return data.groups.filter((g) => g && g.request).map((g) => ({
      request: g.request,
      group: {
        key: g.key, count: g.count, ids: (g.ids || []).map(String), by: inbox.query.group, run: g.request.run ?? null,
        hosts: g.hosts || [], host_count: g.host_count, requesters: g.requesters || [], requester_count: g.requester_count,
      },
    }));
  }
  return (data.requests || []).map((request) => ({ request, group: null }));
}

function makeRow(request, group) {
  const row = requestRow(request, group);
  if (request.status && request.status !== "open") tombstoneRow(row, request); // a view of resolved requests
  row.sortKey = requestKey(request);
  row.selectGroup = () => checkRows([row], true);
  inbox.listed.add(String(request.id));
  for (const id of group ? group.ids : []) { inbox.memberOf.set(id, String(request.id)); inbox.listed.add(id); }
  return row;
}

function refreshRow(row, request, group) {
  updateRow(row, request);
  if (group) { row.group = group; setGroupCount(row, group.count); }
  const card = inbox.cards.get(String(request.id));
  if (card && !card.classList.contains("closed")) {
    card.request = request;
    applyPolicy(card, request);
    showFirstApproval(card, request);
  }
}

export function checkRows(targets, checked) {
  for (const row of targets) {
    const box = row.querySelector(".row-select");
    if (!box || box.disabled) continue;
    box.checked = checked;
    box.dispatchEvent(new Event("change", { bubbles: true }));
  }
}

function keepFocus(replace) {
  // Rebuilding the list must not drop the keyboard's place: a row that stays keeps the focus.
  const active = document.activeElement;
  replace();
  if (active && active !== document.activeElement && active.isConnected) active.focus({ preventScroll: true });
}

// -- reading the list --------------------------------------------------------------------------

export function onSnapshot(snapshot) {
  // A snapshot (the page's own, then the socket's on each connect): the plain queue takes its first page,
  // then reads again as many rows as it showed; any other view reads its list again unless nothing
  // happened since it was read.
  if (isPlainQueue(inbox.query)) {
    inbox.listSeq = snapshot.seq;
    reconcilePlain(snapshot.requests || [], null, snapshot.next || null, rows({ open: true }).length);
  } else if (inbox.listSeq !== snapshot.seq) {
    inbox.listSeq = snapshot.seq;
    reload({ keepPicked: true });
  }
  refreshCounts();
}

export function onRestoredPage(frame) {
  // The socket's next page of the queue, asked for after a snapshot to bring back the rows shown before it.
  const restoring = inbox.restoring;
  if (!restoring || frame.after !== restoring.after || !isPlainQueue(inbox.query)) return; // asked before a newer view
  reconcilePlain(frame.requests || [], restoring.afterKey, frame.next || null, restoring.wanted);
}

function reconcilePlain(requests, afterKey, next, wanted) {
  // One page of the queue as the server has it now, from just after `afterKey` (the start when null) to its
  // last request, or to the end when it is the last page. Rows in that range it does not list were closed
  // while this page was not listening: they go, unless picked or typed in (those become tombstones).
  // Rows after it stay while fewer than `wanted` (the rows shown before the snapshot) have been read, and
  // the socket's next page is asked for until each is vouched for: after a reconnect the list keeps its
  // length, order, pick and scroll position. Past that, only a picked or typed-in row stays.
  const listed = new Set(requests.map((r) => String(r.id)));
  const endKey = next && requests.length ? requestKey(requests[requests.length - 1]) : null;
  const wantedMore = wanted - requests.length;
  let beyond = false;
  for (const row of rows()) {
    const id = row.dataset.requestId;
    if (listed.has(id) || row.classList.contains("closed")) continue;
    if (afterKey && row.sortKey && compareKeys(row.sortKey, afterKey) <= 0) continue;
    const kept = id === inbox.selected || inbox.cards.get(id)?.touched;
    if (endKey && row.sortKey && compareKeys(row.sortKey, endKey) > 0) {
      if (wantedMore > 0) beyond = true;
      else if (!kept) { row.remove(); inbox.cards.delete(id); inbox.listed.delete(id); }
      continue;
    }
    if (kept) closeRow(id, null, "No longer open: it closed while this page was reconnecting.");
    else { row.remove(); inbox.cards.delete(id); inbox.listed.delete(id); }
  }
  inbox.grouped = false;
  for (const request of requests) {
    const id = String(request.id);
    const row = rowFor(id);
    if (row) refreshRow(row, request, null);
    else if (!inbox.closed.has(id)) insertSorted(makeRow(request, null));
  }
  inbox.next = next;
  inbox.count = null;
  const restoring = beyond && next ? askRestoredPage(next, endKey, wantedMore) : null;
  if (restoring || inbox.restoring) inbox.loading = Boolean(restoring); // Load more waits for the rows shown before
  inbox.restoring = restoring;
  afterListChange();
}

function askRestoredPage(after, afterKey, wanted) {
  // One bounded page frame at a time, on the socket: events committed after its read follow it there.
  if (!socket || socket.readyState !== WebSocket.OPEN) return null;
  socket.send(JSON.stringify({ type: "page", of: "requests", after, ref: RESTORE_REF }));
  return { after, afterKey, wanted };
}

function insertSorted(row) {
  // The plain queue's order, oldest first: a page's rows go before requests that arrived since.
  const box = list();
  let before = null;
  for (let node = box.lastElementChild; node; node = node.previousElementSibling) {
    if (!node.classList.contains("row")) continue;
    if (!node.sortKey || compareKeys(node.sortKey, row.sortKey) <= 0) break;
    before = node;
  }
  box.insertBefore(row, before);
}

export async function reload({ keepPicked = false } = {}) {
  // Reads the view's first page again (as many rows as are shown, after a reconnect) and redraws the list.
  const generation = ++inbox.generation;
  inbox.restoring = null;
  inbox.loading = true;
  inbox.fresh = 0;
  showFresh();
  refreshCounts();
  const limit = keepPicked ? Math.min(Math.max(rows().length, PAGE_ROWS), RELOAD_MOST_ROWS) : PAGE_ROWS;
  let data;
  try {
    data = await getJson(apiPath(inbox.query, { limit }));
  } catch (error) {
    if (generation !== inbox.generation) return;
    inbox.loading = false;
    showListError(error.message);
    refreshCounts();
    return;
  }
  if (generation !== inbox.generation) return; // a newer view was asked for meanwhile
  inbox.loading = false;
  showListError("");
  const late = replaceRows(itemsOf(data), { keepPicked });
  inbox.grouped = Boolean(inbox.query.group && Array.isArray(data.groups));
  inbox.next = data.next || null;
  inbox.count = typeof data.count === "number" ? Math.max(0, data.count - late) : null;
  afterListChange();
}

function replaceRows(items, { keepPicked }) {
  // Returns how many listed requests closed while the list was being read (the server counted them open).
  let late = 0;
  const old = new Map(rows().map((row) => [row.dataset.requestId, row]));
  inbox.listed = new Set();
  inbox.memberOf = new Map();
  const drawn = [];
  for (const { request, group } of items) {
    const id = String(request.id);
    if (inbox.closed.has(id) && !group && request.status === "open") { late += 1; continue; } // it closed since
    let row = old.get(id);
    if (row && !row.classList.contains("closed") && Boolean(row.group) === Boolean(group)) {
      refreshRow(row, request, group);
      inbox.listed.add(id);
      for (const member of group ? group.ids : []) { inbox.memberOf.set(member, id); inbox.listed.add(member); }
      old.delete(id);
    } else {
      row = makeRow(request, group);
    }
    drawn.push(row);
  }
  if (keepPicked && inbox.selected && old.has(inbox.selected)) drawn.push(old.get(inbox.selected));
  for (const [id] of old) {
    if (id === inbox.selected && keepPicked) continue;
    if (!inbox.cards.get(id)?.touched) inbox.cards.delete(id); // a touched card waits in case its row returns
  }
  keepFocus(() => list().replaceChildren(...drawn));
  if (inbox.selected && !rowFor(inbox.selected)) selectRequest(null);
  return late;
}

export async function loadMore() {
  // The next page of this view, after the last one shown: the Load more button and the scroll both ask.
  if (!inbox.next || inbox.loading) return;
  const generation = inbox.generation;
  const after = inbox.next;
  inbox.loading = true;
  refreshCounts();
  let data;
  try {
    data = await getJson(apiPath(inbox.query, { after, limit: PAGE_ROWS }));
  } catch (error) {
    if (generation === inbox.generation) {
      inbox.loading = Boolean(inbox.restoring);
      showListError(error.message);
      refreshCounts();
    }
    return;
  }
  if (generation !== inbox.generation) return;
  inbox.loading = Boolean(inbox.restoring); // a reconnect's snapshot may have begun reading rows again meanwhile
  showListError("");
  const plain = isPlainQueue(inbox.query);
  let late = 0;
  for (const { request, group } of itemsOf(data)) {
    const id = String(request.id);
    if (rowFor(id)) { refreshRow(rowFor(id), request, group); continue; }
    if (inbox.closed.has(id) && !group && request.status === "open") { late += 1; continue; }
    const row = makeRow(request, group);
    if (plain) insertSorted(row);
    else list().append(row);
  }
  if (inbox.next === after) inbox.next = data.next || null; // unless a snapshot moved the list on meanwhile
  if (typeof data.count === "number" && !plain) inbox.count = Math.max(0, data.count - late);
  afterListChange();
}

function afterListChange() {
  if (inbox.selected === null && inbox.query.request && rowFor(inbox.query.request)) {
    selectRequest(inbox.query.request, { scroll: true }); // the URL's pick, once its row is listed
  } else {
    showDetail();
  }
  placeDetail();
  refreshCounts();
}

export function showListError(message) {
  const box = document.getElementById("requests-error");
  if (box) { box.textContent = message; box.hidden = !message; }
}

export function showFresh() {
  const button = document.getElementById("inbox-new");
  if (!button) return;
  button.hidden = inbox.fresh === 0;
  button.textContent = inbox.fresh === 1 ? "1 new request — show" : `${inbox.fresh} new requests — show`;
}

// -- live events ---------------------------------------------------------------------------------

export function onRequest(request, action = "") {
  // One request as an event left it: update its row and card, close it, or (when the event opened it)
  // count it as new. An event about an open request this page does not list (a refused answer, a claim,
  // a quorum's approval) is no arrival: it was there all along, further down or outside the view.
  const id = String(request.id);
  if (request.status !== "open") {
    const closedNow = !inbox.closed.has(id);
    inbox.closed.add(id);
    const status = inbox.query.status || "open";
    if (status === "open" && inbox.count !== null) {
      // Listed here, or (judged as an arrival is) one of the matching requests beyond the loaded pages.
      const listed = inbox.listed.delete(id);
      const unloaded = closedNow && !inbox.query.group && !inbox.memberOf.has(id)
        && matchesQuery({ ...request, status: "open" }, inbox.query);
      if (listed || unloaded) inbox.count = Math.max(0, inbox.count - 1);
    }
    if (closedNow && status !== "open" && !rowFor(id) && !inbox.memberOf.has(id) && matchesQuery(request, inbox.query)) {
      inbox.fresh += 1; // a view of resolved requests: this one is new in it
      showFresh();
    }
    closeRow(id, request);
  } else {
    inbox.closed.delete(id);
    const row = rowFor(id);
    if (row) {
      if (!row.classList.contains("closed")) refreshRow(row, request, row.group);
    } else if (!inbox.memberOf.has(id) && action === "request.opened") {
      arrived(request);
    }
  }
  updateFocusBar();
  refreshCounts();
}

function arrived(request) {
  const id = String(request.id);
  if (isPlainQueue(inbox.query)) {
    // Everything loaded: it joins the end of the queue (it takes no focus). Otherwise Load more brings it.
    if (!inbox.next) insertSorted(makeRow(request, null));
  } else if (matchesQuery(request, inbox.query)) {
    inbox.fresh += 1;
    if (inbox.count !== null && !inbox.query.group) inbox.count += 1;
    showFresh();
  }
  if (state.started && !state.paging) notify(request, rowFor(id) || { isConnected: false });
  placeDetail();
}

function closeRow(id, request, text = null) {
  // Someone else answered it, it expired, or the host withdrew it: a tombstone says who and when.
  const groupId = inbox.memberOf.get(id);
  if (groupId && groupId !== id) return closeGroupMember(groupId, id);
  const row = rowFor(id);
  const card = inbox.cards.get(id);
  if (card && card.inFlight) { card.closedRequest = request || { status: "resolved" }; return; } // our reply decides
  const words = text || (request ? tombstoneText(request) : "");
  const mine = request && request.answered_by && request.answered_by === myName();
  if (mine && !card?.touched && id !== inbox.selected) {
    // My own answer from another tab or a bulk answer: nothing to tell, the row goes.
    removeRow(id);
    return;
  }
  if (row && row.group && row.group.count > 1) {
    setGroupCount(row, row.group.count - 1);
    inbox.fresh += 1; // the group's other requests are still open: a fresh read shows the next of them
    showFresh();
  }
  if (row) tombstoneRow(row, request, words || "No longer open");
  if (card && !card.classList.contains("closed")) tombstone(card, text || closedMessage(request), request);
  else if (card) showCardExecution(card, request); // what its tool did since: executing, then how it ended
  forgetPresence(id, [row, card]);
}

function closeGroupMember(groupId, id) {
  const row = rowFor(groupId);
  inbox.memberOf.delete(id);
  if (!row || !row.group) return;
  row.group.ids = row.group.ids.filter((member) => member !== id);
  setGroupCount(row, Math.max(1, row.group.count - 1));
}
