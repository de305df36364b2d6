// What the dashboard and the run page share once their first view is drawn: the clocks on the
// cards, the presence heartbeat, the keyboard, and the console socket.

import { age, updateCountdown } from "./dom.js";
import { onKey } from "./keyboard.js";
import { VIEWING_EVERY_MS, onScreen, sendViewing } from "./team.js";
import { connect } from "./sync.js";

export function startConsole() {
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
