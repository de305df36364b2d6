// The keyboard. On the dashboard J/K (and ↓/↑ in the list) move through the queue; A approves or submits
// the picked request (at once only when nothing asks for a confirmation first), D asks why and declines
// it, E goes to its fields, C to its comment, X checks it for a bulk answer, ? lists the keys. On the run
// page A and D act on the focused card. Keys act only on a request the reviewer picked (a row they
// clicked, tabbed or moved to, or a card they focused), never on one that just arrived, and A and D only
// while what they answer is on screen.

import { isTextField } from "./dom.js";
import { showCardError } from "./forms.js";
import { page, state } from "./state.js";
import { openPanel } from "./confirm.js";
import { cardFor, nextOpenRow, selectRequest, selectedRow } from "./detail.js";
import { checkRows, loadMore } from "./inbox.js";
import { toast } from "./toasts.js";

function onScreen(node, whole = false) {
  const box = node.getBoundingClientRect();
  if (!box.width || !box.height) return false;
  if (whole) return box.top >= 0 && box.bottom <= window.innerHeight;
  const shown = Math.min(box.bottom, window.innerHeight) - Math.max(box.top, 0);
  return shown >= Math.min(box.height, window.innerHeight / 2);
}

function inView(card) {
  // The reviewer can read what they answer: the card's prompt is on screen (all of it, or half the window
  // of a longer one), or, on the dashboard, the sticky bar that names the picked request is.
  if (onScreen(card.querySelector(".prompt") || card)) return true;
  const bar = document.getElementById("focus-bar");
  return Boolean(bar && bar.dataset.requestId === card.dataset.requestId && onScreen(bar, true));
}

export function focusNextInView(card) {
  // The run page: after an answer, the keyboard goes on with the next answerable card in view (after this
  // one, else before it), or with the list itself: never <body>, never a card off screen.
  const list = card.parentElement;
  if (!list) return;
  const cards = [...list.querySelectorAll(":scope > article.card")];
  const at = cards.indexOf(card);
  const next = [...cards.slice(at + 1), ...cards.slice(0, at).reverse()]
    .find((other) => !other.matches(".busy, .sent, .closed, .read-only") && onScreen(other.querySelector(".prompt") || other));
  (next || list).focus({ preventScroll: true });
}

function pickedCard(active) {
  // The card a key may act on, or null.
  if (!active || !active.closest) return null;
  if (page !== "dashboard") return active.closest("#requests article.card");
  const id = state.inbox.selected;
  if (id === null) return null;
  const row = active.closest("#requests > .row");
  const card = active.closest("#request-detail article.card");
  // Focus must rest on the picked row or inside its card: the list itself, or another row, is no pick.
  if (row) return row.dataset.requestId === id ? cardFor(id) : null;
  if (card) return card.dataset.requestId === id ? card : null;
  return null;
}

function bringIntoView(card) {
  selectedRow()?.scrollIntoView({ block: "nearest" });
  if (!inView(card)) card.scrollIntoView({ block: "nearest" });
}

function editFields(card) {
  const field = card.querySelector(".card-content input:not([type=hidden]):not([disabled]), .card-content select, .card-content textarea");
  if (field && !field.closest("[hidden]")) { field.focus(); field.scrollIntoView({ block: "nearest" }); return; }
  showCardError(card, "Nothing to edit here: this request has no fields you may change. A approves it, D declines it.");
}

function focusComment(card) {
  const comment = card.querySelector("textarea.comment");
  if (comment && comment.offsetParent !== null) { comment.focus(); comment.scrollIntoView({ block: "nearest" }); return; }
  showCardError(card, "This request takes no comment from you.");
}

function refuseKey(card, why) {
  // A key that does nothing says why: in the card, and in the toast area where the eye goes after a key.
  showCardError(card, why);
  toast(`Nothing was sent: ${why}`, { kind: "warn" });
}

function actOn(card, key) {
  if (card.classList.contains("closed")) {
    toast("Nothing was sent: this request is no longer open.", { kind: "warn" });
    return;
  }
  if (card.matches(".busy, .sent")) return;
  if (key === "e") return editFields(card);
  if (key === "c") return focusComment(card);
  if (!inView(card)) {
    // Never answer what the reviewer cannot see: show it, and let them press again once read.
    bringIntoView(card);
    showCardError(card, `Nothing was sent: this request was out of view. Read it, then press ${key.toUpperCase()} again.`);
    return;
  }
  // A card I may only decline (my own under four-eyes) still declines with D; A says why not.
  const mayOnlyDecline = key === "d" && card.classList.contains("may-decline");
  if (card.whyNot && !mayOnlyDecline) { refuseKey(card, card.whyNot); return; }
  const panel = openPanel(card);
  if (key === "a") {
    // In an approval's question, A is the second yes (once it has armed); otherwise it approves at once only
    // what needs no question (cards.js, confirm.js whyAskBeforeApproving) and asks the button's question else.
    if (panel && panel.classList.contains("approve-panel")) card.confirmApproval?.();
    else if (!panel && card.cannotApprove) refuseKey(card, card.cannotApprove);
    else if (!panel) card.approveByKey();
  } else if (panel && panel.classList.contains("decline-panel")) {
    panel.querySelector(".decline-reason")?.focus();
  } else {
    card.declineByKey();
  }
}

function onInboxKey(event, active) {
  // J/K and the arrows move the pick; X checks it for a bulk answer. True when the key was used.
  const key = event.key;
  const inList = Boolean(active && active.closest && active.closest("#requests"));
  const step = key === "j" || key === "J" || (key === "ArrowDown" && inList) ? 1
    : key === "k" || key === "K" || (key === "ArrowUp" && inList) ? -1 : 0;
  if (step) {
    event.preventDefault();
    const to = nextOpenRow(selectedRow(), step);
    if (to) selectRequest(to.dataset.requestId, { focus: true });
    else if (step > 0) loadMore();
    return true;
  }
  if ((key === "x" || key === "X") && !event.repeat) {
    const row = selectedRow();
    if (row && pickedCard(active)) {
      event.preventDefault();
      checkRows([row], !row.querySelector(".row-select").checked);
    }
    return true;
  }
  if (key === "Escape" && active && active.closest && active.closest("#request-detail")) {
    selectedRow()?.focus(); // out of the card, back to its row
    return true;
  }
  return false;
}

export function toggleKeyHelp() {
  const dialog = document.getElementById("key-help");
  if (!dialog) return;
  if (dialog.open) dialog.close();
  else dialog.showModal();
}

export function onKey(event) {
  if (event.ctrlKey || event.metaKey || event.altKey || event.isComposing) return;
  const active = document.activeElement;
  if (active && isTextField(active)) {
    // Typing in a field is typing, not a shortcut; Esc leaves the field for its card, where the keys work.
    const card = event.key === "Escape" && page === "dashboard" && active.closest("#request-detail article.card");
    if (card) { event.preventDefault(); card.focus(); }
    return;
  }
  if (event.key === "?") {
    event.preventDefault();
    toggleKeyHelp();
    return;
  }
  if (document.querySelector("dialog[open]")) return; // no key acts behind the key list
  if (page === "dashboard" && onInboxKey(event, active)) return;
  if (event.repeat) return;
  const key = (event.key || "").toLowerCase();
  if (!["a", "d", "e", "c"].includes(key)) return;
  if (page !== "dashboard" && (key === "e" || key === "c")) return;
  const card = pickedCard(active);
  if (!card) return;
  event.preventDefault();
  actOn(card, key);
}
