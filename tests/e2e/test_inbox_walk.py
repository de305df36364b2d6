"""What a new reviewer's walk through the inbox found (issue 28): each is said once, and truly.

A group of alike requests names every host it came from, and a group of one is just a row; "also here"
leaves a request once it is answered; a toast never covers the search box or any control; on a phone the
sticky bar stays within 120 of 844 px and the prompt is on screen once; an empty dashboard says each
thing once. At 1440x900 and at 390x844 (a touch screen), in Chromium against a real daphne.
"""

import re

import pytest
from playwright.sync_api import expect

from tests.support.console_page import EVENT_TIMEOUT_MS, Tab, api_post, host_row, pick

from .conftest import ARTIFACTS, CREATE_USERS, LAPTOP, PASSWORD, PHONE, USERS, login, serve_console

SIZES = {"laptop": LAPTOP, "phone": PHONE}
BAR_MOST_PX = 120  # the phone's sticky bar, of 844

# Every control a reviewer can press or type in.
CONTROLS = "button, input:not([type=hidden]), select, textarea, a[href], summary, [role=button]"

# The controls a toast covers: ones it overlaps that would be seen there without it. A control scrolled under
# the stuck sticky bar (and the toasts stuck above it) is hidden by that bar whether a toast shows or not.
COVERED_JS = """([toastSelector, controls]) => {
  const toasts = [...document.querySelectorAll(toastSelector)].filter((t) => t.getClientRects().length);
  if (!toasts.length) return {toasts: 0, covered: []};
  const boxes = toasts.map((t) => t.getBoundingClientRect());
  const dock = document.getElementById("toasts");
  const bar = document.getElementById("focus-bar");
  const barBox = bar.checkVisibility() ? bar.getBoundingClientRect() : null;
  const stuck = barBox && scrollY > 0 && barBox.top <= Math.max(dock.getBoundingClientRect().bottom, 0) + 1;
  const under = stuck ? barBox.bottom : 0;
  dock.style.visibility = "hidden";
  const covered = [];
  try {
    for (const control of document.querySelectorAll(controls)) {
      if (dock.contains(control) || !control.checkVisibility({visibilityProperty: true})) continue;
      const r = control.getBoundingClientRect();
      if (!r.width || !r.height || r.bottom <= 0 || r.top >= innerHeight || r.right <= 0 || r.left >= innerWidth) continue;
      if (r.bottom <= under && !bar.contains(control)) continue;  // scrolled under the stuck bar
      for (const b of boxes) {
        const left = Math.max(r.left, b.left), right = Math.min(r.right, b.right);
        const top = Math.max(r.top, b.top), bottom = Math.min(r.bottom, b.bottom);
        if (right - left < 1 || bottom - top < 1) continue;
        const hit = document.elementFromPoint((left + right) / 2, (top + bottom) / 2);
        if (hit && (control === hit || control.contains(hit) || hit.contains(control))) {
          covered.push(`${control.tagName.toLowerCase()}#${control.id}.${control.className} "${(control.textContent || control.placeholder || "").trim().slice(0, 30)}"`);
        }
      }
    }
  } finally {
    dock.style.visibility = "";
  }
  return {toasts: toasts.length, covered};
}"""

# How many times `text` can be read on screen: its text nodes' boxes inside the viewport, on top there.
SHOWN_TIMES_JS = """(text) => {
  let times = 0;
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.textContent.includes(text)) continue;
    const parent = node.parentElement;
    if (!parent.checkVisibility({visibilityProperty: true, opacityProperty: true})) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    const seen = [...range.getClientRects()].some((r) => {
      if (r.width < 1 || r.height < 1 || r.bottom <= 0 || r.top >= innerHeight) return false;
      const y = Math.min(Math.max((r.top + r.bottom) / 2, 0), innerHeight - 1);
      const hit = document.elementFromPoint(Math.min(r.left + 4, innerWidth - 1), y);
      return hit && (hit === parent || parent.contains(hit));
    });
    if (seen) times += 1;
  }
  return times;
}"""


