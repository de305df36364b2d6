// Drafts: what a reviewer typed into a request's card and has not sent yet (its fields, the comment, a
// decline's reason, a reply or the changes asked for), kept in the browser so a reload or a dropped socket
// loses nothing. Nothing is written to the server. One sessionStorage entry per user, "toolnexus.drafts.<user>":
// {<request id>: {at, values, reason, message: {response, text}}}. sessionStorage, not localStorage: a draft lives as long as the tab it was typed in (a reload,
// a reconnect and going between the inbox, a run's page and the request's page in that tab all keep it)
// and never stays on the disk for the next person at a shared machine. A draft goes once the console
// takes the answer, when the request closes, and at logout; a field marked secret is never kept.

import { el, timeNode } from "./dom.js";
import { myName } from "./state.js";

export const MOST_BYTES = 64 * 1024; // per user, the stored JSON's UTF-8 length: past it the oldest drafts go
const PREFIX = "toolnexus.drafts.";
const encoder = new TextEncoder();
let known = null; // the ids this tab has drafts of, as last read or written: most closing requests have none

function storageKey(user) {
  return `${PREFIX}${user}`;
}

function readAll(user = myName()) {
  try {
    const parsed = JSON.parse(sessionStorage.getItem(storageKey(user)) || "{}");
    const drafts = parsed && typeof parsed === "object" && !Array.isArray(parsed) ? parsed : {};
    known = new Set(Object.keys(drafts));
    return drafts;
  } catch {
    return {};
  }
}

function size(text) {
  return encoder.encode(text).length;
}

function writeAll(drafts, user = myName()) {
  // The oldest drafts go first until the rest fit in MOST_BYTES.
  const oldestFirst = Object.keys(drafts).sort((a, b) => String(drafts[a].at).localeCompare(String(drafts[b].at)));
  let text = JSON.stringify(drafts);
  while (oldestFirst.length && size(text) > MOST_BYTES) {
    delete drafts[oldestFirst.shift()];
    text = JSON.stringify(drafts);
  }
  known = new Set(oldestFirst);
  try {
    if (oldestFirst.length) sessionStorage.setItem(storageKey(user), text);
    else sessionStorage.removeItem(storageKey(user));
  } catch {
    // A full or refused storage (a private window): the drafts are only in the page, as before.
  }
}

export function draftOf(id) {
  return readAll()[String(id)] || null;
}

export function draftIds() {
  return Object.keys(readAll());
}

export function forgetDraft(id) {
  if (id === undefined || id === null || !myName() || (known && !known.has(String(id)))) return;
  const drafts = readAll();
  if (!(String(id) in drafts)) return;
  delete drafts[String(id)];
  writeAll(drafts);
  for (const card of document.querySelectorAll(`article.card[data-request-id="${CSS.escape(String(id))}"]`)) {
    card.querySelector(".draft-note")?.remove();
  }
}

export function forgetAllDrafts() {
  // At logout (and when the socket says this session ended): every draft of this tab, whoever typed it.
  try {
    for (const key of Object.keys(sessionStorage)) if (key.startsWith(PREFIX)) sessionStorage.removeItem(key);
    known = new Set();
  } catch { /* no storage: nothing kept */ }
}

export async function forgetClosedDrafts() {
  // After a snapshot: a request this tab has a draft of may have closed while the socket was away. The inbox
  // shows a page at a time, so not being listed says nothing: ask the console for each request's status.
  for (const id of draftIds()) {
    try {
      const response = await fetch(`/api/v1/requests/${encodeURIComponent(id)}`, { credentials: "same-origin" });
      if (response.status === 404) { forgetDraft(id); continue; }
      if (!response.ok) continue;
      const view = await response.json();
      if (view && view.status && view.status !== "open") forgetDraft(id);
    } catch { /* unreachable now: the next snapshot asks again */ }
  }
}

// -- the fields of a card ------------------------------------------------------------------------

function marksSecret(value, depth = 0) {
  // A schema anywhere in the request's data that marks a secret (format "password", writeOnly).
  if (!value || typeof value !== "object" || depth > 32) return false;
  if (!Array.isArray(value) && (value.format === "password" || value.writeOnly === true)) return true;
  return Object.values(value).some((inner) => marksSecret(inner, depth + 1));
}

function keyOf(control) {
  // A name for a field that is the same each time the card is drawn (question blocks' names are random).
  if (control.matches("textarea.comment")) return "comment";
  if (control.matches("textarea.json-reply")) return "reply";
  const question = control.closest("[data-question]");
  const choice = control.type === "checkbox" || control.type === "radio";
  if (question) {
    const q = `q${question.dataset.question}`;
    return control.matches(".other-text") ? `${q}:other` : `${q}=${control.value}`;
  }
  if (!control.name) return null;
  return choice ? `f:${control.name}=${control.value}` : `f:${control.name}`;
}

