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
};
