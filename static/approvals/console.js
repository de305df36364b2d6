// toolnexus console: applies the console socket's snapshot and events to the page.
// Every piece of text that came from a tool, a model or a request is set with
// textContent, never innerHTML. The server is the judge of every answer; this file
// only collects values and shows what the server said.

const page = document.body.dataset.page;
const state = {
  seq: 0, requests: new Map(), runs: new Map(), pending: new Map(), nextRef: 1,
  started: false, // true after the first snapshot: later arrivals notify (never take focus)
  notified: new Set(),
  // The server's totals (snapshot.counts), kept current by each event's count_change.
  counts: null,
  // Paging: the cursor of the next page of open requests / active runs (null: all loaded), the key of
  // the last request a page showed, and which lists have a page frame on its way.
  next: null, runsNext: null, loadedUpTo: null, loading: { requests: false, runs: false }, asked: {},
  paging: false, // true while a page's cards are added: they are not arrivals
};
let socket = null;
let retryDelay = 500;

const ACTIVE = new Set(["queued", "running", "waiting"]);
const URGENT_SECONDS = 10;
const DAY_SECONDS = 24 * 3600; // further away than this, a deadline reads as a date

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

function uid(prefix = "f") {
  return `${prefix}-${Math.random().toString(36).slice(2)}`;
}

function asText(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "string" ? value : JSON.stringify(value);
}

function isScalar(value) {
  return value === null || ["string", "number", "boolean"].includes(typeof value);
}

function valueNode(value, depth = 0) {
  // A readable rendering of a JSON value: scalars as text, lists of scalars joined,
  // nested objects as nested tables (a few levels), anything deeper as JSON text.
  if (value === null || value === undefined) return el("span", { class: "muted", text: "null" });
  if (isScalar(value)) return document.createTextNode(String(value));
  if (Array.isArray(value) && value.every(isScalar)) {
    return document.createTextNode(value.length ? value.map((v) => String(v)).join(", ") : "(empty list)");
  }
  if (depth >= 2) return el("code", { text: JSON.stringify(value) });
  if (Array.isArray(value)) {
    return el("ol", { class: "kv-list" }, ...value.map((item) => el("li", {}, valueNode(item, depth + 1))));
  }
  return keyValueTable(value, depth + 1);
}

function keyValueTable(obj, depth = 0) {
  const table = el("table", { class: "kv-table" });
  const entries = obj && typeof obj === "object" ? Object.entries(obj) : [];
  if (!entries.length) return el("span", { class: "muted", text: "(none)" });
  for (const [key, value] of entries) {
    table.append(el("tr", {}, el("th", { text: key }), el("td", {}, valueNode(value, depth))));
  }
  return table;
}

function age(iso) {
  const seconds = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  if (seconds < 60) return `${seconds}s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ${seconds % 60}s ago`;
  return `${Math.floor(seconds / 3600)}h ${Math.floor((seconds % 3600) / 60)}m ago`;
}

function pad(n) {
  return String(n).padStart(2, "0");
}

function updateCountdown(node) {
  const deadline = Date.parse(node.dataset.expires);
  if (Number.isNaN(deadline)) {
    node.textContent = `expires at ${node.dataset.expires}`;
    return;
  }
  const seconds = Math.max(0, Math.ceil((deadline - Date.now()) / 1000));
  let text;
  if (seconds <= 0) text = "expired";
  else if (seconds < 60) text = `expires in ${seconds}s`;
  else if (seconds < 3600) text = `expires in ${Math.floor(seconds / 60)}m ${pad(seconds % 60)}s`;
  else if (seconds <= DAY_SECONDS) text = `expires in ${Math.floor(seconds / 3600)}h ${pad(Math.floor((seconds % 3600) / 60))}m`;
  else text = `expires on ${new Date(deadline).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" })}`;
  node.textContent = text;
  node.dataset.remaining = String(seconds);
  node.classList.toggle("urgent", seconds > 0 && seconds < URGENT_SECONDS);
  node.classList.toggle("expired", seconds <= 0);
}

function countdown(expiresAt) {
  const deadline = Date.parse(expiresAt);
  const node = el("span", {
    class: "countdown", "data-expires": expiresAt,
    title: Number.isNaN(deadline) ? expiresAt : `expires at ${new Date(deadline).toLocaleString()}`,
  });
  updateCountdown(node);
  return node;
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

function isTextField(node) {
  if (!node || node.nodeType !== Node.ELEMENT_NODE) return false;
  return ["INPUT", "TEXTAREA", "SELECT"].includes(node.tagName) || node.isContentEditable;
}

// ---- schema forms (the start-a-run form's arguments) ------------------------------

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
    const id = uid();
    const label = el("label", { for: id, text: (prop.title || name) + (required.has(name) ? " *" : "") });
    const help = prop.description ? el("small", { class: "muted", text: prop.description }) : null;
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
    container.append(el("div", { class: "field" }, label, input, help, errorBox(name)));
    readers.push([name, read]);
  }
  container.append(errorBox("__all__"));
  return () => {
    const values = {};
    for (const [name, read] of readers) {
      const value = read();
      if (value !== undefined) values[name] = value;
    }
    return values;
  };
}

// ---- server-described forms (input requests, an approval's editable args) --------

function errorBox(name) {
  return el("div", { class: "field-error", "data-field": name, role: "alert" });
}

const TEXT_WIDGETS = { text: "text", email: "email", url: "url", date: "date", datetime: "datetime-local" };

function present(value) {
  return value !== null && value !== undefined && value !== "";
}

function constraintHint(field) {
  const { min, max, min_length: minLength, max_length: maxLength } = field;
  if (field.widget === "number" || field.widget === "integer") {
    const whole = field.widget === "integer" ? "a whole number " : "";
    if (present(min) && present(max)) return `${whole}from ${min} to ${max}`;
    if (present(min)) return `${whole}of at least ${min}`;
    if (present(max)) return `${whole}of at most ${max}`;
    return whole ? "a whole number" : "";
  }
  if (field.widget === "multiselect") {
    return present(min) ? `choose at least ${min}` : "";
  }
  if (present(minLength) && present(maxLength)) return `${minLength} to ${maxLength} characters`;
  if (present(minLength)) return `at least ${minLength} characters`;
  if (present(maxLength)) return `at most ${maxLength} characters`;
  return "";
}

