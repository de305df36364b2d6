// Toasts: a short line that says what the reviewer's own action did ("Approved · Refund 40 EUR…"),
// read out by screen readers, gone after a while or when closed. Never a place for a question.

import { el } from "./dom.js";

const SHOWN_MS = 6000;
const MOST_AT_ONCE = 3;

let dockFollowed = false;

function followDock(box) {
  if (dockFollowed || !window.ResizeObserver) return;
  dockFollowed = true;
  const root = document.documentElement;
  new ResizeObserver(() => root.style.setProperty("--toast-dock-height", `${box.offsetHeight}px`)).observe(box);
}

export function toast(text, { kind = "ok", link = null } = {}) {
  const box = document.getElementById("toasts");
  if (!box) return null;
  const item = el("div", { class: `toast toast-${kind}` },
    el("span", { class: "toast-text", text }),
    link ? el("a", { href: link.href, text: link.text }) : null,
    el("button", { type: "button", class: "toast-close", "aria-label": "Close", text: "×", onclick: () => item.remove() }));
  if (box.classList.contains("toast-dock")) {
    // The dashboard's toasts have a place of their own at the top, in the flow: the page moves down under a new
    // one (the browser's scroll anchoring would keep it still and slide the sticky bar over it) and stays put
    // when it goes. The sticky bar and the picked card stop under it (--toast-dock-height).
    followDock(box);
    const root = document.documentElement;
    root.style.overflowAnchor = "none";
    requestAnimationFrame(() => requestAnimationFrame(() => { root.style.overflowAnchor = ""; }));
  }
  box.append(item);
  while (box.children.length > MOST_AT_ONCE) box.firstElementChild.remove();
  setTimeout(() => item.remove(), SHOWN_MS);
  return item;
}
