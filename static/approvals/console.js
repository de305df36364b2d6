// toolnexus console: applies the console socket's snapshot and events to the page.
// Every piece of text that came from a tool, a model or a request is set with
// textContent, never innerHTML. The server is the judge of every answer; this file
// only collects values and shows what the server said.

import { age, updateCountdown } from "./console/dom.js";
import { page } from "./console/state.js";
import { setupNotifications } from "./console/notifications.js";
import { onKey } from "./console/keyboard.js";
import { VIEWING_EVERY_MS, onScreen, sendViewing, setupViewToggle } from "./console/team.js";
import { setupRunPage } from "./console/runs.js";
import { setupPaging } from "./console/paging.js";
import { applySnapshot, connect } from "./console/sync.js";
import { setupStartForm } from "./console/start_run.js";

if (page === "dashboard" || page === "run") {
  const initial = document.getElementById("initial-snapshot");
  if (initial) applySnapshot(JSON.parse(initial.textContent));
  setupStartForm();
  setupRunPage();
  setupNotifications();
  setupViewToggle();
  setupPaging();
  setInterval(() => { for (const id of onScreen) sendViewing(id); }, VIEWING_EVERY_MS);
  document.addEventListener("keydown", onKey);
  let tick = 0;
  setInterval(() => {
    for (const node of document.querySelectorAll(".countdown[data-expires]")) updateCountdown(node);
    if (tick++ % 2 === 0) {
      for (const node of document.querySelectorAll("time.age[data-since]")) node.textContent = age(node.dataset.since);
    }
  }, 500);
  connect();
}