function describedFields(fields, container) {
  // Renders the fields the server described and returns a reader of their RAW values:
  // text-like and number inputs -> their string value, checkbox -> bool,
  // select -> the chosen choice key or "", multiselect -> the list of chosen keys.
  const readers = [];
  const list = Array.isArray(fields) ? fields : [];
  if (!list.length) container.append(el("p", { class: "muted", text: "No fields." }));
  for (const field of list) {
    const name = String(field.name);
    const id = uid();
    const labelText = (field.label || name) + (field.required ? " *" : "");
    const def = field.default;
    const wrap = el("div", { class: "field", "data-field-name": name });
    let read;
    if (field.widget === "checkbox") {
      const input = el("input", { id, name, type: "checkbox", checked: def === true });
      wrap.classList.add("field-checkbox");
      wrap.append(el("label", { class: "inline", for: id }, input, " ", labelText));
      read = () => input.checked;
    } else if (field.widget === "select") {
      const chosen = present(def) ? String(def) : "";
      const input = el("select", { id, name, required: field.required });
      if (!field.required || chosen === "") input.append(el("option", { value: "", text: "— choose —" }));
      for (const choice of field.choices || []) {
        const key = String(choice.key);
        input.append(el("option", { value: key, text: asText(choice.label ?? key), selected: key === chosen }));
      }
      wrap.append(el("label", { for: id, text: labelText }), input);
      read = () => input.value;
    } else if (field.widget === "multiselect") {
      const defaults = new Set((Array.isArray(def) ? def : []).map(String));
      const boxes = [];
      const group = el("fieldset", { class: "choices", id }, el("legend", { text: labelText }));
      for (const choice of field.choices || []) {
        const key = String(choice.key);
        const box = el("input", { type: "checkbox", name, value: key, checked: defaults.has(key) });
        boxes.push(box);
        group.append(el("label", { class: "inline" }, box, " ", asText(choice.label ?? key)));
      }
      wrap.append(group);
      read = () => boxes.filter((box) => box.checked).map((box) => box.value);
    } else if (field.widget === "number" || field.widget === "integer") {
      const input = el("input", {
        id, name, type: "number", inputmode: field.widget === "integer" ? "numeric" : "decimal",
        step: present(field.step) ? field.step : (field.widget === "integer" ? "1" : "any"),
        min: field.min, max: field.max, value: present(def) ? String(def) : null, required: field.required,
      });
      wrap.append(el("label", { for: id, text: labelText }), input);
      read = () => input.value;
    } else {
      const isDateTime = field.widget === "datetime";
      const shown = present(def) ? (isDateTime ? toLocalDateTime(String(def)) : String(def)) : null;
      const input = el("input", {
        id, name, type: TEXT_WIDGETS[field.widget] || "text", value: shown,
        minlength: field.min_length, maxlength: field.max_length, pattern: field.pattern, required: field.required,
      });
      if (field.widget === "date" || isDateTime) {
        if (present(field.min)) input.setAttribute("min", field.min);
        if (present(field.max)) input.setAttribute("max", field.max);
      }
      wrap.append(el("label", { for: id, text: labelText }), input);
      // A datetime-local input has no zone; RFC 3339 needs one, so send the reviewer's local time in UTC.
      read = () => (isDateTime && input.value ? new Date(input.value).toISOString() : input.value);
    }
    const hint = constraintHint(field);
    if (field.description) wrap.append(el("small", { class: "muted description", text: field.description }));
    if (hint) wrap.append(el("small", { class: "muted hint", text: hint }));
    wrap.append(errorBox(name));
    container.append(wrap);
    readers.push([name, read]);
  }
  return () => Object.fromEntries(readers.map(([name, read]) => [name, read()]));
}

function toLocalDateTime(iso) {
  // "2026-05-01T13:30:00Z" -> "2026-05-01T15:30" in the browser's zone, as datetime-local shows it.
  const moment = new Date(iso);
  if (Number.isNaN(moment.getTime())) return iso;
  const local = new Date(moment.getTime() - moment.getTimezoneOffset() * 60000);
  return local.toISOString().slice(0, 16);
}

function showFieldErrors(scope, errors) {
  for (const box of scope.querySelectorAll(".field-error")) box.replaceChildren();
  for (const wrap of scope.querySelectorAll(".has-error")) wrap.classList.remove("has-error");
  const boxes = [...scope.querySelectorAll(".field-error")];
  const general = boxes.find((b) => b.dataset.field === "__all__");
  for (const [name, raw] of Object.entries(errors || {})) {
    const messages = (Array.isArray(raw) ? raw : [raw]).map(asText);
    const own = boxes.find((b) => b.dataset.field === name);
    const box = own || general;
    if (!box) continue;
    const prefix = own || name === "__all__" ? "" : `${name}: `;
    for (const message of messages) box.append(el("div", { text: prefix + message }));
    if (own && own.parentElement) own.parentElement.classList.add("has-error");
  }
}

// ---- question (toolnexus' builtin question tool) ----------------------------------

