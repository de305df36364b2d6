// What this page knows: which page it is, and the console's state as the socket has told it.

export const page = document.body.dataset.page;

export const state = {
  seq: 0, requests: new Map(), runs: new Map(), pending: new Map(), nextRef: 1,
  started: false, // true after the first snapshot: later arrivals notify (never take focus)
  notified: new Set(),
  // The server's totals (snapshot.counts), kept current by each event's count_change.
  counts: null,
  // Paging: the cursor of the next page of open requests / active runs (null: all loaded), the key of
  // the last request a page showed, and which lists have a page frame on its way.
  next: null, runsNext: null, loadedUpTo: null, loading: { requests: false, runs: false }, asked: {},
  paging: false, // true while a page's cards are added: they are not arrivals
  // The dashboard's inbox: the view the URL holds, its list's paging, what is picked, checked and kept.
  inbox: {
    query: {}, next: null, count: null, loading: false, generation: 0, grouped: false,
    fresh: 0, // requests that arrived since the list was read and may match its filter: "N new — show"
    closed: new Set(), // ids seen closing: a list read that started before must not show them open again
    selected: null, cards: new Map(), checked: new Set(), allMatching: false,
    listed: new Set(), // ids the current list read counted: a close among them lowers ``count``
    memberOf: new Map(), // id -> the id of the group row that stands for it (group=run|alike)
    listSeq: null, // the snapshot seq the list was read at (a later snapshot reads it again)
  },
};

export function myName() {
  // The signed-in reviewer, as the top bar names them.
  return document.querySelector(".topbar .who")?.textContent.trim() || "";
}