@pytest.fixture
def screen(browser, console_server, login_states):
    """``screen("alice", "phone")``: a signed-in dashboard at 1440x900, or 390x844 on a touch screen."""
    contexts, tabs = [], []

    def open_as(username="alice", size="laptop", path="/"):
        phone = size == "phone"
        context = browser.new_context(
            viewport=SIZES[size], storage_state=login_states[username], is_mobile=phone, has_touch=phone
        )
        contexts.append(context)
        tab = Tab(context.new_page())
        tabs.append(tab)
        tab.page.goto(f"{console_server.base_url}{path}")
        expect(tab.page.locator("#conn-status")).to_have_attribute("data-state", "live")
        return tab

    yield open_as
    for context in contexts:
        context.close()
    assert [error for tab in tabs for error in tab.errors] == []


def shoot(page, name):
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"walk-{name}.png"))


def opened(tab, server, request_id, **fields):
    body = {"id": request_id, "kind": "approval", "prompt": f"Approve {request_id}?", **fields}
    response = api_post(tab.page.context, server, "requests", body)
    assert response.status == 201, response.text()


def withdraw_all(context, server, ids):
    for request_id in ids:
        api_post(context, server, f"requests/{request_id}/cancel", {})


# -- grouping by identical tool and arguments ---------------------------------------------------------


@pytest.mark.parametrize("size", ["laptop", "phone"])
def test_a_group_of_alike_requests_names_every_host_and_a_group_of_one_has_no_count(screen, console_server, size):
    tab = screen("alice", size)
    page = tab.page
    tool = f"rotate-{size}"
    ids = [f"alike-{size}-{n}" for n in range(8)]
    for n, request_id in enumerate(ids):  # eight alike requests from four hosts, two each
        opened(tab, console_server, request_id, host=f"ci-{n % 4 + 1}", tool=tool, args={"key": "signing"})
    lone = f"alike-{size}-lone"
    opened(tab, console_server, lone, host="ci-9", tool=tool, args={"key": "other"})
    try:
        page.goto(f"{console_server.base_url}/?tool={tool}&group=alike")
        group, single = host_row(page, ids[0]), host_row(page, lone)
        expect(page.locator("#requests > .row")).to_have_count(2, timeout=EVENT_TIMEOUT_MS)
        group.click()
        shoot(page, f"alike-{size}")
        expect(group.locator(".alike")).to_have_text("8 alike")
        expect(group.locator(".origin")).to_have_text("4 hosts")
        expect(group.locator(".origin")).to_have_attribute("title", "hosts: ci-1, ci-2, ci-3, ci-4")
        expect(single.locator(".alike")).to_be_hidden()  # a group of one is just a request: no "1 alike"
        expect(single.locator(".origin")).to_have_text("ci-9")

        pick(page, group)
        expect(page.locator("#request-detail .group-note")).to_contain_text(
            "8 alike: the same tool and arguments, from ci-1, ci-2, ci-3 and ci-4."
        )
        expect(page.locator("#focus-bar .origin")).to_have_text("from 4 hosts")
        pick(page, single)
        expect(page.locator("#request-detail .group-note")).to_have_count(0)
        expect(page.locator("#focus-bar .origin")).to_have_text("from ci-9")
    finally:
        withdraw_all(page.context, console_server, [*ids, lone])


