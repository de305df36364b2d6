// The counts (the server's totals on the page and in the title) and browser notifications.

import { asText } from "./dom.js";
import { page, state } from "./state.js";

export function notify(request, card) {
  if (request.policy && request.policy.may_answer === false) return;
  if (state.notified.has(request.id)) return;
  state.notified.add(request.id);
  if (typeof Notification === "undefined" || Notification.permission !== "granted") return;
  try {
    const note = new Notification(`toolnexus: ${request.kind} request from ${request.tool || "a tool"}`, {
      body: asText(request.prompt).slice(0, 240), tag: `request-${request.id}`,
    });
    note.onclick = () => { window.focus(); if (card.isConnected) card.focus(); note.close(); };
  } catch (e) { /* a browser that only notifies from a service worker */ }
}

export function setupNotifications() {
  const button = document.getElementById("enable-notifications");
  if (!button) return;
  const status = document.getElementById("notifications-status");
  const update = () => {
    const supported = typeof Notification !== "undefined";
    const permission = supported ? Notification.permission : "unsupported";
    button.hidden = permission !== "default";
    if (status) {
      status.textContent = permission === "denied" ? "Notifications are blocked for this site in the browser's settings." : "";
      status.hidden = permission !== "denied";
    }
  };
  button.addEventListener("click", async () => {
    try { await Notification.requestPermission(); } catch (e) { /* ignored: update() shows the outcome */ }
    update();
  });
  update();
}

// What else shows the counts (the dashboard's inbox list registers its "Showing 50 of 2000").
export const countHooks = [];

export function refreshCounts() {
  // The numbers are the server's totals (snapshot.counts plus each event's count_change), not the rows
  // on the page: a dashboard shows one page of a long queue at a time.
  const requests = document.getElementById("requests");
  const open = requests ? requests.querySelectorAll(":scope > article.card:not(.closed), :scope > .row:not(.closed)") : [];
  const counts = state.counts;
  const count = counts && counts.for_me !== null && counts.for_me !== undefined ? counts.for_me
    : [...open].filter((node) => !node.classList.contains("read-only")).length;
  const counter = document.getElementById("request-count");
  if (counter) { counter.textContent = String(count); counter.hidden = count === 0; } // "nothing waiting" is said below
  const totals = document.getElementById("request-totals");
  if (totals && counts) {
    const kinds = Object.entries(counts.kinds || {}).map(([kind, n]) => `${kind} ${n}`);
    totals.textContent = [`${counts.requests} open`, ...kinds, `${count} for you to answer`].join(" · ");
    totals.hidden = counts.requests === 0;
  }
  if (page === "dashboard") {
    for (const hook of countHooks) hook();
  } else {
    document.getElementById("requests-empty")?.toggleAttribute("hidden", open.length > 0);
    // The A/D keys only mean something while a request is open here.
    document.getElementById("requests-keys-hint")?.toggleAttribute("hidden", open.length === 0);
    showPaging("requests", open.length, counts ? counts.requests : null, state.next);
  }
  const runs = document.getElementById("runs");
  if (runs) {
    const runCount = counts ? counts.runs : runs.children.length;
    document.getElementById("runs-empty").toggleAttribute("hidden", runCount > 0);
    document.getElementById("runs-table").toggleAttribute("hidden", runs.children.length === 0);
    const runCounter = document.getElementById("run-count");
    if (runCounter) { runCounter.textContent = String(runCount); runCounter.hidden = runCount === 0; } // "No run is active."
    showPaging("runs", runs.children.length, counts ? counts.runs : null, state.runsNext);
  }
  const recent = document.getElementById("recent-runs");
  if (recent) {
    document.getElementById("recent-empty")?.toggleAttribute("hidden", recent.children.length > 0);
    document.getElementById("recent-table")?.toggleAttribute("hidden", recent.children.length === 0);
  }
  if (page === "dashboard") document.title = count ? `(${count}) toolnexus console` : "toolnexus console";
}

function showPaging(of, shown, total, next) {
  // "Showing 50 of 2000" and a Load more button while the server has a next page.
  const box = document.getElementById(`${of}-more`);
  if (!box) return;
  box.hidden = !next;
  const progress = box.querySelector(".progress");
  if (progress) {
    const label = of === "runs" ? "runs" : "requests";
    progress.textContent = state.loading[of] ? `Loading… (showing ${shown} of ${total ?? "?"} ${label})`
      : `Showing ${shown} of ${total ?? "?"} ${label}`;
  }
  const button = box.querySelector("button");
  if (button) button.disabled = state.loading[of];
}

export function applyCountChange(change) {
  // An event's effect on the server's totals (frames.count_change), for this viewer.
  const counts = state.counts;
  if (!counts || !change) return;
  if (change.requests) {
    counts.requests += change.requests;
    if (change.kind !== undefined) {
      const left = (counts.kinds[change.kind] || 0) + change.requests;
      if (left > 0) counts.kinds[change.kind] = left;
      else delete counts.kinds[change.kind];
    }
  }
  if (change.for_me && counts.for_me !== null && counts.for_me !== undefined) counts.for_me += change.for_me;
  if (change.runs) counts.runs += change.runs;
}
