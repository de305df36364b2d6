// toolnexus console, a run's page: its status, result, open requests, every request's decision and
// its timeline, kept live by the console socket (its transcript is transcript.js). Text from a tool,
// a model or a request is set with textContent, never innerHTML.

import { setupRunPage } from "./console/runs.js";
import { startConsole } from "./console/live.js";
import { setupTimeline } from "./console/timeline.js";

setupRunPage();
setupTimeline();
startConsole();
