// toolnexus console, a request's own page: times in the reader's own clock (the server writes ISO 8601).

for (const node of document.querySelectorAll("time[datetime]")) {
  const moment = Date.parse(node.getAttribute("datetime") || "");
  if (!Number.isNaN(moment)) node.textContent = new Date(moment).toLocaleString();
}
