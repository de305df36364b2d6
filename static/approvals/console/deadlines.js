// A card's deadline as the last event left it: the countdown follows expiresAt (an extension or an escalation
// moves it on every open page through the event frame; a policy that keeps it open past it says so), a note says
// what the passed deadline did, a policy's reminder marks it, and whoever may answer gets
// "Extend +1 h" while the cap leaves room (review/deadlines.py). The database says what the deadline is;
// the button only asks, and the event that follows redraws the card here and everywhere else.

import { deadlineOf, el } from "./dom.js";
import { setBusy } from "./forms.js";
import { send } from "./socket.js";

export function stepText(minutes) {
  // "+1 h", "+30 min", "+1 h 30 min".
  const hours = Math.floor(minutes / 60);
  const rest = minutes % 60;
  return `+${hours ? `${hours} h` : ""}${hours && rest ? " " : ""}${rest ? `${rest} min` : ""}`;
}

function showClock(card, request) {
  // The deadline as the request says it is now: a countdown (moved by an extension or an escalation, titled
  // with what the escalation did) or, when its policy kept it open past it, the words saying so.
  const header = card.querySelector("header");
  const clock = header?.querySelector(".countdown");
  const wanted = deadlineOf(request);
  if (!header || !wanted) return clock;
  if (!clock) {
    header.querySelector(".age")?.before(wanted);
    return wanted;
  }
  const same = clock.dataset.expires === wanted.dataset.expires && clock.title === wanted.title
    && clock.classList.contains("kept-open") === wanted.classList.contains("kept-open");
  if (same) return clock;
  clock.replaceWith(wanted);
  return wanted;
}

function showNote(card, request) {
  // What its passed deadline did, in words ("Escalated to bob until 15:17 UTC"), while it stays open.
  const note = card.querySelector(".deadline-note");
  if (!note) return;
  note.textContent = request.deadline_note || "";
  note.hidden = !request.deadline_note;
}

export function applyDeadline(card, request) {
  if (!request || card.classList.contains("closed")) return;
  const facts = request.deadline || null;
  const clock = showClock(card, request);
  showNote(card, request);
  const reminded = Boolean(facts && facts.reminded);
  clock?.classList.toggle("reminded", reminded);
  let mark = card.querySelector(".reminder-mark");
  if (reminded && !mark && clock) {
    mark = el("span", { class: "reminder-mark", text: "reminder sent", title: "Its policy reminded the answerers that the deadline is near." });
    clock.after(mark);
  } else if (!reminded && mark) {
    mark.remove();
  }
  const actions = card.querySelector(".card-body .actions");
  let button = card.querySelector("button.extend");
  const minutes = facts ? Math.min(facts.step_minutes, facts.room_minutes) : 0;
  const may = request.status === "open" && Boolean(request.policy && request.policy.may_extend) && minutes > 0;
  if (!may || !actions) {
    button?.remove();
    return;
  }
  if (!button) {
    button = el("button", { type: "button", class: "secondary extend" });
    // One press, one request: the card is busy until the console replies, so a double click sends once.
    button.addEventListener("click", () => {
      if (card.matches(".busy, .sent, .closed")) return;
      send({ type: "extend", request: card.request.id, minutes: Number(button.dataset.minutes) }, card);
    });
    actions.append(button);
  }
  button.dataset.minutes = String(minutes);
  button.textContent = `Extend ${stepText(minutes)}`;
  button.title = `Move the deadline ${stepText(minutes).slice(1)} later (${facts.room_minutes} min of extensions left).`;
}

export function extendedHere(card) {
  // The console moved the deadline; its event (which may come before or after this reply) redraws the card.
  card.inFlight = null;
  setBusy(card, false);
  const box = card.querySelector(".card-error");
  if (box) box.textContent = "";
}
