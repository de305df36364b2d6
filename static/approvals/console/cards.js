// Request cards: one per open request, in the dashboard's order; closing them, tombstones.

import { age, deadlineOf, el, safeLink, uid } from "./dom.js";
import { page, state } from "./state.js";
import {
  describedFields, errorBox, jsonEditor, present, questionBlocks, schemaForm, showCardError, toLocalDateTime,
} from "./forms.js";
import { send } from "./socket.js";
import { notify, refreshCounts } from "./notifications.js";
import { applyPolicy, watchCard } from "./team.js";
import {
  askToApprove, askToConfirmChanges, askToDecline, askToRespond, askToWithdraw, changedFields, closePanels, openPanel,
  whyAskBeforeApproving,
} from "./confirm.js";
import { decisionOf, showExecution, tombstoneText } from "./verdict.js";
import { argumentOrder, otherData, toolCall } from "./toolcall.js";
import { keepDraft } from "./drafts.js";

// The Respond / Request changes buttons' titles: in a console run the model reads the message; a host's request
// (no run) sends it to the host, whose own model reads what the host gives it.
const RESPONSE_TITLES = {
  respond: (inRun) => (inRun ? "Reply to the model instead of running the tool."
    : "Reply instead of running the tool: the host receives your reply."),
  request_changes: (inRun) => (inRun ? "Decline, saying what the call should change."
    : "Decline, saying what the call should change: the host receives your instructions."),
};

function requestOrigin(request) {
  // A request a remote host opened through the API: which host, and whose token or login it used.
  if (!request.host && !request.opened_by) return null;
  const origin = el("span", { class: "origin" });
  if (request.host) origin.append("from ", el("strong", { class: "origin-host", text: request.host }));
  if (request.host && request.opened_by) origin.append(" · ");
  if (request.opened_by) origin.append("opened by ", el("span", { class: "opened-by", text: request.opened_by }));
  return origin;
}

function onRunPage(runId) {
  return page === "run" && document.getElementById("run-detail")?.dataset.runId === String(runId);
}