# -- presence -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", ["laptop", "phone"])
def test_also_here_leaves_a_request_once_it_is_answered(screen, console_server, size):
    alice, bob = screen("alice", size), screen("bob")
    request_id = f"presence-answered-{size}"
    opened(alice, console_server, request_id, prompt="Rotate the deploy key?")
    alices_row, bobs_row = host_row(alice.page, request_id), host_row(bob.page, request_id)
    card = pick(alice.page, alices_row)
    pick(bob.page, bobs_row)
    expect(alices_row.locator(".presence")).to_have_text("also here: bob", timeout=EVENT_TIMEOUT_MS)
    expect(card.locator("header .presence")).to_have_text("also here: bob", timeout=EVENT_TIMEOUT_MS)

    answered = api_post(bob.page.context, console_server, f"requests/{request_id}/answer", {"ok": True})
    assert answered.status == 200, answered.text()
    expect(alices_row).to_have_class(re.compile(r"\bclosed\b"), timeout=EVENT_TIMEOUT_MS)
    expect(card).to_have_class(re.compile(r"\bclosed\b"))
    shoot(alice.page, f"presence-answered-{size}")
    expect(alices_row.locator(".presence")).to_be_hidden()
    expect(card.locator(".presence")).to_be_hidden()
    expect(alice.page.get_by_text("also here")).to_have_count(0)


# -- toasts -------------------------------------------------------------------------------------------


def approve_picked(page, card):
    card.get_by_role("button", name="Approve", exact=True).click()
    expect(page.locator("#toasts .toast")).to_have_count(1, timeout=EVENT_TIMEOUT_MS)


@pytest.mark.parametrize("size", ["laptop", "phone"])
def test_a_toast_covers_no_control_at_the_top_or_under_the_stuck_sticky_bar(screen, console_server, size):
    tab = screen("alice", size)
    page = tab.page
    ids = [f"toast-{size}-{n:02d}" for n in range(24)]
    for request_id in ids:
        opened(tab, console_server, request_id, host="ci-toast", tool="rotate")
    try:
        expect(host_row(page, ids[-1])).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
        # At the top: the search box, the summary and the filters are on screen.
        page.evaluate("window.scrollTo(0, 0)")
        approve_picked(page, pick(page, host_row(page, ids[0])))
        page.evaluate("window.scrollTo(0, 0)")
        expect(page.locator("#inbox-q")).to_be_in_viewport()
        shoot(page, f"toast-top-{size}")
        result = page.evaluate(COVERED_JS, ["#toasts .toast", CONTROLS])
        assert result == {"toasts": 1, "covered": []}

        # Further down, the sticky bar stuck at the top, rows and their card under it.
        page.locator("#toasts .toast-close").click()
        expect(page.locator("#toasts .toast")).to_have_count(0)
        row = host_row(page, ids[14])
        row.scroll_into_view_if_needed()
        card = pick(page, row)
        approve_picked(page, card)
        bar = page.locator("#focus-bar").bounding_box()
        assert page.evaluate("window.scrollY") > 300 and bar["y"] < 80, bar  # the bar is stuck at the top
        shoot(page, f"toast-stuck-{size}")
        result = page.evaluate(COVERED_JS, ["#toasts .toast", CONTROLS])
        assert result == {"toasts": 1, "covered": []}
    finally:
        withdraw_all(page.context, console_server, ids)


# -- the phone's sticky bar ---------------------------------------------------------------------------

PROMPT = "Rotate the signing key of the billing service in production tonight?"


