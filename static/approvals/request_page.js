// toolnexus console, a request's own page. Open, it is the same card as the inbox's and the run page's
// (console/cards.js), answered through the console socket and kept live by it; once the answer is taken
// the page reloads to say what was decided. Resolved, it shows the same tool call, read-only, above the
// decision. Text from a tool or a host is set with textContent, never innerHTML.

import { upsertRequest } from "./console/cards.js";
import { startConsole } from "./console/live.js";
import { otherData, toolCall } from "./console/toolcall.js";

const request = JSON.parse(document.getElementById("initial-request").textContent);
const list = document.getElementById("requests");

if (request.status === "open" && list) {
  upsertRequest(request);
  // The card leaves once this reviewer's answer is taken (or is dismissed after someone else's): show the decision.
  new MutationObserver(() => {
    if (!list.querySelector("article.card")) window.location.reload();
  }).observe(list, { childList: true });
  startConsole();
} else {
  document.getElementById("request-call")?.append(toolCall(request));
  const rest = otherData(request.data, { args: request.args || {} });
  if (rest) document.getElementById("request-data")?.append(rest);
}
