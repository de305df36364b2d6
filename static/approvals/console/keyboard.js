// The keyboard: A approves and D declines the focused card while it is in view.

import { isTextField } from "./dom.js";
import { showCardError } from "./forms.js";

function inView(card) {
  // True when the reviewer can read what the card asks: its prompt is on screen (all of it,
  // or at least half the window's height of a longer one). A hidden card is never in view.
  const box = (card.querySelector(".prompt") || card).getBoundingClientRect();
  if (!box.width || !box.height) return false;
  const shown = Math.min(box.bottom, window.innerHeight) - Math.max(box.top, 0);
  return shown >= Math.min(box.height, window.innerHeight / 2);
}

export function focusNextInView(card) {
  // After an answer, the keyboard goes on with the next answerable card in view (after this
  // one, else before it), or with the list itself: never <body>, never a card off screen.
  const list = card.parentElement;
  if (!list) return;
  const cards = [...list.querySelectorAll(":scope > article.card")];
  const at = cards.indexOf(card);
  const next = [...cards.slice(at + 1), ...cards.slice(0, at).reverse()]
    .find((other) => !other.matches(".busy, .sent, .closed, .read-only") && inView(other));
  (next || list).focus({ preventScroll: true });
}

export function onKey(event) {
  if (event.ctrlKey || event.metaKey || event.altKey || event.repeat || event.isComposing) return;
  const key = (event.key || "").toLowerCase();
  if (key !== "a" && key !== "d") return;
  const active = document.activeElement;
  if (!active || isTextField(active) || !active.closest) return;
  // Only a card the reviewer focused or clicked: an arriving request never takes focus.
  const card = active.closest("#requests article.card");
  if (!card || card.matches(".busy, .sent, .closed")) return;
  event.preventDefault();
  if (!inView(card)) {
    // Never answer what the reviewer cannot see: show it, and let them press again once read.
    card.scrollIntoView({ block: "nearest" });
    showCardError(card, `Nothing was sent: this request was out of view. Read it, then press ${key.toUpperCase()} again.`);
    return;
  }
  // A card I may only decline (my own under four-eyes) still declines with D; A says why not.
  const mayOnlyDecline = key === "d" && card.classList.contains("may-decline");
  if (card.whyNot && !mayOnlyDecline) { showCardError(card, card.whyNot); return; }
  if (key === "a") {
    card.approveByKey();
  } else {
    const prompt = card.querySelector(".prompt")?.textContent || "";
    if (window.confirm(`Decline this request?\n\n${prompt}`)) card.declineByKey();
  }
}
