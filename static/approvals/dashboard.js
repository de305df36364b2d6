// toolnexus console, the dashboard: the reviewer's inbox (search, filters, one request in detail, bulk
// answers), active and recent runs, the "Start a run" form. Draws the page's initial snapshot, then applies
// the console socket's events to it. Every piece of text that came from a tool, a model or a request is set
// with textContent, never innerHTML; the server is the judge of every answer, the page only collects values
// and shows what it said.

import { state } from "./console/state.js";
import { readQuery } from "./console/query.js";
import { applySnapshot } from "./console/sync.js";
import { setupStartForm } from "./console/start_run.js";
import { setupNotifications } from "./console/notifications.js";
import { setupPaging } from "./console/paging.js";
import { startConsole } from "./console/live.js";
import { setupInboxList } from "./console/inbox_view.js";
import { setupFilters } from "./console/filters.js";
import { setupBulk } from "./console/bulk.js";
import { WIDE, followFocusBarHeight, followPromptOnScreen, placeDetail } from "./console/detail.js";
import { toggleKeyHelp } from "./console/keyboard.js";

state.inbox.query = readQuery();
const tools = JSON.parse(document.getElementById("tool-catalog").textContent);
setupInboxList();
setupFilters(tools);
setupBulk();
WIDE.addEventListener("change", placeDetail);
followFocusBarHeight();
followPromptOnScreen();
document.getElementById("show-keys")?.addEventListener("click", toggleKeyHelp);
const initial = document.getElementById("initial-snapshot");
if (initial) applySnapshot(JSON.parse(initial.textContent));
setupStartForm();
setupNotifications();
setupPaging();
startConsole();