function questionBlocks(questions, container, group) {
  // One block per question: its options as radios (checkboxes when multiple) and
  // always an "Other" choice with a free-text input. Reads to [[chosen strings], ...].
  const readers = questions.map((raw, i) => {
    const q = raw && typeof raw === "object" ? raw : {};
    const type = q.multiple === true ? "checkbox" : "radio";
    const name = `${group}-q${i}`;
    const options = Array.isArray(q.options) ? q.options.map(asText) : [];
    const block = el("fieldset", { class: "question", "data-question": String(i) });
    block.append(el("legend", {},
      q.header ? el("span", { class: "q-header", text: asText(q.header) }) : null,
      el("span", { class: "q-text", text: asText(q.question) })));
    const inputs = options.map((option) => {
      const input = el("input", { type, name, value: option });
      block.append(el("label", { class: "option" }, input, " ", option));
      return [input, option];
    });
    const otherChoice = el("input", {
      type, name, value: "", class: "other-choice", "aria-label": "Other", checked: options.length === 0 && type === "radio",
    });
    const otherText = el("input", {
      type: "text", class: "other-text", placeholder: "Other: write your own answer",
      "aria-label": `Other answer to question ${i + 1}`,
    });
    otherText.addEventListener("input", () => { if (otherText.value.trim()) otherChoice.checked = true; });
    block.append(el("div", { class: "option other" }, el("label", {}, otherChoice, " Other"), otherText), errorBox(`q${i}`));
    container.append(block);
    return () => {
      const chosen = inputs.filter(([input]) => input.checked).map(([, option]) => option);
      const other = otherText.value.trim();
      if (otherChoice.checked && other) chosen.push(other);
      return chosen;
    };
  });
  return () => readers.map((read) => read());
}

// ---- a JSON reply (unknown kinds, an input without a renderable form) --------------

function jsonEditor(container) {
  const id = uid("json");
  const textarea = el("textarea", { id, class: "json-reply", rows: "4", spellcheck: "false" });
  textarea.value = "{}";
  const box = errorBox("__all__");
  box.classList.add("json-error");
  container.append(el("label", { for: id, text: "Reply as a JSON object" }), textarea, box);
  return () => {
    let value;
    try {
      value = JSON.parse(textarea.value.trim() === "" ? "{}" : textarea.value);
    } catch (e) {
      box.replaceChildren(el("div", { text: `This is not valid JSON, so nothing was sent: ${e.message}` }));
      return undefined;
    }
    if (!value || typeof value !== "object" || Array.isArray(value)) {
      box.replaceChildren(el("div", { text: 'The reply must be a JSON object, like {"key": "value"}; nothing was sent.' }));
      return undefined;
    }
    box.replaceChildren();
    return value;
  };
}

// ---- request cards -------------------------------------------------------------

function setBusy(card, busy) {
  card.classList.toggle("busy", busy);
  for (const button of card.querySelectorAll("button")) button.disabled = busy;
}

function send(frame, card) {
  if (!socket || socket.readyState !== WebSocket.OPEN) {
    showCardError(card, "Not connected to the console; reconnecting. Your input is kept: try again in a moment.");
    return;
  }
  const ref = String(state.nextRef++);
  state.pending.set(ref, card);
  card.inFlight = ref;
  const box = card.querySelector(".card-error");
  if (box) box.textContent = "";
  if (card.matches("article.card")) showFieldErrors(card, {});
  setBusy(card, true);
  socket.send(JSON.stringify({ ...frame, ref }));
}

function showCardError(card, message) {
  if (!card) return;
  setBusy(card, false);
  const box = card.querySelector(".card-error");
  if (box) box.textContent = message;
}

function requestOrigin(request) {
  // A request a remote host opened through the API: which host, and whose token or login it used.
  if (!request.host && !request.opened_by) return null;
  const origin = el("span", { class: "origin" });
  if (request.host) origin.append("from ", el("strong", { class: "origin-host", text: request.host }));
  if (request.host && request.opened_by) origin.append(" · ");
  if (request.opened_by) origin.append("opened by ", el("span", { class: "opened-by", text: request.opened_by }));
  return origin;
}

