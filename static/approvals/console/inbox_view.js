// The inbox list as the reviewer works it: what follows their own answers (a toast, the next request picked),
// clicks and keys on the rows, and the line under the list ("Showing 50 of 2000 requests").

import { state } from "./state.js";
import { isFiltered, isPlainQueue } from "./query.js";
import { tombstoneRow } from "./rows.js";
import { tombstone } from "./cards.js";
import { countHooks, refreshCounts } from "./notifications.js";
import { onReachingEnd } from "./dom.js";
import { toast } from "./toasts.js";
import { answerVerb, editedNote, shortened } from "./verdict.js";
import { removeRow, rowAfterAnswer, rowFor, rows, selectRequest, showDetail, updateFocusBar } from "./detail.js";
import { list, loadMore, reload, showFresh } from "./inbox.js";

const inbox = state.inbox;

// -- answers sent from this page --------------------------------------------------------------------

export function answeredHere(card, frame) {
  // The console took my answer: say so in a toast, and the keyboard goes on with the next request.
  const id = card.dataset.requestId;
  const request = card.request;
  const verb = answerVerb(request, frame.answer || card.sentAnswer);
  const edited = frame.answer && frame.answer.ok === false ? "" : editedNote(card.sentAnswer && card.sentAnswer.changes);
  toast(`${verb}${edited} · ${shortened(request && request.prompt)}`);
  inbox.closed.add(id);
  const row = rowFor(id);
  const active = document.activeElement;
  const keyboardHere = !active || active === document.body || Boolean(document.getElementById("inbox")?.contains(active));
  const wasPicked = inbox.selected === id;
  const next = row ? rowAfterAnswer(row) : null;
  if (row && row.group && row.group.count > 1) { inbox.fresh += 1; showFresh(); }
  removeRow(id);
  if (wasPicked && next) selectRequest(next.dataset.requestId, { focus: keyboardHere });
  else if (wasPicked && keyboardHere) list()?.focus({ preventScroll: true });
  refreshCounts();
}

export function refusedHere(card, message) {
  // The console refused my answer because the request had closed: card and row become tombstones.
  const id = card.dataset.requestId;
  tombstone(card, message);
  const row = rowFor(id);
  if (row) tombstoneRow(row, card.closedRequest && card.closedRequest.status !== "resolved" ? card.closedRequest : null, message);
  updateFocusBar();
}

// -- the counts under the list --------------------------------------------------------------------

function showProgress() {
  const box = document.getElementById("requests-more");
  const drawn = rows({ open: true }).length;
  const plain = isPlainQueue(inbox.query);
  const total = plain ? (state.counts ? state.counts.requests : null) : inbox.count;
  const noun = inbox.grouped ? "groups" : "requests";
  const progress = box && box.querySelector(".progress");
  if (box) box.hidden = !inbox.next && !inbox.loading;
  if (progress) {
    const of = total === null || total === undefined ? "" : inbox.grouped ? ` (${total} requests)` : ` of ${total}${plain ? "" : " matching"}`;
    const shown = inbox.grouped ? `Showing ${drawn} ${noun}${of}` : `Showing ${drawn}${of} ${noun}`;
    progress.textContent = inbox.loading ? `Loading… (${shown.toLowerCase()})` : shown;
  }
  const button = box && box.querySelector("button");
  if (button) { button.disabled = inbox.loading; button.hidden = !inbox.next; }
  // With nothing picked, the detail pane says whether anything is waiting at all: keep it true as rows come and go.
  if (inbox.selected === null) showDetail();
  // An empty list is said once, here: the sticky bar, the bulk bar and the detail pane have nothing to add.
  const nothing = rows().length === 0 && !inbox.loading;
  const empty = document.getElementById("requests-empty");
  if (empty) {
    empty.plain ??= [...empty.childNodes]; // the page's own words: nothing is waiting, and how to start a run
    empty.hidden = !nothing;
    const filtered = isFiltered(inbox.query);
    if (filtered !== empty.filtered) {
      empty.filtered = filtered;
      if (filtered) empty.textContent = "Nothing in this view matches. Clear the search and filters to see every open request.";
      else empty.replaceChildren(...empty.plain);
    }
  }
  for (const id of ["focus-bar", "bulk-bar"]) {
    const bar = document.getElementById(id);
    if (bar) bar.hidden = nothing && inbox.selected === null && inbox.checked.size === 0;
  }
  const matching = document.getElementById("bulk-all");
  if (matching) matching.dataset.count = String(total ?? "");
}

countHooks.push(showProgress);

export function setupInboxList() {
  const box = document.getElementById("requests-more");
  box?.querySelector("button")?.addEventListener("click", () => loadMore());
  if (box) onReachingEnd(box, () => loadMore());
  document.getElementById("inbox-new")?.addEventListener("click", () => reload({ keepPicked: true }));
  list()?.addEventListener("click", (event) => {
    const row = event.target.closest(".row");
    if (!row || event.target.closest(".row-check, a")) return;
    selectRequest(row.dataset.requestId, { focus: true, scroll: false });
  });
  list()?.addEventListener("focusin", (event) => {
    // Tabbing to a row picks it; its checkbox and link are not a pick.
    const row = event.target.matches("#requests > .row") ? event.target : null;
    if (row && row.dataset.requestId !== inbox.selected) selectRequest(row.dataset.requestId, { scroll: false });
  });
  list()?.addEventListener("keydown", (event) => {
    // Enter on a row goes into its card, where Tab reaches its fields and buttons.
    const row = event.target.closest && event.target.closest("#requests > .row");
    if (event.key !== "Enter" || event.target !== row) return;
    event.preventDefault();
    inbox.cards.get(row.dataset.requestId)?.focus();
  });
}