function valueOf(control) {
  if (control.type === "checkbox" || control.type === "radio") return control.checked;
  return control.value;
}

function setValue(control, value) {
  if (control.type === "checkbox" || control.type === "radio") control.checked = value === true;
  else if (typeof value === "string") control.value = value;
}

function fieldsOf(card, secret) {
  // [key, control] for each field the reviewer fills in; with a secret in the request, only the comment.
  const found = [];
  for (const control of card.querySelectorAll(".card-body input, .card-body select, .card-body textarea")) {
    if (control.closest(".confirm-panel") || control.type === "password" || control.type === "hidden") continue;
    const key = keyOf(control);
    if (!key || (secret && key !== "comment")) continue;
    found.push([key, control]);
  }
  return found;
}

// -- one card ------------------------------------------------------------------------------------

export function keepDraft(card, request) {
  // Restores this user's draft of ``request`` into its freshly drawn card, then keeps it as they type.
  if (!myName() || card.classList.contains("closed")) return;
  const id = String(request.id);
  const secret = marksSecret(request.data) || marksSecret(request.form);
  const drawn = new Map(fieldsOf(card, secret).map(([key, control]) => [key, valueOf(control)]));
  const draft = draftOf(id);
  if (draft) restore(card, draft, secret, drawn);

  const save = (event) => {
    if (card.matches(".closed, .sent")) return;
    if (event && event.target.matches && event.target.matches(".decline-reason")) card.draftReason = event.target.value;
    if (event && event.target.matches && event.target.matches(".respond-message")) {
      // A reply or the changes asked for (confirm.js askToRespond): kept with which of the two it was.
      card.draftMessage = { response: event.target.closest(".respond-panel")?.dataset.response || "", text: event.target.value };
    }
    const values = {};
    for (const [key, control] of fieldsOf(card, secret)) {
      const value = valueOf(control);
      if (drawn.has(key) && drawn.get(key) !== value) values[key] = value;
    }
    const reason = card.draftReason || "";
    const message = card.draftMessage && card.draftMessage.text ? card.draftMessage : null;
    const drafts = readAll();
    const typed = Object.keys(values).length || reason || message;
    const entry = { at: new Date().toISOString(), values, ...(reason ? { reason } : {}), ...(message ? { message } : {}) };
    const tooLong = typed && size(JSON.stringify({ [id]: entry })) > MOST_BYTES;
    if (typed && !tooLong) drafts[id] = entry;
    else delete drafts[id];
    writeAll(drafts);
    showTooLong(card, tooLong);
  };
  card.addEventListener("input", save);
  card.addEventListener("change", save);
  card.discardDraft = () => {
    for (const [key, control] of fieldsOf(card, secret)) if (drawn.has(key)) setValue(control, drawn.get(key));
    card.draftReason = "";
    card.draftMessage = null;
    card.querySelector(".draft-note")?.remove();
    forgetDraft(id);
  };
}

function restore(card, draft, secret, drawn) {
  const values = draft.values && typeof draft.values === "object" ? draft.values : {};
  let restored = false;
  for (const [key, control] of fieldsOf(card, secret)) {
    if (!(key in values) || !drawn.has(key)) continue;
    setValue(control, values[key]);
    restored = true;
  }
  if (typeof draft.reason === "string" && draft.reason) { card.draftReason = draft.reason; restored = true; }
  const message = draft.message && typeof draft.message === "object" ? draft.message : null;
  if (message && typeof message.text === "string" && message.text && typeof message.response === "string") {
    card.draftMessage = { response: message.response, text: message.text };
    restored = true;
  }
  if (!restored) return;
  card.touched = true; // a tombstone keeps it, and the inbox keeps the card while another row is picked
  const note = el("p", { class: "draft-note", role: "status" },
    el("span", {}, "Restored what you typed at ", timeNode(draft.at), draft.reason ? " (and your reason for declining)" : "",
      card.draftMessage ? ` (and your message to the ${card.request && card.request.run ? "model" : "host"})` : "", " ·"),
    el("button", { type: "button", class: "link-button discard-draft", text: "Discard", onclick: () => card.discardDraft?.() }));
  card.querySelector(".card-body")?.prepend(note);
}

function showTooLong(card, tooLong) {
  let note = card.querySelector(".draft-too-long");
  if (!tooLong) { note?.remove(); return; }
  if (note) return;
  note = el("p", { class: "draft-too-long muted", role: "status",
    text: "Too long to keep over a reload (more than 64 KiB): send it, or copy it somewhere safe." });
  card.querySelector(".card-body")?.prepend(note);
}

// One user per tab: drafts another login left in this tab (a session that expired without a logout) go.
try {
  const me = myName();
  if (me) for (const key of Object.keys(sessionStorage)) if (key.startsWith(PREFIX) && key !== storageKey(me)) sessionStorage.removeItem(key);
} catch { /* no storage */ }
