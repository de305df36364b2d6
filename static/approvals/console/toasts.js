// Toasts: a short line that says what the reviewer's own action did ("Approved · Refund 40 EUR…"),
// read out by screen readers, gone after a while or when closed. Never a place for a question.

import { el } from "./dom.js";

const SHOWN_MS = 6000;
const MOST_AT_ONCE = 3;

export function toast(text, { kind = "ok", link = null } = {}) {
  const box = document.getElementById("toasts");
  if (!box) return null;
  const item = el("div", { class: `toast toast-${kind}` },
    el("span", { class: "toast-text", text }),
    link ? el("a", { href: link.href, text: link.text }) : null,
    el("button", { type: "button", class: "toast-close", "aria-label": "Close", text: "×", onclick: () => item.remove() }));
  box.append(item);
  while (box.children.length > MOST_AT_ONCE) box.firstElementChild.remove();
  setTimeout(() => item.remove(), SHOWN_MS);
  return item;
}
