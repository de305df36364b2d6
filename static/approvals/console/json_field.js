// A JSON editor for one value (a list or object argument, or a run's whole args): a textarea shown
// pretty-printed, checked when the reviewer leaves it or sends the form, with the reason beside it.
// No library: JSON.parse is the judge of the syntax, the server of everything else.

import { el } from "./dom.js";

const SHAPES = {
  array: { fits: Array.isArray, example: 'a JSON list, like ["a", "b"]' },
  object: { fits: (v) => v !== null && typeof v === "object" && !Array.isArray(v), example: 'a JSON object, like {"key": "value"}' },
};

export function prettyJson(value) {
  return value === undefined ? "" : JSON.stringify(value, null, 2);
}

export function shapeOf(prop) {
  // "array" or "object" when a schema property takes a list or an object (the JSON editor's fields).
  const type = prop && prop.type;
  return type === "array" || type === "object" ? type : null;
}

export function jsonField(textarea, box, { shape = null, optional = true } = {}) {
  // Makes ``textarea`` a JSON editor whose errors go in ``box``; returns read(): { ok, value }, where
  // value is undefined for an empty optional editor (the argument is left out) and ok is false for
  // text that is not JSON of the expected shape (the reason is shown, nothing may be sent).
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
    if (shape && !SHAPES[shape].fits(value)) return { ok: false, message: `Enter ${SHAPES[shape].example}.` };
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
