// A JSON editor for one value (a list or object argument, or a run's whole args): a textarea shown
// pretty-printed, checked when the reviewer leaves it or sends the form, with the reason beside it.
// No library: JSON.parse is the judge of the syntax, the server of everything else.

import { el } from "./dom.js";

const SHAPES = {
  array: { fits: Array.isArray, noun: "a JSON list" },
  object: { fits: (v) => v !== null && typeof v === "object" && !Array.isArray(v), noun: "a JSON object" },
};
const EXAMPLE_KEYS = 3; // an example object shows its required keys, then optional ones up to this many
const SCALAR_EXAMPLES = { string: "text", number: 1, integer: 1, boolean: true, null: null };

export function exampleOf(schema, depth = 0) {
  // A value of the shape ``schema`` describes, to show how to fill it in: its default or first example,
  // else built from its type (an array of objects holds one object with its required keys).
  if (!schema || typeof schema !== "object" || depth > 4) return "text";
  if (schema.default !== undefined) return schema.default;
  if (Array.isArray(schema.examples) && schema.examples.length) return schema.examples[0];
  if ("const" in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length) return schema.enum[0];
  const declared = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  const type = declared || (schema.properties ? "object" : schema.items ? "array" : "string");
  if (type === "array") return [exampleOf(schema.items, depth + 1)];
  if (type !== "object") return type in SCALAR_EXAMPLES ? SCALAR_EXAMPLES[type] : "text";
  const properties = schema.properties || {};
  const required = (schema.required || []).filter((name) => name in properties);
  const optional = Object.keys(properties).filter((name) => !required.includes(name) && properties[name]?.type !== "boolean");
  const names = [...required, ...optional.slice(0, Math.max(0, EXAMPLE_KEYS - required.length))];
  if (!names.length) return { key: "value" };
  return Object.fromEntries(names.map((name) => [name, exampleOf(properties[name], depth + 1)]));
}

export function exampleText(schema) {
  // The example on one line, as a placeholder or in an error: [{"question": "text", "options": ["text"]}].
  // Only the layout's newlines are real ones (JSON escapes those in strings), so only layout is folded.
  return JSON.stringify(exampleOf(schema), null, 1)
    .replace(/([[{])\n */g, "$1").replace(/\n *([\]}])/g, "$1").replace(/\n */g, " ");
}

export function prettyJson(value) {
  return value === undefined ? "" : JSON.stringify(value, null, 2);
}

export function shapeOf(prop) {
  // "array" or "object" when a schema property takes a list or an object (the JSON editor's fields).
  const type = prop && prop.type;
  return type === "array" || type === "object" ? type : null;
}

export function jsonField(textarea, box, { shape = null, optional = true, example = null } = {}) {
  // Makes ``textarea`` a JSON editor whose errors go in ``box``; returns read(): { ok, value }, where
  // value is undefined for an empty optional editor (the argument is left out) and ok is false for
  // text that is not JSON of the expected shape (the reason is shown, nothing may be sent). ``example``:
  // how a value of the field looks (exampleText), named in that reason.
  textarea.classList.add("json-field");
  textarea.spellcheck = false;
  textarea.setAttribute("autocapitalize", "off");
  if (box.id) textarea.setAttribute("aria-describedby", box.id);
  const check = () => {
    const text = textarea.value.trim();
    if (text === "") return optional ? { ok: true, value: undefined } : { ok: true, value: shape === "array" ? [] : {} };
    let value;
    try {
      value = JSON.parse(text);
    } catch (e) {
      return { ok: false, message: `This is not valid JSON: ${e.message}. Nothing is sent until it is.` };
    }
    if (shape && !SHAPES[shape].fits(value)) {
      return { ok: false, message: `Enter ${SHAPES[shape].noun}, like ${example || exampleText({ type: shape })}.` };
    }
    return { ok: true, value };
  };
  const show = (result) => {
    // Only its own message: what the server said about the field stays until the form is sent again.
    textarea.setAttribute("aria-invalid", result.ok ? "false" : "true");
    box.querySelector(":scope > .json-error")?.remove();
    if (!result.ok) box.prepend(el("div", { class: "json-error", text: result.message }));
    textarea.closest(".field")?.classList.toggle("has-error", box.childElementCount > 0);
  };
  // Judged once the reviewer leaves the editor (not at every keystroke of a half-typed value); once they
  // fix it, the error goes as they type. Leaving it keeps its height: a Start button pressed straight
  // after must not move from under the pointer.
  textarea.addEventListener("blur", () => {
    const result = check();
    show(result);
    if (result.ok && result.value !== undefined) textarea.value = prettyJson(result.value);
  });
  textarea.addEventListener("input", () => {
    if (textarea.getAttribute("aria-invalid") === "true" && check().ok) show({ ok: true });
    fitRows(textarea);
  });
  fitRows(textarea);
  return () => {
    const result = check();
    show(result);
    return result;
  };
}

function fitRows(textarea) {
  // Tall enough for what it holds (a pretty-printed object is several lines), within reason.
  textarea.rows = Math.min(12, Math.max(3, textarea.value.split("\n").length));
}
