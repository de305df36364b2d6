// Small DOM helpers: elements, JSON values as text and tables, ages and countdowns.

const URGENT_SECONDS = 10;

const DAY_SECONDS = 24 * 3600; // further away than this, a deadline reads as a date

export function el(tag, attrs = {}, ...children) {
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

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

export function readableTime(iso) {
  // A moment as people read it, the one way the console writes a time (approvals/moments.py): in UTC,
  // "16:32 UTC" today, "4 Dec 16:32 UTC" this year, "4 Dec 2025 16:32 UTC" before; "" for no moment.
  const moment = new Date(Date.parse(iso || ""));
  if (Number.isNaN(moment.getTime())) return "";
  const now = new Date();
  const two = (n) => String(n).padStart(2, "0");
  const clock = `${two(moment.getUTCHours())}:${two(moment.getUTCMinutes())} UTC`;
  const sameDay = moment.getUTCFullYear() === now.getUTCFullYear() && moment.getUTCMonth() === now.getUTCMonth()
    && moment.getUTCDate() === now.getUTCDate();
  if (sameDay) return clock;
  const year = moment.getUTCFullYear() === now.getUTCFullYear() ? "" : ` ${moment.getUTCFullYear()}`;
  return `${moment.getUTCDate()} ${MONTHS[moment.getUTCMonth()]}${year} ${clock}`;
}

export function timeNode(iso, attrs = {}) {
  // A <time> showing ``iso`` readably, with the exact moment in its datetime and title.
  return el("time", { ...attrs, datetime: iso || "", title: iso || undefined, text: readableTime(iso) || "—" });
}

export function uid(prefix = "f") {
  return `${prefix}-${Math.random().toString(36).slice(2)}`;
}

export function asText(value) {
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

export function keyValueTable(obj, depth = 0) {
  const table = el("table", { class: "kv-table" });
  const entries = obj && typeof obj === "object" ? Object.entries(obj) : [];
  if (!entries.length) return el("span", { class: "muted", text: "(none)" });
  for (const [key, value] of entries) {
    table.append(el("tr", {}, el("th", { text: key }), el("td", {}, valueNode(value, depth))));
  }
  return table;
}

export function age(iso) {
  const seconds = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  if (seconds < 60) return `${seconds}s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ${seconds % 60}s ago`;
  return `${Math.floor(seconds / 3600)}h ${Math.floor((seconds % 3600) / 60)}m ago`;
}

function pad(n) {
  return String(n).padStart(2, "0");
}

export function updateCountdown(node) {
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
  else text = `expires on ${readableTime(node.dataset.expires)}`;
  node.textContent = text;
  node.dataset.remaining = String(seconds);
  node.classList.toggle("urgent", seconds > 0 && seconds < URGENT_SECONDS);
  node.classList.toggle("expired", seconds <= 0);
}

export function countdown(expiresAt) {
  const deadline = Date.parse(expiresAt);
  const node = el("span", {
    class: "countdown", "data-expires": expiresAt,
    title: Number.isNaN(deadline) ? expiresAt : `expires at ${readableTime(expiresAt)} (${new Date(deadline).toISOString()})`,
  });
  updateCountdown(node);
  return node;
}

export function deadlineOf(request) {
  // A request's deadline: a ticking countdown (titled with what an escalation did), or, when its policy kept
  // it open past it, the words saying so (nothing ticks: nothing expires it any more).
  if (request.kept_open) return el("span", { class: "countdown kept-open", text: "deadline passed, kept open", title: request.deadline_note || "" });
  if (!request.expiresAt) return null;
  const node = countdown(request.expiresAt);
  if (request.deadline_note) node.title = request.deadline_note;
  return node;
}

export function refreshDeadline(scope, request) {
  // An escalation moved the deadline, or the policy kept the request open past it: show it as it is now.
  const shown = scope.querySelector(".countdown");
  const wanted = deadlineOf(request);
  if (!shown || !wanted) return;
  if (shown.dataset.expires === wanted.dataset.expires && shown.title === wanted.title) return;
  shown.replaceWith(wanted);
}

export function safeLink(url) {
  // Only http and https links are ever clickable.
  try {
    const parsed = new URL(url);
    if (parsed.protocol === "http:" || parsed.protocol === "https:") return parsed;
  } catch (e) { /* not a URL */ }
  return null;
}

export function csrfToken() {
  const match = document.cookie.match(/(?:^|; )csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

export async function startRun(body) {
  // POST /api/v1/runs as the logged-in reviewer: the new run, or an Error carrying the console's message
  // and, when the args do not fit the tool's input schema, its ``fieldErrors`` (argument -> messages).
  const response = await fetch("/api/v1/runs", {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
    body: JSON.stringify(body),
    credentials: "same-origin",
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const refusal = new Error(data.message || `The console answered ${response.status}.`);
    refusal.fieldErrors = data.field_errors || null;
    throw refusal;
  }
  return data;
}

export function isTextField(node) {
  if (!node || node.nodeType !== Node.ELEMENT_NODE) return false;
  return ["INPUT", "TEXTAREA", "SELECT"].includes(node.tagName) || node.isContentEditable;
}

export function onReachingEnd(box, action) {
  // Infinite scroll: run `action` when `box` (a list's "Load more" line) comes into view. An observer's
  // entries arrive after the layout they describe (rows drawn since may have pushed the box away), so the
  // newest entry must say "in view", and so must the layout now.
  if (typeof IntersectionObserver === "undefined") return;
  const inViewNow = () => {
    const edge = box.getBoundingClientRect();
    return !box.hidden && edge.bottom >= 0 && edge.top <= window.innerHeight; // touching counts, as for the observer
  };
  new IntersectionObserver((entries) => {
    if (entries[entries.length - 1].isIntersecting && inViewNow()) action();
  }).observe(box);
}