export function requestCard(request) {
  const card = el("article", { class: "card", "data-request-id": request.id, "data-kind": request.kind, tabindex: "0" });
  card.request = request;
  const header = el("header", {},
    el("span", { class: "kind", text: request.kind }),
    el("span", { class: "tool", text: request.tool || "(no tool)" }),
    // A link to its run, except on that run's own page.
    request.run && !onRunPage(request.run) ? el("a", { href: `/runs/${request.run}/`, text: `run ${request.run}` }) : null,
    requestOrigin(request),
    deadlineOf(request),
    el("time", { class: "age", "data-since": request.created_at, datetime: request.created_at, text: age(request.created_at) }),
  );
  // The call that will run comes first, whole and never folded away: what the reviewer approves.
  card.append(header, toolCall(request));
  if (request.credentials) {
    card.append(el("p", { class: "credentials", role: "note" },
      el("strong", { text: "Not collected here. " }), request.credentials));
  }
  card.append(el("p", { class: "deadline-note", role: "note", hidden: !request.deadline_note, text: request.deadline_note || "" }));
  card.append(el("p", { class: "prompt", text: request.prompt }));

  // One form per card: Enter in a field and the A key both go through its submit.
  const body = el("form", { class: "card-body", novalidate: true });
  const content = el("div", { class: "card-content" });
  const comment = request.credentials ? null : el("textarea", {
    class: "comment", rows: "2", placeholder: "Comment (optional)", "aria-label": "Comment",
  });
  // The call this card shows, as its view digested it: the console refuses the answer if the id asks for another now.
  const shownDigest = request.call_digest;
  const answer = (ok, fields = {}, changes = []) => {
    const frame = { type: "answer", request: request.id, ok, ...fields };
    if (shownDigest) frame.digest = shownDigest;
    if (comment && comment.value && frame.comment === undefined) frame.comment = comment.value;
    if (!frame.comment) delete frame.comment;
    card.sentAnswer = { ok, reason: fields.reason, response: fields.response, changes };
    send(frame, card);
  };
  const askDecline = () => {
    if (card.matches(".busy, .sent, .closed")) return;
    askToDecline(card, {
      reason: card.draftReason || (comment ? comment.value : ""), // a reason typed before (drafts.js), else the comment
      // The panel's words, or (left empty) the card's comment box: text typed there after the panel opened is sent.
      onDecline: (reason, option) => answer(false, {
        reason: "declined", ...(reason ? { comment: reason } : {}), ...(option ? { option } : {}),
      }),
    });
  };
  // Respond (approvals, inputs and questions: the reviewer answers the model instead of the tool running) and
  // request changes (approvals: declined, with what to change). Both are declines on the wire.
  const askRespond = (response) => () => {
    if (card.matches(".busy, .sent, .closed")) return;
    const draft = card.draftMessage; // kept over a reload (drafts.js), for the same kind of answer
    askToRespond(card, {
      response,
      message: draft && draft.response === response ? draft.text : "",
      onSend: (message, option) => answer(false, { reason: "declined", response, message, ...(option ? { option } : {}) }),
    });
  };
  // What the request takes, as the door decides (answers.responses_for): none for an authorization, a secret, or a
  // request asked from inside a running call (its tool is already running).
  const responses = Array.isArray(request.responses) ? request.responses : [];
  const data = request.data && typeof request.data === "object" ? request.data : null;
  let primary = null; // { label, run }
  const drawn = []; // keys of ``data`` the card draws itself (as a form, questions): not listed as other data
  if (data && Array.isArray(data.reject_options)) drawn.push("reject_options"); // offered when declining (confirm.js)

  if (request.credentials) {
    // No inputs at all: the console never collects a secret. Decline or cancel only (the note names the field).
    drawn.push("schema");
  } else if (request.kind === "input" && request.form === undefined && data && data.schema) {
    // A server that does not describe forms yet: build from the schema, send typed data.
    const fields = el("div", { class: "schema-form" });
    drawn.push("schema");
    const read = schemaForm(data.schema, fields);
    content.append(fields);
    primary = { label: "Submit", run: () => { const value = read(); if (value !== undefined) answer(true, { data: value }); } };
  } else if (request.kind === "input" && request.form && request.form.renderable) {
    const fields = el("div", { class: "schema-form" });
    drawn.push("schema");
    const read = describedFields(request.form.fields, fields);
    content.append(fields);
    primary = { label: "Submit", run: () => answer(true, { form: read() }) };
  } else if (request.kind === "approval") {
    const editable = Boolean(request.form && request.form.renderable);
    if (editable) {
      // The keys that describe the editable args are drawn as the form below, not listed.
      drawn.push("editable");
      if (data && data.args && typeof data.args === "object" && data.args.schema) drawn.push("args");
    }
    let read = null;
    if (editable) {
      const fields = el("div", { class: "schema-form editable" }, el("p", { class: "muted", text: "You may change these before approving:" }));
      read = describedFields(request.form.fields, fields);
      content.append(fields);
    } else if (request.form && request.form.reason) {
      content.append(el("p", { class: "warning", text: request.form.reason }));
    }
    primary = {
      label: "Approve",
      run: ({ byKey = false } = {}) => {
        // Edited arguments are shown as a diff and sent only after a second yes.
        // Against the request as it is now: under a quorum the first approver's values are its defaults.
        const values = read ? read() : null;
        const changes = read ? changedFields((card.request.form || request.form).fields, values) : [];
        if (changes.length) {
          askToConfirmChanges(card, changes, { onConfirm: () => answer(true, { form: read() }, changes) });
          return;
        }
        const sent = () => (read ? { form: read() } : {});
        // As asked, it goes at once unless the policy, a clamped value or (for A) a call off screen asks first.
        const why = whyAskBeforeApproving(card, { byKey });
        if (!why) return answer(true, sent());
        askToApprove(card, {
          tool: request.tool, args: { ...(card.request.args || {}), ...(values || {}) }, order: argumentOrder(card.request), why,
          onConfirm: () => answer(true, sent()),
        });
      },
    };
  } else if (request.kind === "question" && data && Array.isArray(data.questions)) {
    drawn.push("questions");
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
    if (data && request.kind === "input" && data.schema !== undefined) {
      drawn.push("schema");
      content.append(el("details", { class: "schema" }, el("summary", { text: "Schema of the expected reply" }),
        el("pre", { text: JSON.stringify(data.schema, null, 2) })));
    }
    const read = jsonEditor(content);
    primary = {
      label: "Approve",
      run: () => { const value = read(); if (value !== undefined) answer(true, { data: value }); },
    };
  }
  // What else the tool sent, labelled and apart from the call; before the fields the reviewer fills in.
  const rest = otherData(request.data, { args: request.args || {}, omit: drawn });
  if (rest) content.prepend(rest);
  if (!content.querySelector('.field-error[data-field="__all__"]')) content.append(errorBox("__all__"));

  const actions = el("div", { class: "actions" });
  if (primary) actions.append(el("button", { type: "submit", class: "primary", text: primary.label }));
  actions.append(
    el("button", { type: "button", class: "danger", text: "Decline", onclick: askDecline }),
    ...responses.map((response) => el("button", {
      type: "button", class: `secondary ${response.replace("_", "-")}`, onclick: askRespond(response),
      text: response === "respond" ? "Respond" : "Request changes",
      title: RESPONSE_TITLES[response](Boolean(request.run)),
    })),
    el("button", {
      type: "button", class: "secondary cancel-request", text: "Withdraw request",
      title: "Withdraw this request: the tool is told it was cancelled, not declined.",
      onclick: () => {
        if (!card.matches(".busy, .sent, .closed")) askToWithdraw(card, { onWithdraw: () => answer(false, { reason: "cancelled" }) });
      },
    }),
  );
  let byKey = false; // the submit comes from the A key, not the button or Enter in a field
  body.addEventListener("submit", (event) => {
    event.preventDefault();
    // While a question is open in the card (a decline's reason, a diff to confirm), Enter answers that, not this.
    if (primary && !openPanel(card) && !card.matches(".busy, .sent, .closed")) primary.run({ byKey });
  });
  // Typing marks the card: a tombstone keeps what was typed; a change made after an approval was asked about
  // asks again.
  body.addEventListener("input", (event) => {
    card.touched = true;
    if (event.target.closest(".confirm-panel")) return; // a decline's reason is not an edit
    if (openPanel(card)?.classList.contains("approve-panel")) closePanels(card, { refocus: false });
  });
  body.append(content);
  if (comment) body.append(comment);
  body.append(el("p", { class: "card-error error", role: "alert" }), actions);
  card.append(body);

  card.approveByKey = () => {
    byKey = true;
    try { body.requestSubmit(); } finally { byKey = false; }
  };
  card.cannotApprove = primary ? null : "This request can only be declined or cancelled.";
  card.declineByKey = askDecline;
  applyPolicy(card, request);
  keepDraft(card, request); // what this reviewer typed before a reload comes back, and is kept as they type
  return card;
}

