// The dashboard's "Start a run" form: a tool's arguments as a form or as JSON, posted to the API.

import { el, startRun } from "./dom.js";
import { schemaForm } from "./forms.js";

export function setupStartForm() {
  const form = document.getElementById("start-run");
  if (!form) return;
  const tools = JSON.parse(document.getElementById("tool-catalog").textContent);
  const select = document.getElementById("start-tool");
  const argsForm = document.getElementById("start-args-form");
  const argsJson = document.getElementById("start-args-json");
  const errorBox = document.getElementById("start-error");
  const resultBox = document.getElementById("start-result");
  let readArgs = () => ({});
  const mode = () => form.querySelector('input[name="args-mode"]:checked').value;
  const onTool = () => {
    const tool = tools.find((t) => t.name === select.value);
    document.getElementById("start-tool-description").textContent = tool ? tool.description : "";
    readArgs = schemaForm(tool ? tool.input_schema : {}, argsForm);
  };
  const onMode = () => {
    const json = mode() === "json";
    if (json) argsJson.value = JSON.stringify(readArgs(), null, 2);
    argsForm.hidden = json;
    argsJson.hidden = !json;
  };
  select.addEventListener("change", onTool);
  for (const radio of form.querySelectorAll('input[name="args-mode"]')) radio.addEventListener("change", onMode);
  onTool();
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    errorBox.hidden = true;
    resultBox.textContent = "";
    let args;
    if (mode() === "json") {
      try { args = JSON.parse(argsJson.value || "{}"); } catch (e) {
        errorBox.textContent = `The arguments are not valid JSON: ${e.message}`;
        errorBox.hidden = false;
        return;
      }
    } else {
      args = readArgs();
    }
    const timeoutValue = document.getElementById("start-timeout").value;
    const body = { tool: select.value, args };
    if (timeoutValue !== "") body.timeout = Number(timeoutValue);
    resultBox.textContent = "Starting…";
    try {
      const data = await startRun(body);
      resultBox.replaceChildren("Started ", el("a", { href: `/runs/${data.id}/`, text: `run #${data.id}` }), ".");
    } catch (e) {
      resultBox.textContent = "";
      errorBox.textContent = e.message;
      errorBox.hidden = false;
    }
  });
}
