// toolnexus console: applies the console socket's snapshot and events to the page.
// Every piece of text that came from a tool, a model or a request is set with
// textContent, never innerHTML. The server is the judge of every answer; this file
// only collects values and shows what the server said.

const page = document.body.dataset.page;
const state = { seq: 0, requests: new Map(), runs: new Map(), pending: new Map(), nextRef: 1 };
let socket = null;
let retryDelay = 500;

const ACTIVE = new Set(["queued", "running", "waiting"]);

// ---- small DOM helpers -------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value === true) node.setAttribute(key, "");
    else node.setAttribute(key, String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function asText(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "string" ? value : JSON.stringify(value);
}

function keyValueTable(obj) {
  const table = el("table", { class: "kv-table" });
  const entries = obj && typeof obj === "object" ? Object.entries(obj) : [];
  if (!entries.length) return el("span", { class: "muted", text: "(none)" });
  for (const [key, value] of entries) {
    table.append(el("tr", {}, el("th", { text: key }), el("td", { text: asText(value) })));
  }
  return table;
}

function age(iso) {
  const seconds = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  if (seconds < 60) return `${seconds}s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ${seconds % 60}s ago`;
  return `${Math.floor(seconds / 3600)}h ${Math.floor((seconds % 3600) / 60)}m ago`;
}

function safeLink(url) {
  // Only http and https links are ever clickable.
  try {
    const parsed = new URL(url);
    if (parsed.protocol === "http:" || parsed.protocol === "https:") return parsed;
  } catch (e) { /* not a URL */ }
  return null;
}

function csrfToken() {
  const match = document.cookie.match(/(?:^|; )csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

// ---- schema forms --------------------------------------------------------------

function schemaForm(schema, container) {
  // Builds inputs for a flat JSON Schema; returns a function that reads the values back.
  container.replaceChildren();
  const props = (schema && schema.properties) || {};
  const required = new Set((schema && schema.required) || []);
  const readers = [];
  const names = Object.keys(props);
  if (!names.length) container.append(el("p", { class: "muted", text: "No fields." }));
  for (const name of names) {
    const prop = props[name] || {};
    const id = `f-${Math.random().toString(36).slice(2)}`;
    const label = el("label", { for: id, text: (prop.title || name) + (required.has(name) ? " *" : "") });
    const help = prop.description ? el("small", { class: "muted", text: prop.description }) : null;
    const errorBox = el("div", { class: "field-error", "data-field": name, role: "alert" });
    let input;
    let read;
    if (Array.isArray(prop.enum)) {
      input = el("select", { id, name });
      if (!required.has(name) || prop.default === undefined) input.append(el("option", { value: "", text: "— choose —" }));
      prop.enum.forEach((choice, i) => {
        input.append(el("option", { value: String(i), text: String(choice), selected: prop.default === choice }));
      });
      read = () => (input.value === "" ? undefined : prop.enum[Number(input.value)]);
    } else if (prop.type === "boolean") {
      input = el("input", { id, name, type: "checkbox", checked: prop.default === true });
      read = () => input.checked;
    } else if (prop.type === "number" || prop.type === "integer") {
      input = el("input", {
        id, name, type: "number", step: prop.type === "integer" ? "1" : "any",
        min: prop.minimum, max: prop.maximum, value: prop.default,
      });
      read = () => (input.value === "" ? undefined : Number(input.value));
    } else {
      const type = { email: "email", uri: "url", date: "date", "date-time": "datetime-local" }[prop.format] || "text";
      input = el("input", { id, name, type, value: prop.default, minlength: prop.minLength, maxlength: prop.maxLength });
      read = () => (input.value === "" && !required.has(name) ? undefined : input.value);
    }
    container.append(el("div", { class: "field" }, label, input, help, errorBox));
    readers.push([name, read]);
  }
  container.append(el("div", { class: "field-error", "data-field": "__all__", role: "alert" }));
  return () => {
    const values = {};
    for (const [name, read] of readers) {
      const value = read();
      if (value !== undefined) values[name] = value;
    }
    return values;
  };
}

function showFieldErrors(container, errors) {
  for (const box of container.querySelectorAll(".field-error")) box.textContent = "";
  for (const [name, messages] of Object.entries(errors || {})) {
    const box = [...container.querySelectorAll(".field-error")].find((b) => b.dataset.field === name)
      || container.querySelector('.field-error[data-field="__all__"]');
    if (box) box.textContent = `${name === "__all__" ? "" : name + ": "}${messages.join(" ")}`;
  }
}

// ---- request cards -------------------------------------------------------------

function send(frame, card) {
  if (!socket || socket.readyState !== WebSocket.OPEN) {
    showCardError(card, "Not connected to the console; reconnecting. Your input is kept: try again in a moment.");
    return;
  }
  const ref = String(state.nextRef++);
  state.pending.set(ref, card);
  card.classList.add("busy");
  for (const button of card.querySelectorAll("button")) button.disabled = true;
  socket.send(JSON.stringify({ ...frame, ref }));
}

function showCardError(card, message) {
  if (!card) return;
  card.classList.remove("busy");
  for (const button of card.querySelectorAll("button")) button.disabled = false;
  const box = card.querySelector(".card-error");
  if (box) box.textContent = message;
}

function requestCard(request) {
  const card = el("article", { class: "card", "data-request-id": request.id, "data-kind": request.kind, tabindex: "0" });
  const header = el("header", {},
    el("span", { class: "kind", text: request.kind }),
    el("span", { class: "tool", text: request.tool || "(no tool)" }),
    request.run ? el("a", { href: `/runs/${request.run}/`, text: `run ${request.run}` }) : null,
    el("time", { class: "age", "data-since": request.created_at, datetime: request.created_at, text: age(request.created_at) }),
  );
  card.append(header, el("p", { class: "prompt", text: request.prompt }));
  if (request.args && Object.keys(request.args).length) {
    card.append(el("details", {}, el("summary", { text: "Arguments" }), keyValueTable(request.args)));
  }
  const body = el("div", { class: "card-body" });
  card.append(body, el("p", { class: "card-error error", role: "alert" }));
  const answer = (ok, data, extra = {}) => send({ type: "answer", request: request.id, ok, data, ...extra }, card);
  const comment = el("textarea", { class: "comment", rows: "2", placeholder: "Comment (optional)", "aria-label": "Comment" });
  const decline = el("button", {
    type: "button", class: "danger", text: "Decline",
    onclick: () => answer(false, undefined, { reason: "declined", comment: comment.value }),
  });

  if (request.kind === "input" && request.data && request.data.schema) {
    const form = el("form", { class: "schema-form", novalidate: true });
    const read = schemaForm(request.data.schema, form);
    form.append(el("button", { type: "submit", class: "primary", text: "Submit" }));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      answer(true, read(), { comment: comment.value });
    });
    body.append(form, comment, decline);
    card.schemaForm = form;
  } else if (request.kind === "authorization") {
    const link = safeLink(request.url);
    if (link) {
      body.append(
        el("p", {}, "Sign in at ", el("strong", { class: "host", text: link.host })),
        el("a", { class: "auth-link", href: link.href, target: "_blank", rel: "noopener noreferrer", text: "Open sign-in page" }),
      );
    } else {
      body.append(el("p", { class: "warning", text: "This link is not http or https, so it cannot be opened:" }),
        el("code", { class: "unsafe-url", text: request.url || "(no url)" }));
    }
    body.append(comment,
      el("button", { type: "button", class: "primary", text: "Done", onclick: () => answer(true, undefined, { comment: comment.value }) }),
      decline);
  } else {
    if (request.data && Object.keys(request.data).length) body.append(keyValueTable(request.data));
    body.append(comment,
      el("button", { type: "button", class: "primary", text: "Approve", onclick: () => answer(true, undefined, { comment: comment.value }) }),
      decline);
  }
  return card;
}

function upsertRequest(request) {
  const list = document.getElementById("requests");
  if (!list) return;
  const existing = list.querySelector(`[data-request-id="${CSS.escape(request.id)}"]`);
  if (request.status !== "open") {
    if (existing) existing.remove();
    state.requests.delete(request.id);
  } else if (!existing) {
    if (page === "run" && String(request.run) !== document.getElementById("run-detail").dataset.runId) return;
    list.append(requestCard(request));
    state.requests.set(request.id, request);
  }
  refreshCounts();
}

// ---- runs ------------------------------------------------------------------------

function runRow(run) {
  const cancel = el("button", {
    type: "button", class: "danger small", text: run.cancel_requested ? "Cancelling…" : "Cancel run",
    disabled: run.cancel_requested, "data-cancel-run": run.id,
    onclick: () => send({ type: "cancel_run", run: run.id }, row),
  });
  const row = el("tr", { "data-run-id": run.id },
    el("td", {}, el("a", { href: `/runs/${run.id}/`, text: `#${run.id}` })),
    el("td", { text: run.tool }),
    el("td", { class: "args", text: asText(run.args) }),
    el("td", {}, el("span", { class: "status", "data-status": run.status, text: run.status })),
    el("td", {}, el("time", { class: "age", "data-since": run.created_at, text: age(run.created_at) })),
    el("td", {}, cancel, el("span", { class: "card-error error" })),
  );
  return row;
}

function finishedRow(run) {
  const result = run.result ? run.result.output : "";
  return el("tr", { "data-run-id": run.id },
    el("td", {}, el("a", { href: `/runs/${run.id}/`, text: `#${run.id}` })),
    el("td", { text: run.tool }),
    el("td", {}, el("span", { class: "status", "data-status": run.status, text: run.status })),
    el("td", { class: "result" + (run.result && run.result.is_error ? " is-error" : ""), text: result }),
    el("td", { text: run.finished_at ? new Date(run.finished_at).toLocaleTimeString() : "" }),
  );
}

function upsertRun(run) {
  if (page === "run") return updateRunPage(run);
  const active = document.getElementById("runs");
  const recent = document.getElementById("recent-runs");
  active.querySelector(`[data-run-id="${run.id}"]`)?.remove();
  if (ACTIVE.has(run.status)) {
    active.append(runRow(run));
  } else {
    recent.querySelector(`[data-run-id="${run.id}"]`)?.remove();
    recent.prepend(finishedRow(run));
    while (recent.children.length > 10) recent.lastElementChild.remove();
  }
  refreshCounts();
}

function updateRunPage(run) {
  const detail = document.getElementById("run-detail");
  if (!detail || String(run.id) !== detail.dataset.runId) return;
  const status = document.getElementById("run-status");
  status.textContent = run.status;
  status.dataset.status = run.status;
  const result = document.getElementById("run-result");
  if (run.result) {
    result.textContent = run.result.output;
    result.classList.toggle("is-error", run.result.is_error);
  }
  if (!ACTIVE.has(run.status)) document.getElementById("run-cancel")?.remove();
}

function appendTimeline(frame) {
  const timeline = document.getElementById("timeline");
  const detail = document.getElementById("run-detail");
  if (!timeline || !detail || String(frame.run_id) !== detail.dataset.runId) return;
  if (timeline.querySelector(`[data-seq="${frame.seq}"]`)) return;
  timeline.append(el("li", { "data-seq": frame.seq },
    el("time", { datetime: frame.at, text: frame.at }), " ", el("strong", { text: frame.action }), ` by ${frame.actor}`));
}

function refreshCounts() {
  const requests = document.getElementById("requests");
  const count = requests ? requests.children.length : 0;
  const counter = document.getElementById("request-count");
  if (counter) counter.textContent = String(count);
  document.getElementById("requests-empty")?.toggleAttribute("hidden", count > 0);
  const runs = document.getElementById("runs");
  if (runs) {
    document.getElementById("runs-empty").toggleAttribute("hidden", runs.children.length > 0);
    document.getElementById("runs-table").toggleAttribute("hidden", runs.children.length === 0);
  }
  if (page === "dashboard") document.title = count ? `(${count}) toolnexus console` : "toolnexus console";
}

// ---- applying frames ---------------------------------------------------------------

function applySnapshot(snapshot) {
  state.seq = snapshot.seq;
  const list = document.getElementById("requests");
  const openIds = new Set(snapshot.requests.map((r) => r.id));
  // Keep cards that are still open so a reviewer's half-typed input survives a resync.
  for (const card of [...list.children]) if (!openIds.has(card.dataset.requestId)) card.remove();
  for (const request of snapshot.requests) upsertRequest(request);
  if (page === "dashboard") {
    document.getElementById("runs").replaceChildren();
    for (const run of snapshot.runs) upsertRun(run);
    const recent = document.getElementById("recent-runs");
    recent.replaceChildren();
    for (const run of snapshot.recent_runs || []) recent.append(finishedRow(run));
  } else if (page === "run") {
    const detail = document.getElementById("run-detail");
    const mine = snapshot.runs.find((r) => String(r.id) === detail.dataset.runId);
    if (mine) updateRunPage(mine);
    else fetch(`/api/v1/runs/${detail.dataset.runId}`).then((r) => r.json()).then(updateRunPage).catch(() => {});
  }
  refreshCounts();
}

function applyEvent(frame) {
  if (frame.seq <= state.seq) return;
  if (frame.prev !== state.seq) {
    // A gap: this page missed something. The database has it; ask for a fresh snapshot.
    socket.send(JSON.stringify({ type: "resync" }));
    return;
  }
  state.seq = frame.seq;
  if (frame.request) upsertRequest(frame.request);
  if (frame.run) upsertRun(frame.run);
  appendTimeline(frame);
}

function onFrame(frame) {
  const card = frame.ref ? state.pending.get(frame.ref) : null;
  if (frame.ref) state.pending.delete(frame.ref);
  switch (frame.type) {
    case "snapshot": return applySnapshot(frame);
    case "event": return applyEvent(frame);
    case "answered":
      if (card) { card.classList.remove("busy"); card.classList.add("sent"); }
      return;
    case "cancel_requested":
      if (card) { const b = card.querySelector("[data-cancel-run]"); if (b) b.textContent = "Cancelling…"; }
      return;
    case "error":
      if (card) {
        showCardError(card, frame.message);
        if (card.schemaForm && frame.field_errors) showFieldErrors(card.schemaForm, frame.field_errors);
      } else {
        console.warn("console:", frame.message);
      }
      return;
    default:
      console.warn("console: unknown frame", frame.type);
  }
}

function setConnection(stateName, text) {
  const badge = document.getElementById("conn-status");
  if (badge) { badge.dataset.state = stateName; badge.textContent = text; }
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  socket = new WebSocket(`${scheme}://${location.host}/ws/console/`);
  socket.addEventListener("open", () => { retryDelay = 500; setConnection("live", "live"); });
  socket.addEventListener("message", (message) => {
    try { onFrame(JSON.parse(message.data)); } catch (e) { console.error("console: bad frame", e); }
  });
  socket.addEventListener("close", () => {
    setConnection("offline", "reconnecting…");
    for (const [ref, card] of state.pending) showCardError(card, "The connection dropped before the console answered. Check the request and try again.");
    state.pending.clear();
    setTimeout(connect, retryDelay);
    retryDelay = Math.min(retryDelay * 2, 5000);
  });
}

// ---- start-a-run form ---------------------------------------------------------------

function setupStartForm() {
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
      const response = await fetch("/api/v1/runs", {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
        body: JSON.stringify(body),
        credentials: "same-origin",
      });
      const data = await response.json();
      if (!response.ok) throw new Error(data.message || `The console answered ${response.status}.`);
      resultBox.replaceChildren("Started ", el("a", { href: `/runs/${data.id}/`, text: `run #${data.id}` }), ".");
    } catch (e) {
      resultBox.textContent = "";
      errorBox.textContent = e.message;
      errorBox.hidden = false;
    }
  });
}

function setupRunPage() {
  const button = document.getElementById("run-cancel");
  if (button) {
    button.addEventListener("click", async () => {
      button.disabled = true;
      button.textContent = "Cancelling…";
      const response = await fetch(`/api/v1/runs/${button.dataset.run}/cancel`, {
        method: "POST", headers: { "X-CSRFToken": csrfToken() }, credentials: "same-origin",
      });
      if (!response.ok) {
        const data = await response.json().catch(() => ({}));
        button.textContent = data.message || "Could not cancel";
      }
    });
  }
}

// ---- start -------------------------------------------------------------------------

if (page === "dashboard" || page === "run") {
  const initial = document.getElementById("initial-snapshot");
  if (initial) applySnapshot(JSON.parse(initial.textContent));
  setupStartForm();
  setupRunPage();
  setInterval(() => {
    for (const node of document.querySelectorAll("time.age[data-since]")) node.textContent = age(node.dataset.since);
  }, 1000);
  connect();
}
