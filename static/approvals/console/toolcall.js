// The tool call a reviewer answers: the tool and every argument that will run, labelled, in the tool's
// schema order, first on the card and never collapsed; the tool's other data apart, labelled as such.
// Nothing hides in a value: bidi, zero-width and control characters and edge spaces show as marks,
// a string and a number look different, and a long value is clamped with its whole one action away.

import { el } from "./dom.js";

export const CLAMP_LINES = 6;
export const CLAMP_CHARS = 300;

// Characters a browser draws as nothing, or that reorder what is drawn around them.
const HIDDEN = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;
const EDGE_SPACE = /\s/u;
const NAMES = {
  0x09: "CHARACTER TABULATION", 0x0a: "LINE FEED", 0x0d: "CARRIAGE RETURN", 0x1b: "ESCAPE", 0x7f: "DELETE",
  0xad: "SOFT HYPHEN", 0x61c: "ARABIC LETTER MARK",
  0x200b: "ZERO WIDTH SPACE", 0x200c: "ZERO WIDTH NON-JOINER", 0x200d: "ZERO WIDTH JOINER",
  0x200e: "LEFT-TO-RIGHT MARK", 0x200f: "RIGHT-TO-LEFT MARK",
  0x202a: "LEFT-TO-RIGHT EMBEDDING", 0x202b: "RIGHT-TO-LEFT EMBEDDING", 0x202c: "POP DIRECTIONAL FORMATTING",
  0x202d: "LEFT-TO-RIGHT OVERRIDE", 0x202e: "RIGHT-TO-LEFT OVERRIDE",
  0x2028: "LINE SEPARATOR", 0x2029: "PARAGRAPH SEPARATOR", 0x2060: "WORD JOINER",
  0x2066: "LEFT-TO-RIGHT ISOLATE", 0x2067: "RIGHT-TO-LEFT ISOLATE", 0x2068: "FIRST STRONG ISOLATE",
  0x2069: "POP DIRECTIONAL ISOLATE", 0xfeff: "ZERO WIDTH NO-BREAK SPACE",
};

function codePoint(char) {
  return `U+${char.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}`;
}

// -- a value as a list of pieces: text (of a kind), a hidden character's mark, a line break ------------

function stringPieces(text, out) {
  // A string in quotes, its hidden characters and its leading and trailing spaces as visible marks.
  out.push({ kind: "quote", text: "\"" });
  const chars = Array.from(text);
  let start = 0;
  let end = chars.length;
  while (start < end && EDGE_SPACE.test(chars[start]) && !HIDDEN.test(chars[start])) start += 1;
  while (end > start && EDGE_SPACE.test(chars[end - 1]) && !HIDDEN.test(chars[end - 1])) end -= 1;
  let run = "";
  const flush = () => { if (run) out.push({ kind: "str", text: run }); run = ""; };
  chars.forEach((char, index) => {
    if ((index < start || index >= end) && !HIDDEN.test(char)) {
      flush();
      out.push({ kind: "space", text: "␣", size: 1, title: `${index < start ? "leading" : "trailing"} ${char === " " ? "space" : codePoint(char)}` });
    } else if (char === "\n") {
      flush();
      out.push({ kind: "mark", text: "↵", size: 1, title: "LINE FEED (a new line)" }, { kind: "break" });
    } else if (HIDDEN.test(char)) {
      flush();
      const name = NAMES[char.codePointAt(0)] || "an invisible or control character";
      out.push({ kind: "mark", text: codePoint(char), size: 1, title: `${codePoint(char)} ${name}` });
    } else {
      run += char;
    }
  });
  flush();
  out.push({ kind: "quote", text: "\"" });
}

function valuePieces(value, out, indent = "") {
  // Strings quoted; numbers, booleans and null bare; objects and arrays as pretty JSON.
  if (typeof value === "string") return stringPieces(value, out);
  if (value === null || value === undefined) return out.push({ kind: "null", text: "null" });
  if (typeof value === "number") return out.push({ kind: "number", text: JSON.stringify(value) });
  if (typeof value === "boolean") return out.push({ kind: "boolean", text: String(value) });
  const isList = Array.isArray(value);
  const entries = isList ? value.map((item) => [null, item]) : Object.entries(value);
  if (!entries.length) return out.push({ kind: "punct", text: isList ? "[]" : "{}" });
  out.push({ kind: "punct", text: isList ? "[" : "{" });
  const inner = `${indent}  `;
  entries.forEach(([key, item], index) => {
    out.push({ kind: "break" }, { kind: "punct", text: inner });
    if (key !== null) {
      stringPieces(key, out);
      out.push({ kind: "punct", text: ": " });
    }
    valuePieces(item, out, inner);
    if (index < entries.length - 1) out.push({ kind: "punct", text: "," });
  });
  out.push({ kind: "break" }, { kind: "punct", text: indent + (isList ? "]" : "}") });
}

function sizeOf(piece) {
  if (piece.kind === "break") return 1;
  return piece.size ?? Array.from(piece.text).length;
}

function clampPieces(pieces) {
  // The first CLAMP_LINES lines or CLAMP_CHARS characters, and how much of the whole that is.
  const total = pieces.reduce((sum, piece) => sum + sizeOf(piece), 0);
  const lines = 1 + pieces.filter((piece) => piece.kind === "break").length;
  if (total <= CLAMP_CHARS && lines <= CLAMP_LINES) return null;
  const kept = [];
  let used = 0;
  let line = 1;
  for (const piece of pieces) {
    if (piece.kind === "break" && ++line > CLAMP_LINES) break;
    const size = sizeOf(piece);
    if (used + size > CLAMP_CHARS) {
      if (piece.kind === "str" || piece.kind === "punct") {
        kept.push({ ...piece, text: Array.from(piece.text).slice(0, CLAMP_CHARS - used).join("") });
        used = CLAMP_CHARS;
      }
      break;
    }
    kept.push(piece);
    used += size;
  }
  return { kept, total, lines };
}

