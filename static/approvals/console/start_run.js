// The dashboard's "Start a run" form: a tool's arguments as a form (prefilled with the defaults its input
// schema declares; a list or object argument is a JSON editor) or as one JSON object, posted to the API.
// The server checks the args against the tool's schema before anything starts; what it refuses is shown
// beside each field and nothing typed is lost. Once the new run asks, started.js shows its request.

import { el, startRun } from "./dom.js";
import { schemaForm, showFieldErrors } from "./forms.js";
import { jsonField, prettyJson } from "./json_field.js";
import { watchRun } from "./started.js";

function withValues(schema, values) {
  // The tool's schema with ``values`` as its properties' defaults: the form opens showing them.
  if (!values || !schema || typeof schema.properties !== "object") return schema;
  const properties = { ...schema.properties };
  for (const [name, value] of Object.entries(values)) {
    if (properties[name] && typeof properties[name] === "object") properties[name] = { ...properties[name], default: value };
  }
  return { ...schema, properties };
}

function listed(names) {
  return names.length === 1 ? names[0] : `${names.slice(0, -1).join(", ")} and ${names[names.length - 1]}`;
}

export function setupStartForm() {
  const form = document.getElementById("start-run");
  if (!form) return;
  const tools = JSON.parse(document.getElementById("tool-catalog").textContent);
  const select = document.getElementById("start-tool");
  const argsForm = document.getElementById("start-args-form");
  const jsonWrap = document.getElementById("start-args-json-wrap");
  const argsJson = document.getElementById("start-args-json");
  const errorBox = document.getElementById("start-error");
  const resultBox = document.getElementById("start-result");
  const readJson = jsonField(argsJson, document.getElementById("start-args-json-error"), { shape: "object" });
  const toolOf = () => tools.find((t) => t.name === select.value);
  const mode = () => form.querySelector('input[name="args-mode"]:checked').value;
  const setMode = (value) => { form.querySelector(`input[name="args-mode"][value="${value}"]`).checked = true; };
  const say = (message) => { errorBox.textContent = message; errorBox.hidden = !message; };
  let readArgs = () => ({});
  let sending = false;

  const drawForm = (values) => {
    // Keys the tool does not declare cannot be fields; they are kept, and the server says what it thinks of them.
    const schema = toolOf()?.input_schema || {};
    const declared = schema.properties || {};
    const extra = Object.fromEntries(Object.entries(values || {}).filter(([name]) => !(name in declared)));
    const read = schemaForm(withValues(schema, values), argsForm);
    readArgs = () => { const args = read(); return args === undefined ? undefined : { ...args, ...extra }; };
  };
  const onTool = () => {
    document.getElementById("start-tool-description").textContent = toolOf()?.description || "";
    say("");
    showFieldErrors(jsonWrap, {});
    drawForm(null);
    if (mode() === "json") argsJson.value = prettyJson(readArgs() || {});
  };
  const onMode = () => {
    // Switching carries the values across; what is not JSON yet keeps the reviewer where it is, saying why.
    say("");
    if (mode() === "json") {
      const values = readArgs();
      if (values === undefined) { setMode("form"); say("Fix the fields marked above first."); return; }
      argsJson.value = prettyJson(values);
      argsJson.dispatchEvent(new Event("input"));
    } else {
      const result = readJson();
      if (!result.ok) { setMode("json"); say("Fix the JSON first: it is marked above."); return; }
      drawForm(result.value || {});
    }
    argsForm.hidden = mode() === "json";
    jsonWrap.hidden = mode() !== "json";
  };
  select.addEventListener("change", onTool);
  for (const radio of form.querySelectorAll('input[name="args-mode"]')) radio.addEventListener("change", onMode);
  onTool();

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (sending) return;
    say("");
    resultBox.textContent = "";
    const scope = mode() === "json" ? jsonWrap : argsForm;
    showFieldErrors(scope, {});
    let args;
    if (mode() === "json") {
      const result = readJson();
      args = result.ok ? result.value || {} : undefined;
    } else {
      args = readArgs();
    }
    if (args === undefined) { say("Nothing was started: fix what is marked above."); return; }
    const timeoutValue = document.getElementById("start-timeout").value;
    const body = { tool: select.value, args };
    if (timeoutValue !== "") body.timeout = Number(timeoutValue);
    sending = true;
    resultBox.textContent = "Starting…";
    let run;
    try {
      run = await startRun(body);
    } catch (e) {
      resultBox.textContent = "";
      if (e.fieldErrors) {
        // The message sits under the fields, by the Start button the reviewer just pressed: it says where they are.
        const named = Object.keys(e.fieldErrors).filter((name) => name !== "__all__");
        const where = mode() === "json" || !named.length ? "the JSON, marked above" : `${listed(named)}, marked above`;
        say(`Nothing was started: ${select.value} does not take these arguments. Fix ${where}.`);
        showFieldErrors(scope, e.fieldErrors);
        const active = document.activeElement;
        const first = scope.querySelector(".has-error input, .has-error select, .has-error textarea");
        // The reviewer just pressed Start: take them to the first field at fault, unless they moved on meanwhile.
        if (first && (!active || active === document.body || form.contains(active))) first.focus();
      } else {
        say(e.message);
      }
      return;
    } finally {
      sending = false;
    }
    resultBox.dataset.run = String(run.id);
    resultBox.replaceChildren("Started ", el("a", { href: `/runs/${run.id}/`, text: `run #${run.id}` }), ".");
    watchRun(run.id, resultBox);
  });
}