function requestCard(request) {
  const card = el("article", { class: "card", "data-request-id": request.id, "data-kind": request.kind, tabindex: "0" });
  const header = el("header", {},
    el("span", { class: "kind", text: request.kind }),
    el("span", { class: "tool", text: request.tool || "(no tool)" }),
    request.run ? el("a", { href: `/runs/${request.run}/`, text: `run ${request.run}` }) : null,
    requestOrigin(request),
    request.expiresAt ? countdown(request.expiresAt) : null,
    el("time", { class: "age", "data-since": request.created_at, datetime: request.created_at, text: age(request.created_at) }),
  );
  card.append(header);
  if (request.credentials) {
    card.append(el("p", { class: "credentials", role: "note" },
      el("strong", { text: "Not collected here. " }), request.credentials));
  }
  card.append(el("p", { class: "prompt", text: request.prompt }));
  if (request.args && Object.keys(request.args).length) {
    card.append(el("details", {}, el("summary", { text: "Arguments" }), keyValueTable(request.args)));
  }

  // One form per card: Enter in a field and the A key both go through its submit.
  const body = el("form", { class: "card-body", novalidate: true });
  const content = el("div", { class: "card-content" });
  const comment = request.credentials ? null : el("textarea", {
    class: "comment", rows: "2", placeholder: "Comment (optional)", "aria-label": "Comment",
  });
  const answer = (ok, fields = {}) => {
    const frame = { type: "answer", request: request.id, ok, ...fields };
    if (comment && comment.value) frame.comment = comment.value;
    send(frame, card);
  };
  const data = request.data && typeof request.data === "object" ? request.data : null;
  let primary = null; // { label, run }

  if (request.credentials) {
    // No inputs at all: the console never collects a secret. Decline or cancel only.
  } else if (request.kind === "input" && request.form === undefined && data && data.schema) {
    // A server that does not describe forms yet: build from the schema, send typed data.
    const fields = el("div", { class: "schema-form" });
    const read = schemaForm(data.schema, fields);
    content.append(fields);
    primary = { label: "Submit", run: () => answer(true, { data: read() }) };
  } else if (request.kind === "input" && request.form && request.form.renderable) {
    const fields = el("div", { class: "schema-form" });
    const read = describedFields(request.form.fields, fields);
    content.append(fields);
    primary = { label: "Submit", run: () => answer(true, { form: read() }) };
  } else if (request.kind === "approval") {
    const editable = Boolean(request.form && request.form.renderable);
    const shown = { ...(data || {}) };
    if (editable) {
      // The keys that describe the editable args are drawn as the form below, not listed.
      delete shown.editable;
      if (shown.args && typeof shown.args === "object" && shown.args.schema) delete shown.args;
    }
    if (Object.keys(shown).length) content.append(keyValueTable(shown));
    let read = null;
    if (editable) {
      const fields = el("div", { class: "schema-form editable" }, el("p", { class: "muted", text: "You may change these before approving:" }));
      read = describedFields(request.form.fields, fields);
      content.append(fields);
    } else if (request.form && request.form.reason) {
      content.append(el("p", { class: "warning", text: request.form.reason }));
    }
    primary = { label: "Approve", run: () => answer(true, read ? { form: read() } : {}) };
  } else if (request.kind === "question" && data && Array.isArray(data.questions)) {
    const read = questionBlocks(data.questions, content, uid("q"));
    primary = { label: "Submit", run: () => answer(true, { data: { answers: read() } }) };
  } else if (request.kind === "authorization") {
    const link = safeLink(request.url);
    if (link) {
      content.append(
        el("p", {}, "Sign in at ", el("strong", { class: "host", text: link.host })),
        el("p", {}, el("a", { class: "auth-link", href: link.href, target: "_blank", rel: "noopener noreferrer", text: "Open sign-in page" })),
      );
    } else {
      content.append(el("p", { class: "warning", text: "This link is not http or https, so it cannot be opened:" }),
        el("code", { class: "unsafe-url", text: request.url || "(no url)" }));
    }
    primary = { label: "Done", run: () => answer(true) };
  } else {
    // An input without a renderable form, or a kind this console has no form for.
    if (request.kind === "input" && request.form && request.form.reason) {
      content.append(el("p", { class: "warning form-reason", text: request.form.reason }));
    }
    if (data) {
      const { schema, ...rest } = data;
      const shown = request.kind === "input" ? rest : data;
      if (Object.keys(shown).length) content.append(keyValueTable(shown));
      if (request.kind === "input" && schema !== undefined) {
        content.append(el("details", { class: "schema" }, el("summary", { text: "Schema of the expected reply" }),
          el("pre", { text: JSON.stringify(schema, null, 2) })));
      }
    }
    const read = jsonEditor(content);
    primary = {
      label: "Approve",
      run: () => { const value = read(); if (value !== undefined) answer(true, { data: value }); },
    };
  }
  if (!content.querySelector('.field-error[data-field="__all__"]')) content.append(errorBox("__all__"));

  const actions = el("div", { class: "actions" });
  if (primary) actions.append(el("button", { type: "submit", class: "primary", text: primary.label }));
  actions.append(
    el("button", { type: "button", class: "danger", text: "Decline", onclick: () => answer(false, { reason: "declined" }) }),
    el("button", {
      type: "button", class: "secondary cancel-request", text: "Cancel request",
      title: "Withdraw this request: the tool is told it was cancelled, not declined.",
      onclick: () => answer(false, { reason: "cancelled" }),
    }),
  );
  body.addEventListener("submit", (event) => {
    event.preventDefault();
    if (primary && !card.matches(".busy, .sent, .closed")) primary.run();
  });
  body.append(content);
  if (comment) body.append(comment);
  body.append(el("p", { class: "card-error error", role: "alert" }), actions);
  card.append(body);

  card.approveByKey = primary ? () => body.requestSubmit() : () => showCardError(card, "This request can only be declined or cancelled.");
  card.declineByKey = () => answer(false, { reason: "declined" });
  applyPolicy(card, request);
  return card;
}

// ---- team: who may answer, quorum, assignment, presence ---------------------------------

function policyText(policy) {
  // "1 of 2 approvals · approved by bob", who may answer, who it is assigned to.
  const parts = [];
  const approvals = policy.approvals || [];
  if (policy.quorum > 1) {
    parts.push(`${approvals.length} of ${policy.quorum} approvals` + (approvals.length ? ` · approved by ${approvals.join(", ")}` : ""));
  }
  const who = [...(policy.users || []), ...(policy.groups || []).map((g) => `group ${g}`)];
  if (who.length) parts.push(`answered by ${who.join(" or ")}`);
  if (policy.starter_may_answer === false) parts.push("four-eyes");
  if ((policy.assignees || []).length) parts.push(`assigned to ${policy.assignees.join(", ")}`);
  return parts.join(" · ");
}

function applyPolicy(card, request) {
  // The server's verdict for this viewer (selectors.for_user). A card I may not answer is read-only:
  // it says why, who may answer and how to unblock it, and shows no inputs; when I may still decline
  // or cancel (my own run under four-eyes, or after my approval under a quorum) it keeps those two buttons.
  const policy = request.policy;
  if (!policy || card.classList.contains("closed")) return;
  const header = card.querySelector("header");
  let line = card.querySelector(".policy-line");
  const text = policyText(policy);
  if (!line && text) { line = el("p", { class: "policy-line" }); header.after(line); }
  if (line) line.textContent = text;
  if (!card.querySelector(".presence")) header.append(el("span", { class: "presence", "aria-live": "polite" }));
  const readOnly = policy.may_answer === false;
  const mayDecline = readOnly && policy.may_decline === true;
  card.classList.toggle("read-only", readOnly);
  card.classList.toggle("may-decline", mayDecline);
  card.dataset.assigned = policy.assigned_to_me ? "1" : "0";
  card.whyNot = readOnly ? (policy.why_not || "You may not answer this request.") : null;
  const body = card.querySelector(".card-body");
  if (body) {
    body.inert = readOnly && !mayDecline;
    // The fields go (the data they describe stays readable); they come back if I may answer again.
    for (const part of body.querySelector(".card-content")?.children || []) {
      if (part.matches("input, select, textarea, label") || part.querySelector("input, select, textarea")) part.hidden = readOnly;
    }
  }
  let note = card.querySelector(".why-not");
  if (readOnly) {
    if (!note) { note = el("p", { class: "why-not", role: "note" }); (line || header).after(note); }
    note.textContent = card.whyNot;
  } else if (note) {
    note.remove();
  }
}

