// The console socket (sync.js opens it) and sending a card's frame on it.

import { state } from "./state.js";
import { setBusy, showCardError, showFieldErrors } from "./forms.js";

export let socket = null;

export function setSocket(opened) {
  socket = opened;
}

export function send(frame, card) {
  if (!socket || socket.readyState !== WebSocket.OPEN) {
    showCardError(card, "Not connected to the console; reconnecting. Your input is kept: try again in a moment.");
    return;
  }
  const ref = String(state.nextRef++);
  state.pending.set(ref, card);
  card.inFlight = ref;
  const box = card.querySelector(".card-error");
  if (box) box.textContent = "";
  if (card.matches("article.card")) showFieldErrors(card, {});
  setBusy(card, true);
  socket.send(JSON.stringify({ ...frame, ref }));
}