export function tombstone(card, message, request = null) {
  // The request closed while this reviewer had it open: say so where they looked, and keep what they
  // typed in place (read-only, selectable, with a Copy button) so nothing written is lost. ``request``,
  // when known, colours it by its outcome (an approval reads as approved, not as a failure).
  card.classList.add("closed");
  const outcome = decisionOf(request)?.outcome;
  if (outcome) card.dataset.outcome = outcome;
  card.classList.remove("busy");
  closePanels(card, { refocus: false });
  const body = card.querySelector(".card-body");
  if (body && card.touched) {
    body.classList.add("kept");
    body.querySelector(".actions")?.remove();
    body.querySelector(".card-error")?.remove();
    for (const field of body.querySelectorAll("input, textarea, select")) {
      if (field.matches("textarea, input[type=text], input[type=email], input[type=url], input[type=number], input:not([type])")) field.readOnly = true;
      else field.disabled = true;
    }
  } else {
    body?.remove();
  }
  card.querySelector(".countdown")?.remove();
  card.querySelector(".deadline-note")?.remove();
  const buttons = el("div", { class: "tombstone-buttons" });
  if (body && card.touched) {
    buttons.append(el("button", { type: "button", class: "small copy-kept", text: "Copy what you typed", onclick: (event) => copyTyped(card, event.currentTarget) }));
  }
  buttons.append(el("button", { type: "button", class: "small dismiss", text: "Dismiss", onclick: () => { card.dismiss ? card.dismiss() : card.remove(); refreshCounts(); } }));
  card.querySelector(".tombstone")?.remove();
  card.querySelector("header").after(el("div", { class: "tombstone", "data-outcome": outcome },
    el("p", { class: "card-error error", role: "alert", text: message }),
    body && card.touched ? el("p", { class: "muted kept-note", text: "Nothing was sent. What you typed is kept below." }) : null,
    buttons));
  showCardExecution(card, request);
  refreshCounts();
}