function applyPresence(frame) {
  const card = document.querySelector(`#requests [data-request-id="${CSS.escape(frame.request)}"]`);
  const box = card && card.querySelector(".presence");
  if (box) box.textContent = frame.viewers && frame.viewers.length ? `also here: ${frame.viewers.join(", ")}` : "";
}

const VIEWING_EVERY_MS = 10000;
const onScreen = new Set();
const cardWatcher = typeof IntersectionObserver === "undefined" ? null : new IntersectionObserver((entries) => {
  for (const entry of entries) {
    const id = entry.target.dataset.requestId;
    if (entry.isIntersecting) { if (!onScreen.has(id)) { onScreen.add(id); sendViewing(id); } } else onScreen.delete(id);
  }
});

function sendViewing(id) {
  // Tell the console this request is on my screen; others see "also here: <me>" until it lapses.
  if (!document.querySelector(`#requests [data-request-id="${CSS.escape(id)}"]:not(.closed)`)) { onScreen.delete(id); return; }
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "viewing", request: id }));
}

function watchCard(card) {
  if (cardWatcher && card) cardWatcher.observe(card);
}

function setupViewToggle() {
  // "All" / "Assigned to me": a filter on the cards; the counts stay "what I may answer".
  const toggle = document.getElementById("view-toggle");
  const list = document.getElementById("requests");
  if (!toggle || !list) return;
  const show = (view) => {
    list.dataset.view = view;
    for (const button of toggle.querySelectorAll("button")) button.setAttribute("aria-pressed", String(button.dataset.view === view));
    try { localStorage.setItem("console-view", view); } catch (e) { /* private mode */ }
    refreshCounts();
  };
  for (const button of toggle.querySelectorAll("button")) button.addEventListener("click", () => show(button.dataset.view));
  let saved = "all";
  try { saved = localStorage.getItem("console-view") || "all"; } catch (e) { /* private mode */ }
  show(saved === "mine" ? "mine" : "all");
}

function tombstone(card, message) {
  // The request closed while this reviewer was acting on it: say so where they looked.
  card.classList.add("closed");
  card.classList.remove("busy");
  card.querySelector(".card-body")?.remove();
  card.querySelector(".countdown")?.remove();
  card.append(el("p", { class: "card-error error", role: "alert", text: message }),
    el("button", { type: "button", class: "small", text: "Dismiss", onclick: () => { card.remove(); refreshCounts(); } }));
  refreshCounts();
}

function closedMessage(request) {
  const who = request && request.answered_by ? ` by ${request.answered_by}` : "";
  return `This request is no longer open: it was ${request ? request.status : "resolved"}${who}.`;
}

function closeCard(card, request) {
  if (card.classList.contains("closed")) return;
  if (card.inFlight) {
    // Our own answer is on its way: wait for the console's reply before removing the card.
    card.closedRequest = request || { status: "resolved" };
  } else if (card.refusal) {
    tombstone(card, card.refusal);
  } else {
    // Someone else answered the card I was on: the keyboard goes on with the next one in view.
    if (card.contains(document.activeElement)) focusNextInView(card);
    card.remove();
  }
}

function upsertRequest(request) {
  const list = document.getElementById("requests");
  if (!list) return null;
  const existing = list.querySelector(`[data-request-id="${CSS.escape(request.id)}"]`);
  let added = null;
  if (request.status !== "open") {
    if (existing) closeCard(existing, request);
    state.requests.delete(request.id);
  } else if (!existing) {
    if (page === "run" && String(request.run) !== document.getElementById("run-detail").dataset.runId) return null;
    added = requestCard(request);
    added.sortKey = requestKey(request);
    // In the dashboard's order (oldest first): a page's cards go before requests that arrived since.
    let before = null;
    for (let node = list.lastElementChild; node && node.sortKey && compareKeys(node.sortKey, added.sortKey) > 0;
      node = node.previousElementSibling) before = node;
    list.insertBefore(added, before);
    watchCard(added);
    state.requests.set(request.id, request);
    if (state.started && !state.paging) notify(request, added);
  } else {
    applyPolicy(existing, request);
    showFirstApproval(existing, request);
    state.requests.set(request.id, request);
  }
  refreshCounts();
  return added;
}

function showFirstApproval(card, request) {
  // Under a quorum the next reviewer approves what the first one approved: the server's form
  // now opens with those values, so an open card takes them too (not a field being typed in).
  if (!request.form || !request.form.fields || !(request.policy && (request.policy.approvals || []).length)) return;
  for (const field of request.form.fields) {
    const wrap = card.querySelector(`.editable [data-field-name="${CSS.escape(String(field.name))}"]`);
    if (!wrap || wrap.contains(document.activeElement)) continue;
    const def = field.default;
    if (field.widget === "multiselect") {
      const chosen = new Set((Array.isArray(def) ? def : []).map(String));
      for (const box of wrap.querySelectorAll("input[type=checkbox]")) box.checked = chosen.has(box.value);
      continue;
    }
    const input = wrap.querySelector("input, select");
    if (!input) continue;
    if (input.type === "checkbox") input.checked = def === true;
    else if (field.widget === "datetime") input.value = present(def) ? toLocalDateTime(String(def)) : "";
    else input.value = present(def) ? String(def) : "";
  }
}

function inView(card) {
  // True when the reviewer can read what the card asks: its prompt is on screen (all of it,
  // or at least half the window's height of a longer one). A hidden card is never in view.
  const box = (card.querySelector(".prompt") || card).getBoundingClientRect();
  if (!box.width || !box.height) return false;
  const shown = Math.min(box.bottom, window.innerHeight) - Math.max(box.top, 0);
  return shown >= Math.min(box.height, window.innerHeight / 2);
}

