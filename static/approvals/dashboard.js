// toolnexus console, the dashboard: open requests, active and recent runs, the "Start a run" form.
// Draws the page's initial snapshot, then applies the console socket's events to it. Every piece
// of text that came from a tool, a model or a request is set with textContent, never innerHTML;
// the server is the judge of every answer, the page only collects values and shows what it said.

import { applySnapshot } from "./console/sync.js";
import { setupStartForm } from "./console/start_run.js";
import { setupNotifications } from "./console/notifications.js";
import { setupViewToggle } from "./console/team.js";
import { setupPaging } from "./console/paging.js";
import { startConsole } from "./console/live.js";

const initial = document.getElementById("initial-snapshot");
if (initial) applySnapshot(JSON.parse(initial.textContent));
setupStartForm();
setupNotifications();
setupViewToggle();
setupPaging();
startConsole();
