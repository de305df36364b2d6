// The inbox's view as the URL holds it (/?q=..&kind=..&sort=..&group=..&request=<id>): read, written back,
// turned into GET /api/v1/requests parameters, and a browser-side guess of whether a new request matches.

// The filters of the inbox contract, in the order the URL writes them.
export const FILTERS = ["q", "status", "kind", "tool", "host", "policy", "starter", "assigned", "may_answer", "expiring"];
export const SORTS = ["oldest", "newest", "deadline"];
export const GROUPS = ["run", "alike"];
export const EXPIRING_SECONDS = 3600; // "expiring soon": the deadline is within the next hour

export function readQuery(search = location.search) {
  // The view in the address bar: unknown parameters are ignored, repeated kinds are joined.
  const params = new URLSearchParams(search);
  const query = {};
  for (const name of FILTERS) {
    const values = params.getAll(name).map((value) => value.trim()).filter(Boolean);
    if (values.length) query[name] = values.join(",");
  }
  const sort = params.get("sort");
  if (sort && sort !== "oldest") query.sort = sort;
  const group = params.get("group");
  if (group) query.group = group;
  const request = params.get("request");
  if (request) query.request = request;
  return query;
}

export function queryString(query, { withRequest = true } = {}) {
  const params = new URLSearchParams();
  for (const name of [...FILTERS, "sort", "group"]) {
    if (query[name]) params.set(name, query[name]);
  }
  if (withRequest && query.request) params.set("request", query.request);
  const text = params.toString();
  return text ? `?${text}` : "";
}

export function writeQuery(query) {
  // The address bar follows the view without a new history entry per keystroke.
  const url = `${location.pathname}${queryString(query)}${location.hash}`;
  if (url !== `${location.pathname}${location.search}${location.hash}`) history.replaceState(history.state, "", url);
}

export function filtersOf(query) {
  // The part of the view that decides which requests are listed (not their order, grouping or selection).
  return Object.fromEntries(FILTERS.filter((name) => query[name]).map((name) => [name, query[name]]));
}

export function isFiltered(query) {
  return Object.keys(filtersOf(query)).length > 0;
}

export function isPlainQueue(query) {
  // The console's own queue (every open request, oldest first, one row each): what the socket's
  // snapshot pages, so the first view needs no second request and new requests join at the end.
  return !isFiltered(query) && !query.group && (!query.sort || query.sort === "oldest");
}

export function apiPath(query, { after = null, limit = 50 } = {}) {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(filtersOf(query))) params.set(name, value);
  if (!query.status) params.set("status", "open");
  if (query.sort) params.set("sort", query.sort);
  if (query.group) params.set("group", query.group);
  params.set("limit", String(limit));
  if (after) params.set("after", after);
  return `/api/v1/requests?${params}`;
}

function same(a, b) {
  return String(a ?? "").toLowerCase() === String(b ?? "").toLowerCase();
}

export function requesterOf(request) {
  return request.requester || request.opened_by || null;
}

export function starterOf(request) {
  return request.starter || (request.policy && request.policy.starter) || null;
}

export function matchesQuery(request, query, now = Date.now()) {
  // Whether a request that just opened belongs in this view, judged in the browser from its view alone.
  // A guess for "N new — show": showing them reads the list again from the server, which decides.
  const status = query.status || "open";
  if (status !== "all" && status !== (request.status === "open" ? "open" : "resolved")) return false;
  if (query.kind && !query.kind.split(",").some((kind) => same(kind, request.kind))) return false;
  if (query.tool && !same(query.tool, request.tool)) return false;
  if (query.host && !same(query.host, request.host)) return false;
  if (query.policy && !same(query.policy, request.policy && request.policy.name)) return false;
  if (query.starter && !same(query.starter, starterOf(request))) return false;
  const policy = request.policy || {};
  if (query.assigned && !policy.assigned_to_me) return false;
  if (query.may_answer && policy.may_answer === false) return false;
  if (query.expiring) {
    const deadline = Date.parse(request.expiresAt || "");
    if (Number.isNaN(deadline) || deadline - now > EXPIRING_SECONDS * 1000) return false;
  }
  if (query.q) {
    const text = [request.prompt, request.tool, JSON.stringify(request.args ?? {}), request.host, requesterOf(request)]
      .map((part) => String(part ?? "").toLowerCase()).join("\n");
    if (!text.includes(query.q.toLowerCase())) return false;
  }
  return true;
}

export function describeFilters(query) {
  // "kind approval · tool refund · “A-20”": what narrows the list, in words, for the bulk confirmation.
  const parts = [];
  for (const [name, value] of Object.entries(filtersOf(query))) {
    if (name === "q") parts.push(`“${value}”`);
    else if (name === "assigned") parts.push("assigned to me");
    else if (name === "may_answer") parts.push("I may answer");
    else if (name === "expiring") parts.push("expiring within an hour");
    else parts.push(`${name} ${value}`);
  }
  return parts.join(" · ");
}
