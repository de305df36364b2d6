// The inbox's search box, filters, sort and grouping: drawn from the URL, written back to it on each change
// (so a view is shareable and survives a reload), and the list read again from the server.

import { el } from "./dom.js";
import { state } from "./state.js";
import { filtersOf, writeQuery } from "./query.js";
import { reload } from "./inbox.js";
import { clearBulk } from "./bulk.js";
import { rows } from "./detail.js";
import { countHooks } from "./notifications.js";

const TEXT = ["q", "tool", "host", "policy", "starter"];
const CHOICES = ["status", "kind", "sort", "group"];
const CHECKS = { assigned: "me", may_answer: "1", expiring: "1" };
const TYPING_MS = 250;

const seen = { tool: new Set(), host: new Set(), policy: new Set(), starter: new Set() };

function field(form, name) {
  return form.elements.namedItem(name);
}

function drawQuery(form, query) {
  for (const name of TEXT) { const input = field(form, name); if (input) input.value = query[name] || ""; }
  for (const name of CHOICES) {
    const select = field(form, name);
    if (!select) continue;
    const value = query[name] || (name === "sort" ? "oldest" : "");
    if (value && ![...select.options].some((option) => option.value === value)) select.append(el("option", { value, text: value }));
    select.value = value;
  }
  for (const name of Object.keys(CHECKS)) { const box = field(form, name); if (box) box.checked = Boolean(query[name]); }
  showFilterCount(form, query);
}

function readForm(form) {
  const query = {};
  for (const name of [...TEXT, ...CHOICES]) {
    const value = (field(form, name)?.value || "").trim();
    if (value && !(name === "sort" && value === "oldest")) query[name] = value;
  }
  for (const [name, value] of Object.entries(CHECKS)) if (field(form, name)?.checked) query[name] = value;
  return query;
}

function showFilterCount(form, query) {
  // "Filters (2)": how many narrow the list besides the search box, so a folded panel still says so.
  const count = Object.keys(filtersOf(query)).filter((name) => name !== "q").length;
  const badge = form.querySelector(".filter-count");
  if (badge) badge.textContent = count ? `(${count})` : "";
  form.querySelector("#filters-clear").hidden = !Object.keys(filtersOf(query)).length;
}

function rememberValues() {
  // Offer the tools, hosts, policies and starters the list has shown as choices in their boxes.
  for (const row of rows()) {
    const request = row.request || {};
    if (request.tool) seen.tool.add(request.tool);
    if (request.host) seen.host.add(request.host);
    if (request.policy && request.policy.name) seen.policy.add(request.policy.name);
    if (request.policy && request.policy.starter) seen.starter.add(request.policy.starter);
  }
  for (const [name, values] of Object.entries(seen)) {
    const list = document.getElementById(`${name}-choices`);
    if (!list || list.children.length === values.size) continue;
    list.replaceChildren(...[...values].sort().map((value) => el("option", { value })));
  }
}

export function setupFilters(tools) {
  const form = document.getElementById("inbox-filters");
  if (!form) return;
  for (const tool of tools || []) seen.tool.add(tool.name);
  drawQuery(form, state.inbox.query);
  const more = document.getElementById("filter-more");
  if (more && Object.keys(filtersOf(state.inbox.query)).some((name) => name !== "q")) more.open = true;
  let typing = null;
  const apply = () => {
    clearTimeout(typing);
    const query = { ...readForm(form), request: state.inbox.query.request };
    const before = JSON.stringify({ ...state.inbox.query, request: undefined });
    if (JSON.stringify({ ...query, request: undefined }) === before) return;
    state.inbox.query = query;
    writeQuery(query);
    showFilterCount(form, query);
    clearBulk();
    reload();
  };
  form.addEventListener("submit", (event) => { event.preventDefault(); apply(); });
  form.addEventListener("change", apply);
  form.addEventListener("input", (event) => {
    if (!event.target.matches("input[type=search], input[type=text]")) return;
    clearTimeout(typing);
    typing = setTimeout(apply, TYPING_MS);
  });
  form.querySelector("#filters-clear")?.addEventListener("click", () => {
    for (const name of [...TEXT, "status", "kind"]) { const input = field(form, name); if (input) input.value = ""; }
    for (const name of Object.keys(CHECKS)) { const box = field(form, name); if (box) box.checked = false; }
    apply();
  });
  countHooks.push(rememberValues);
}