def test_on_a_phone_the_sticky_bar_is_short_and_the_prompt_is_on_screen_once(screen, console_server):
    tab = screen("alice", "phone")
    page = tab.page
    ids = [f"bar-phone-{n}" for n in range(6)]
    for request_id in ids:
        opened(tab, console_server, request_id, host="ci-runner-7", tool="rotate", prompt=f"{PROMPT} ({request_id})")
    try:
        picked = ids[3]
        prompt = f"{PROMPT} ({picked})"
        row = host_row(page, picked)
        expect(row).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
        row.locator(".row-meta").tap()
        card = page.locator(f'#request-detail article.card[data-request-id="{picked}"]')
        expect(card).to_be_visible()
        bar = page.locator("#focus-bar")
        row.evaluate("(row) => row.scrollIntoView({block: 'start'})")  # the row under the bar, its card under it
        expect(card.locator(".prompt")).to_be_in_viewport()
        assert page.evaluate(SHOWN_TIMES_JS, prompt) == 1  # said by the card, not by its row nor by the bar
        assert bar.bounding_box()["height"] <= BAR_MOST_PX
        card.evaluate("(card) => card.scrollIntoView({block: 'start'})")  # the card's first screen, under the bar
        expect(card.get_by_role("button", name="Approve", exact=True)).to_be_in_viewport()
        shoot(page, "bar-picked-phone")
        assert bar.bounding_box()["height"] <= BAR_MOST_PX
        assert page.evaluate(SHOWN_TIMES_JS, prompt) == 1

        # The card's own prompt scrolled out of sight under the bar: the bar says it, on one line.
        top = card.locator(".prompt").evaluate("(p) => p.getBoundingClientRect().bottom + scrollY")
        page.evaluate(f"window.scrollTo(0, {top} - 20)")
        expect(bar.locator(".focus-prompt")).to_be_visible()
        expect(bar.locator(".focus-prompt")).to_have_text(prompt)
        shoot(page, "bar-scrolled-phone")
        assert bar.bounding_box()["height"] <= BAR_MOST_PX
        assert page.evaluate(SHOWN_TIMES_JS, prompt) == 1

        # Back up: the card's prompt is on screen again, and only there.
        card.locator(".prompt").scroll_into_view_if_needed()
        expect(bar.locator(".focus-prompt")).to_be_hidden()
        assert page.evaluate(SHOWN_TIMES_JS, prompt) == 1
    finally:
        withdraw_all(page.context, console_server, ids)


# -- empty states -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def empty_console(tmp_path_factory):
    """A console where nothing has happened yet: no request, no run."""
    with serve_console(
        tmp_path_factory.mktemp("e2e-empty"),
        "e2e-empty",
        CREATE_USERS,
        USERS,
        PASSWORD,
        DJANGO_SUPERUSER_PASSWORD=PASSWORD,
    ) as server:
        yield server


NOTHING_WAITING = re.compile(r"(?i)nothing is waiting|no tool is waiting|no request|nothing (in|to)")
SENTENCES_JS = """() => {
  // Every sentence a person can read in the dashboard's headings and paragraphs.
  const text = [...document.querySelectorAll("main h1, main h2, main p, main [role=status]")].map((n) => n.innerText).join("\\n");
  return text.split(/(?<=[.!?])\\s+|\\n+/).map((s) => s.trim()).filter(Boolean);
}"""


@pytest.mark.parametrize("size", ["laptop", "phone"])
def test_an_empty_dashboard_says_each_thing_once(browser, empty_console, size):
    phone = size == "phone"
    context = browser.new_context(viewport=SIZES[size], is_mobile=phone, has_touch=phone)
    try:
        page = context.new_page()
        tab = Tab(page)
        login(page, empty_console, "alice")
        expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
        page.screenshot(path=str(ARTIFACTS / f"walk-empty-{size}.png"), full_page=True)
        visible = page.locator("main").inner_text()
        # Nothing is waiting: said once, with how to make something wait.
        assert len(NOTHING_WAITING.findall(visible)) == 1, visible
        # No run: said once for the active runs, once for the finished ones, and no table of headers for nothing.
        assert len(re.findall(r"(?i)no run is active", visible)) == 1, visible
        assert len(re.findall(r"(?i)no run has finished", visible)) == 1, visible
        # A count of nothing beside a heading that says nothing, a bar to pick from nothing: not shown.
        expect(page.locator("#request-count")).to_be_hidden()
        expect(page.locator("#run-count")).to_be_hidden()
        expect(page.locator("#focus-bar")).to_be_hidden()
        expect(page.locator("#bulk-bar")).to_be_hidden()
        for table in page.locator("main table").all():
            assert not table.is_visible() or table.locator("tbody tr").count() > 0
        sentences = page.evaluate(SENTENCES_JS)
        repeated = {s for s in sentences if sentences.count(s) > 1 and len(s) > 12}
        assert repeated == set(), repeated
        assert tab.errors == []
    finally:
        context.close()