function drawPieces(node, pieces) {
  node.replaceChildren(...pieces.map((piece) => {
    if (piece.kind === "break") return el("br");
    if (piece.kind === "str") return document.createTextNode(piece.text);
    if (piece.kind === "mark" || piece.kind === "space") {
      return el("span", { class: piece.kind === "mark" ? "hidden-char" : "edge-space", title: piece.title, text: piece.text });
    }
    return el("span", { class: `v-${piece.kind}`, text: piece.text });
  }));
}

export function argValue(value, { whole = false } = {}) {
  // One value, escaped and, when long (unless ``whole``), clamped with a mark and a "Show all" that shows it whole.
  const pieces = [];
  valuePieces(value, pieces);
  const type = value === null || value === undefined ? "null" : Array.isArray(value) ? "array" : typeof value;
  const node = el("div", { class: "arg-value", "data-type": type, dir: "ltr" });
  const clamp = whole ? null : clampPieces(pieces);
  if (!clamp) {
    drawPieces(node, pieces);
    return el("div", { class: "arg-holder" }, node);
  }
  // The whole's size, not the part shown: on a narrow screen CSS may cut that shorter (at six lines).
  const count = (n) => n.toLocaleString("en");
  const chars = typeof value === "string" ? Array.from(value).length : clamp.total;
  clamp.whole = clamp.lines > 1 ? `${count(chars)} characters on ${count(clamp.lines)} lines` : `${count(chars)} characters`;
  drawPieces(node, clamp.kept);
  node.classList.add("clamped");
  node.append(el("span", { class: "clamp-ellipsis", "aria-hidden": "true", text: "…" }));
  const mark = el("span", { class: "clamp-mark", text: `clamped: ${clamp.whole} in all` });
  const showAll = el("button", {
    type: "button", class: "small show-all", text: "Show all",
    onclick: () => {
      // The whole value, in a box of its own that scrolls: the card's buttons stay where they were.
      drawPieces(node, pieces);
      node.classList.remove("clamped");
      node.classList.add("whole");
      node.tabIndex = 0;
      mark.textContent = `whole value: ${clamp.whole}`;
      showAll.remove();
      node.focus({ preventScroll: true });
    },
  });
  return el("div", { class: "arg-holder" }, node, el("div", { class: "clamp-line" }, mark, showAll));
}

function nameNode(name) {
  // An argument's name, with the same marks as a value (a name can hide a character too), unquoted.
  const pieces = [];
  stringPieces(name, pieces);
  const node = el("dt", { class: "arg-name", dir: "ltr" });
  drawPieces(node, pieces.filter((piece) => piece.kind !== "quote"));
  return node;
}

export function argRows(values, order, { whole = false } = {}) {
  // <dl class="arg-list">: each named value, labelled and escaped; clamped when long unless ``whole``.
  const list = el("dl", { class: "arg-list" });
  for (const name of order) {
    list.append(el("div", { class: "arg", "data-arg": name }, nameNode(name), el("dd", {}, argValue(values[name], { whole }))));
  }
  return list;
}

export function argumentOrder(request) {
  // The server's order (the tool's schema first), then any name it did not list, as the args hold them.
  const args = request.args && typeof request.args === "object" ? request.args : {};
  const listed = (Array.isArray(request.arg_order) ? request.arg_order : []).filter((name) => name in args);
  return [...listed, ...Object.keys(args).filter((name) => !listed.includes(name))];
}

export function toolCall(request) {
  // <section class="tool-call">: the tool's name, then each argument that will run, labelled.
  const args = request.args && typeof request.args === "object" ? request.args : {};
  const order = argumentOrder(request);
  const label = request.host ? `Arguments as sent by ${request.host}` : "Arguments";
  const section = el("section", { class: "tool-call", "aria-label": `Tool call: ${request.tool || "no tool"}` },
    el("p", { class: "tool-line" }, el("span", { class: "muted", text: "Tool " }),
      el("code", { class: "tool-name", text: request.tool || "(no tool named)" })),
    el("h3", { class: "section-label", text: label }));
  section.append(order.length ? argRows(args, order) : el("p", { class: "muted no-args", text: "(no arguments)" }));
  return section;
}

function sameJson(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

export function otherData(data, { args = {}, omit = [] } = {}) {
  // <section class="tool-data">: what else the tool sent, apart from the call; null when nothing is left.
  // Left out: keys the card draws itself (``omit``) and keys that repeat an argument's name and value.
  if (!data || typeof data !== "object" || Array.isArray(data)) {
    return data === null || data === undefined ? null
      : el("section", { class: "tool-data" }, el("h3", { class: "section-label", text: "Other data the tool sent" }),
        el("dl", { class: "arg-list" }, el("div", { class: "arg" }, el("dd", {}, argValue(data)))));
  }
  const names = Object.keys(data).filter((name) => !omit.includes(name) && !(name in args && sameJson(args[name], data[name])));
  if (!names.length) return null;
  return el("section", { class: "tool-data" },
    el("h3", { class: "section-label", text: "Other data the tool sent" }), argRows(data, names));
}
