// Forms: a JSON Schema's fields, the fields the server describes, question blocks, a JSON
// reply, and the errors the console sends back for them.

import { asText, el, uid } from "./dom.js";
import { exampleText, jsonField, prettyJson, shapeOf } from "./json_field.js";

const INVALID = Symbol("not JSON of the field's shape");

export function schemaForm(schema, container) {
  // Builds inputs for a flat JSON Schema, each prefilled with its default; a list or object field is a
  // JSON editor. Returns a function that reads the values back, or undefined (each reason shown beside
  // its field) while a JSON editor holds something that is not JSON of its shape.
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
    const box = errorBox(name);
    if (shapeOf(prop)) {
      // The placeholder shows the shape the schema asks for, from the schema (not its default: that is the value).
      const example = exampleText({ ...prop, default: undefined });
      input = el("textarea", { id, name, placeholder: example });
      input.value = prettyJson(prop.default);
      box.id = uid("err");
      const readJson = jsonField(input, box, { shape: shapeOf(prop), example });
      read = () => { const result = readJson(); return result.ok ? result.value : INVALID; };
    } else if (Array.isArray(prop.enum)) {
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
      read = () => {
        // Text the browser cannot read as a number is not dropped in silence: it is refused beside the field.
        if (input.validity.badInput) { box.replaceChildren(el("div", { text: "Enter a number." })); return INVALID; }
        return input.value === "" ? undefined : Number(input.value);
      };
    } else {
      const type = { email: "email", uri: "url", date: "date", "date-time": "datetime-local" }[prop.format] || "text";
      input = el("input", { id, name, type, value: prop.default, minlength: prop.minLength, maxlength: prop.maxLength });
      read = () => (input.value === "" && !required.has(name) ? undefined : input.value);
    }
    box.id ||= uid("err");
    input.setAttribute("aria-describedby", box.id);
    container.append(el("div", { class: "field" }, label, input, help, box));
    readers.push([name, read]);
  }
  container.append(errorBox("__all__"));
  return () => {
    const values = {};
    let valid = true;
    for (const [name, read] of readers) {
      const value = read(); // every field, so each JSON editor shows its own error
      if (value === INVALID) valid = false;
      else if (value !== undefined) values[name] = value;
    }
    return valid ? values : undefined;
  };
}

export function errorBox(name) {
  return el("div", { class: "field-error", "data-field": name, role: "alert" });
}

const TEXT_WIDGETS = { text: "text", email: "email", url: "url", date: "date", datetime: "datetime-local" };

export function present(value) {
  return value !== null && value !== undefined && value !== "";
}

export function constraintHint(field) {
  const { min, max, min_length: minLength, max_length: maxLength } = field;
  if (field.widget === "number" || field.widget === "integer") {
    const whole = field.widget === "integer" ? "a whole number " : "";
    // An exclusive bound is itself refused (the server's min_exclusive / max_exclusive): "greater than 0".
    const low = field.min_exclusive ? `greater than ${min}` : `at least ${min}`;
    const high = field.max_exclusive ? `less than ${max}` : `at most ${max}`;
    if (present(min) && present(max)) {
      return field.min_exclusive || field.max_exclusive ? `${whole}${low} and ${high}` : `${whole}from ${min} to ${max}`;
    }
    if (present(min)) return field.min_exclusive ? `${whole}${low}` : `${whole}of ${low}`;
    if (present(max)) return field.max_exclusive ? `${whole}${high}` : `${whole}of ${high}`;
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

export function describedFields(fields, container) {
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

export function toLocalDateTime(iso) {
  // "2026-05-01T13:30:00Z" -> "2026-05-01T15:30" in the browser's zone, as datetime-local shows it.
  const moment = new Date(iso);
  if (Number.isNaN(moment.getTime())) return iso;
  const local = new Date(moment.getTime() - moment.getTimezoneOffset() * 60000);
  return local.toISOString().slice(0, 16);
}

export function showFieldErrors(scope, errors) {
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

export function focusFirstInvalid(scope) {
  // The first field showFieldErrors marked, focused and scrolled into view; false when none is marked.
  const field = scope.querySelector(".has-error input:not([type=hidden]), .has-error select, .has-error textarea");
  if (!field) return false;
  field.focus({ preventScroll: true });
  field.scrollIntoView({ block: "nearest" });
  return true;
}

export function questionBlocks(questions, container, group) {
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

export function jsonEditor(container) {
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

export function setBusy(card, busy) {
  card.classList.toggle("busy", busy);
  for (const button of card.querySelectorAll("button")) button.disabled = busy;
}

export function showCardError(card, message) {
  if (!card) return;
  setBusy(card, false);
  const box = card.querySelector(".card-error");
  if (box) box.textContent = message;
}