function focusNextInView(card) {
  // After an answer, the keyboard goes on with the next answerable card in view (after this
  // one, else before it), or with the list itself: never <body>, never a card off screen.
  const list = card.parentElement;
  if (!list) return;
  const cards = [...list.querySelectorAll(":scope > article.card")];
  const at = cards.indexOf(card);
  const next = [...cards.slice(at + 1), ...cards.slice(0, at).reverse()]
    .find((other) => !other.matches(".busy, .sent, .closed, .read-only") && inView(other));
  (next || list).focus({ preventScroll: true });
}

function notify(request, card) {
  if (request.policy && request.policy.may_answer === false) return;
  if (state.notified.has(request.id)) return;
  state.notified.add(request.id);
  if (typeof Notification === "undefined" || Notification.permission !== "granted") return;
  try {
    const note = new Notification(`toolnexus: ${request.kind} request from ${request.tool || "a tool"}`, {
      body: asText(request.prompt).slice(0, 240), tag: `request-${request.id}`,
    });
    note.onclick = () => { window.focus(); if (card.isConnected) card.focus(); note.close(); };
  } catch (e) { /* a browser that only notifies from a service worker */ }
}

function setupNotifications() {
  const button = document.getElementById("enable-notifications");
  if (!button) return;
  const status = document.getElementById("notifications-status");
  const update = () => {
    const supported = typeof Notification !== "undefined";
    const permission = supported ? Notification.permission : "unsupported";
    button.hidden = permission !== "default";
    if (status) {
      status.textContent = permission === "denied" ? "Notifications are blocked for this site in the browser's settings." : "";
      status.hidden = permission !== "denied";
    }
  };
  button.addEventListener("click", async () => {
    try { await Notification.requestPermission(); } catch (e) { /* ignored: update() shows the outcome */ }
    update();
  });
  update();
}

function onKey(event) {
  if (event.ctrlKey || event.metaKey || event.altKey || event.repeat || event.isComposing) return;
  const key = (event.key || "").toLowerCase();
  if (key !== "a" && key !== "d") return;
  const active = document.activeElement;
  if (!active || isTextField(active) || !active.closest) return;
  // Only a card the reviewer focused or clicked: an arriving request never takes focus.
  const card = active.closest("#requests article.card");
  if (!card || card.matches(".busy, .sent, .closed")) return;
  event.preventDefault();
  if (!inView(card)) {
    // Never answer what the reviewer cannot see: show it, and let them press again once read.
    card.scrollIntoView({ block: "nearest" });
    showCardError(card, `Nothing was sent: this request was out of view. Read it, then press ${key.toUpperCase()} again.`);
    return;
  }
  // A card I may only decline (my own under four-eyes) still declines with D; A says why not.
  const mayOnlyDecline = key === "d" && card.classList.contains("may-decline");
  if (card.whyNot && !mayOnlyDecline) { showCardError(card, card.whyNot); return; }
  if (key === "a") {
    card.approveByKey();
  } else {
    const prompt = card.querySelector(".prompt")?.textContent || "";
    if (window.confirm(`Decline this request?\n\n${prompt}`)) card.declineByKey();
  }
}

// ---- runs ------------------------------------------------------------------------

function mayCancel(run) {
  // The server's verdict for this viewer (policies.cancel_refusal); it refuses a cancel anyway.
  return !(run.cancel && run.cancel.may_cancel === false);
}

function runRow(run) {
  const cancel = mayCancel(run) ? el("button", {
    type: "button", class: "danger small", text: run.cancel_requested ? "Cancelling…" : "Cancel run",
    disabled: run.cancel_requested, "data-cancel-run": run.id,
    onclick: () => send({ type: "cancel_run", run: run.id }, row),
  }) : null;
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
    // Oldest first, as the server pages them: a page's rows go before runs that started since.
    let before = null;
    for (let row = active.lastElementChild; row && Number(row.dataset.runId) > run.id; row = row.previousElementSibling) before = row;
    active.insertBefore(runRow(run), before);
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
  // Another console process may have taken the run over (its owner died).
  const owner = document.getElementById("run-owner");
  if (owner && run.owner) owner.textContent = run.owner;
  const result = document.getElementById("run-result");
  if (run.result) {
    result.textContent = run.result.output;
    result.classList.toggle("is-error", run.result.is_error);
  }
  const cancel = document.getElementById("run-cancel");
  if (cancel && !ACTIVE.has(run.status)) cancel.remove();
  else if (cancel) cancel.hidden = !mayCancel(run);
}

function appendTimeline(frame) {
  const timeline = document.getElementById("timeline");
  const detail = document.getElementById("run-detail");
  if (!timeline || !detail || String(frame.run_id) !== detail.dataset.runId) return;
  if (timeline.querySelector(`[data-seq="${frame.seq}"]`)) return;
  timeline.append(el("li", { "data-seq": frame.seq },
    el("time", { datetime: frame.at, text: frame.at }), " ", el("strong", { text: frame.action }), ` by ${frame.actor}`,
    timelineNote(frame)));
}

function timelineNote(frame) {
  // Why an answer or a cancel was refused, and how far a quorum has got (as the run page renders them).
  const payload = frame.payload || {};
  if (frame.action === "request.answer_refused" || frame.action === "run.cancel_refused") return `: ${payload.reason || ""}`;
  if (frame.action === "request.approval_recorded") return ` (${(payload.approvals || []).length} of ${payload.quorum})`;
  return null;
}

