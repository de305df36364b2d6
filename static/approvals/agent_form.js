// toolnexus console: the dashboard's "Start an agent run" form (templates/approvals/_start_agent.html).
// Posts {agent: {prompt, model}, timeout?} to the API and links to the new run; the server
// checks everything and its message is shown as text.

import { startRun } from "./console/dom.js";

const form = document.getElementById("start-agent");
if (form) {
  const errorBox = document.getElementById("agent-error");
  const resultBox = document.getElementById("agent-result");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    errorBox.hidden = true;
    resultBox.textContent = "Starting…";
    const body = {
      agent: { prompt: document.getElementById("agent-prompt").value, model: document.getElementById("agent-model").value },
    };
    const timeout = document.getElementById("agent-timeout").value;
    if (timeout !== "") body.timeout = Number(timeout);
    try {
      const data = await startRun(body);
      const link = document.createElement("a");
      link.href = `/runs/${data.id}/`;
      link.textContent = `agent run #${data.id}`;
      resultBox.replaceChildren("Started ", link, ".");
    } catch (error) {
      resultBox.textContent = "";
      errorBox.textContent = error.message;
      errorBox.hidden = false;
    }
  });
}
