// The top bar on a narrow screen: its links fold behind the Menu button (console.css hides them
// while data-menu is "closed"). Without this module the bar wraps instead, every link still shown.
// Logging out first forgets this reviewer's drafts (console/drafts.js).

import { forgetAllDrafts } from "./console/drafts.js";

const bar = document.querySelector("header.topbar");
const toggle = document.getElementById("menu-toggle");

function setMenuOpen(open) {
  bar.dataset.menu = open ? "open" : "closed";
  toggle.setAttribute("aria-expanded", String(open));
}

if (bar && toggle) {
  setMenuOpen(false);
  toggle.addEventListener("click", () => setMenuOpen(bar.dataset.menu !== "open"));
  bar.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || bar.dataset.menu !== "open") return;
    setMenuOpen(false);
    toggle.focus();
  });
}

document.querySelector("header.topbar form.logout")?.addEventListener("submit", forgetAllDrafts);