function refreshCounts() {
  // The numbers are the server's totals (snapshot.counts plus each event's count_change), not the cards
  // on the page: a dashboard shows one page of a long queue at a time.
  const requests = document.getElementById("requests");
  const mine = requests && requests.dataset.view === "mine" ? '[data-assigned="1"]' : "";
  const cards = requests ? requests.querySelectorAll(`:scope > article.card:not(.closed)${mine}`).length : 0;
  const counts = state.counts;
  const count = counts && counts.for_me !== null && counts.for_me !== undefined ? counts.for_me
    : (requests ? requests.querySelectorAll(`:scope > article.card:not(.closed):not(.read-only)${mine}`).length : 0);
  const counter = document.getElementById("request-count");
  if (counter) counter.textContent = String(count);
  document.getElementById("requests-empty")?.toggleAttribute("hidden", cards > 0);
  const totals = document.getElementById("request-totals");
  if (totals && counts) {
    const kinds = Object.entries(counts.kinds || {}).map(([kind, n]) => `${kind} ${n}`);
    totals.textContent = [`${counts.requests} open`, ...kinds, `${count} for you to answer`].join(" · ");
    totals.hidden = counts.requests === 0;
  }
  showPaging("requests", requests ? requests.querySelectorAll(":scope > article.card:not(.closed)").length : 0,
    counts ? counts.requests : null, state.next);
  const runs = document.getElementById("runs");
  if (runs) {
    const runCount = counts ? counts.runs : runs.children.length;
    document.getElementById("runs-empty").toggleAttribute("hidden", runCount > 0);
    document.getElementById("runs-table").toggleAttribute("hidden", runs.children.length === 0);
    const runCounter = document.getElementById("run-count");
    if (runCounter) runCounter.textContent = String(runCount);
    showPaging("runs", runs.children.length, counts ? counts.runs : null, state.runsNext);
  }
  if (page === "dashboard") document.title = count ? `(${count}) toolnexus console` : "toolnexus console";
}

// ---- paging: the rest of a long queue, one bounded page frame at a time ------------------

function showPaging(of, shown, total, next) {
  // "Showing 50 of 2000" and a Load more button while the server has a next page.
  const box = document.getElementById(`${of}-more`);
  if (!box) return;
  box.hidden = !next;
  const progress = box.querySelector(".progress");
  if (progress) {
    const label = of === "runs" ? "runs" : "requests";
    progress.textContent = state.loading[of] ? `Loading… (showing ${shown} of ${total ?? "?"} ${label})`
      : `Showing ${shown} of ${total ?? "?"} ${label}`;
  }
  const button = box.querySelector("button");
  if (button) button.disabled = state.loading[of];
}

function requestPage(of) {
  // Ask for the page after the last one shown; one page frame per list at a time.
  const after = of === "runs" ? state.runsNext : state.next;
  if (!after || state.loading[of] || !socket || socket.readyState !== WebSocket.OPEN) return;
  state.loading[of] = true;
  state.asked[of] = after;
  socket.send(JSON.stringify({ type: "page", of, after, ref: `page-${of}` }));
  refreshCounts();
}

function requestRunPage(after) {
  // The run page shows its run's open requests, however far down the console's queue they are.
  const detail = document.getElementById("run-detail");
  if (!detail || !socket || socket.readyState !== WebSocket.OPEN) return;
  const frame = { type: "page", of: "requests", run: Number(detail.dataset.runId), ref: "page-run" };
  if (after) frame.after = after;
  socket.send(JSON.stringify(frame));
}

function requestKey(request) {
  // The dashboard's order, as the server pages it: created_at to the microsecond, then id.
  const match = /^(.{19})(?:\.(\d{1,6}))?/.exec(request.created_at || "");
  const micros = match ? Date.parse(`${match[1]}Z`) * 1000 + Number((match[2] || "").padEnd(6, "0")) : 0;
  return [micros, String(request.id)];
}

function compareKeys(a, b) {
  return a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0);
}

function applyRequestPage(afterKey, requests, next) {
  // One page of open requests: its range runs from just after `afterKey` (the start when null) to its last
  // request, or to the end when it is the last page. Cards in that range it does not list are gone; cards
  // after it that the page does not vouch for yet stay, marked stale, until a later page does.
  const list = document.getElementById("requests");
  if (!list) return;
  const listed = new Set(requests.map((r) => String(r.id)));
  const endKey = next && requests.length ? requestKey(requests[requests.length - 1]) : null;
  for (const card of [...list.children]) {
    if (!card.sortKey || card.classList.contains("closed") || listed.has(card.dataset.requestId)) continue;
    if (afterKey && compareKeys(card.sortKey, afterKey) <= 0) continue;
    if (endKey && compareKeys(card.sortKey, endKey) > 0) { if (!afterKey) card.stale = true; continue; }
    closeCard(card, null);
  }
  state.paging = true;
  try {
    for (const request of requests) {
      upsertRequest(request);
      const card = list.querySelector(`[data-request-id="${CSS.escape(String(request.id))}"]`);
      if (card) card.stale = false;
    }
  } finally {
    state.paging = false;
  }
  if (requests.length) state.loadedUpTo = requestKey(requests[requests.length - 1]);
  state.next = next;
  refreshCounts();
}

function applyPage(frame) {
  const of = frame.of === "runs" ? "runs" : "requests";
  if (frame.ref === `page-${of}` && frame.after !== state.asked[of]) return; // asked before a resync: outdated
  if (frame.of === "runs") {
    state.loading.runs = false;
    state.runsNext = frame.next;
    for (const run of frame.runs || []) upsertRun(run);
    refreshCounts();
    return;
  }
  if (frame.ref === "page-run") {
    // The run page's own requests: the whole range from the start is this run's.
    applyRequestPage(null, frame.requests || [], frame.next);
    state.next = null;
    if (frame.next) requestRunPage(frame.next);
    return;
  }
  state.loading.requests = false;
  applyRequestPage(state.loadedUpTo, frame.requests || [], frame.next);
  // After a resync, keep reading until every card kept from before is confirmed or closed.
  const list = document.getElementById("requests");
  if (frame.next && list && [...list.children].some((card) => card.stale)) requestPage("requests");
}