export function showCardExecution(card, request) {
  // A closed card says what became of the approved call's tool, and keeps saying it as that changes.
  const box = card.querySelector(".tombstone");
  if (box && request) showExecution(box, request, { before: box.querySelector(".tombstone-buttons") });
}

export function typedText(card) {
  // What the reviewer typed in a card, one "label: value" line per filled field: for the clipboard.
  const lines = [];
  for (const field of card.querySelectorAll(".card-body textarea, .card-body input")) {
    if (field.type === "checkbox" || field.type === "radio" || field.type === "hidden" || !field.value) continue;
    if (field.value === field.defaultValue && !field.matches("textarea")) continue;
    const label = field.getAttribute("aria-label") || field.name || field.closest(".field")?.querySelector("label")?.textContent || "text";
    lines.push(`${label}: ${field.value}`);
  }
  return lines.join("\n");
}

async function copyTyped(card, button) {
  const text = typedText(card);
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch (e) {
    // No clipboard (an insecure origin, a refused permission): select the text for the reviewer to copy.
    const first = card.querySelector(".card-body textarea, .card-body input[type=text]");
    first?.select();
    button.textContent = "Selected: press Ctrl+C";
  }
}

export function closedMessage(request) {
  // "No longer open: Declined by bob: too large · 18:31".
  const words = request && request.status && request.status !== "resolved" ? tombstoneText(request) : "";
  return words ? `No longer open: ${words}` : "This request is no longer open.";
}

export function closeCard(card, request) {
  if (card.classList.contains("closed")) return showCardExecution(card, request);
  if (card.inFlight) {
    // Our own answer is on its way: wait for the console's reply before removing the card.
    card.closedRequest = request || { status: "resolved" };
  } else if (card.classList.contains("sent")) {
    card.remove(); // our own answer, confirmed before this event came
    refreshCounts();
  } else if (card.refusal) {
    tombstone(card, card.refusal);
  } else {
    // Someone else answered it, or it expired: the card stays as a tombstone that says who and when.
    // The list keeps the focus, not the card below, so a key pressed a moment later answers nothing.
    if (card.contains(document.activeElement)) card.parentElement?.focus({ preventScroll: true });
    tombstone(card, closedMessage(request), request);
  }
}

export function upsertRequest(request) {
  const list = document.getElementById("requests");
  if (!list) {
    document.dispatchEvent(new CustomEvent("console:request", { detail: request })); // a decided request's page
    return null;
  }
  const existing = list.querySelector(`[data-request-id="${CSS.escape(request.id)}"]`);
  let added = null;
  if (request.status !== "open") {
    if (existing) closeCard(existing, request);
    state.requests.delete(request.id);
  } else if (!existing) {
    if (page === "run" && String(request.run) !== document.getElementById("run-detail").dataset.runId) return null;
    if (page === "request" && String(request.id) !== document.getElementById("request-detail").dataset.requestId) return null;
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
    existing.request = request;
    applyPolicy(existing, request);
    showFirstApproval(existing, request);
    state.requests.set(request.id, request);
  }
  refreshCounts();
  document.dispatchEvent(new CustomEvent("console:request", { detail: request })); // the request's page follows it
  return added;
}

export function showFirstApproval(card, request) {
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

export function requestKey(request) {
  // The dashboard's order, as the server pages it: created_at to the microsecond, then id.
  const match = /^(.{19})(?:\.(\d{1,6}))?/.exec(request.created_at || "");
  const micros = match ? Date.parse(`${match[1]}Z`) * 1000 + Number((match[2] || "").padEnd(6, "0")) : 0;
  return [micros, String(request.id)];
}

export function compareKeys(a, b) {
  return a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0);
}