function setupPaging() {
  for (const of of ["requests", "runs"]) {
    const box = document.getElementById(`${of}-more`);
    if (!box) continue;
    box.querySelector("button")?.addEventListener("click", () => requestPage(of));
    // Infinite scroll: reaching the control loads the next page too.
    if (typeof IntersectionObserver !== "undefined") {
      new IntersectionObserver((entries) => {
        if (entries.some((entry) => entry.isIntersecting)) requestPage(of);
      }).observe(box);
    }
  }
}

// ---- applying frames ---------------------------------------------------------------

function applySnapshot(snapshot) {
  state.seq = snapshot.seq;
  state.counts = snapshot.counts || null;
  state.loading = { requests: false, runs: false };
  state.asked = {};
  // Keep cards that are still open so a reviewer's half-typed input survives a resync.
  if (page === "run") requestRunPage(null); // the snapshot's page is the console's first, not this run's
  else {
    state.loadedUpTo = null;
    applyRequestPage(null, snapshot.requests, snapshot.next || null);
  }
  state.started = true;
  if (page === "dashboard") {
    document.getElementById("runs").replaceChildren();
    state.runsNext = snapshot.runs_next || null;
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
  // Cards kept from before a resync, beyond the snapshot's page: read on until each is confirmed or closed.
  const list = document.getElementById("requests");
  if (state.next && list && [...list.children].some((card) => card.stale)) requestPage("requests");
}

function applyCountChange(change) {
  // An event's effect on the server's totals (selectors.count_change), for this viewer.
  const counts = state.counts;
  if (!counts || !change) return;
  if (change.requests) {
    counts.requests += change.requests;
    if (change.kind !== undefined) {
      const left = (counts.kinds[change.kind] || 0) + change.requests;
      if (left > 0) counts.kinds[change.kind] = left;
      else delete counts.kinds[change.kind];
    }
  }
  if (change.for_me && counts.for_me !== null && counts.for_me !== undefined) counts.for_me += change.for_me;
  if (change.runs) counts.runs += change.runs;
}

function applyEvent(frame) {
  if (frame.seq <= state.seq) return;
  if (frame.prev !== state.seq) {
    // A gap: this page missed something. The database has it; ask for a fresh snapshot.
    socket.send(JSON.stringify({ type: "resync" }));
    return;
  }
  state.seq = frame.seq;
  applyCountChange(frame.count_change);
  if (frame.request) upsertRequest(frame.request);
  if (frame.run) upsertRun(frame.run);
  appendTimeline(frame);
  refreshCounts();
}

function onReply(card, frame) {
  // The console's answer to something this card sent.
  card.inFlight = null;
  if (frame.type === "approval_recorded") {
    // Counted towards the quorum; the request stays open for the next reviewer.
    setBusy(card, false);
    const box = card.querySelector(".card-error");
    if (box) box.textContent = "";
    const line = card.querySelector(".policy-line");
    if (line) line.textContent = `${frame.approvals.length} of ${frame.quorum} approvals · approved by ${frame.approvals.join(", ")}`;
    return;
  }
  if (frame.type === "answered") {
    // Focus was on this card, or fell to <body> when its clicked button was disabled while sending.
    const active = document.activeElement;
    if (!active || active === document.body || card.contains(active)) focusNextInView(card);
    if (card.closedRequest) card.remove();
    else { card.classList.remove("busy"); card.classList.add("sent"); }
    refreshCounts();
    return;
  }
  showCardError(card, frame.message);
  if (card.matches("article.card")) showFieldErrors(card, frame.field_errors || {});
  if (frame.error === "not_open") card.refusal = frame.message;
  if (card.closedRequest) tombstone(card, frame.message);
}

function onFrame(frame) {
  const card = frame.ref ? state.pending.get(frame.ref) : null;
  if (frame.ref) state.pending.delete(frame.ref);
  switch (frame.type) {
    case "snapshot": return applySnapshot(frame);
    case "event": return applyEvent(frame);
    case "page": return applyPage(frame);
    case "answered":
      if (card) onReply(card, frame);
      return;
    case "cancel_requested":
      if (card) {
        card.inFlight = null;
        const b = card.querySelector("[data-cancel-run]");
        if (b) b.textContent = "Cancelling…";
      }
      return;
    case "approval_recorded":
      if (card) onReply(card, frame);
      return;
    case "presence":
      applyPresence(frame);
      return;
    case "error":
      if (card) onReply(card, frame);
      else if (typeof frame.ref === "string" && frame.ref.startsWith("page-")) pageRefused(frame);
      else console.warn("console:", frame.message);
      return;
    default:
      console.warn("console: unknown frame", frame.type);
  }
}

function pageRefused(frame) {
  // The console would not send the next page (a cursor it no longer accepts): start again from a snapshot.
  state.loading = { requests: false, runs: false };
  console.warn("console:", frame.message);
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "resync" }));
}

function setConnection(stateName, text) {
  const badge = document.getElementById("conn-status");
  if (badge) { badge.dataset.state = stateName; badge.textContent = text; }
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  socket = new WebSocket(`${scheme}://${location.host}/ws/console/`);
  socket.addEventListener("open", () => {
    retryDelay = 500;
    setConnection("live", "live");
    for (const id of onScreen) sendViewing(id); // a new socket: say again what is on screen
  });
  socket.addEventListener("message", (message) => {
    try { onFrame(JSON.parse(message.data)); } catch (e) { console.error("console: bad frame", e); }
  });
  socket.addEventListener("close", (event) => {
    if (event.code === 4401) {
      // This session ended (logged out here or elsewhere): reconnecting would be refused.
      setConnection("offline", "logged out");
      document.getElementById("requests")?.setAttribute("inert", "");
      return;
    }
    setConnection("offline", "reconnecting…");
    for (const card of state.pending.values()) {
      card.inFlight = null;
      const message = "The connection dropped before the console answered. Check the request and try again.";
      if (card.closedRequest) tombstone(card, `${message} ${closedMessage(card.closedRequest)}`);
      else showCardError(card, message);
    }
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
