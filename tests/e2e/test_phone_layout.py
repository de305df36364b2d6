"""The console on a phone (390x844, touch) and on a laptop (1440x900), in Chromium against a real daphne.

On the phone no page scrolls sideways, the top bar folds its links behind a Menu button, the runs and
tokens tables become stacked blocks with captions, Cancel run and Revoke are 44 px touch targets that
work when tapped, and so is every link and control of the audit page; key hints are hidden on a touch
screen. On the laptop the same pages keep their
tables and their top bar as before. The dashboard's request list on a phone is test_inbox_keyboard.py's.
"""

import os
import re

import pytest
from playwright.sync_api import expect

from tests.support.browser_api import call, start
from tests.support.console_page import EVENT_TIMEOUT_MS

from .conftest import ARTIFACTS, LAPTOP, PHONE, REPO, copy_artifact

TOUCH_TARGET_PX = 44
# Long unbroken words: what pushes a table cell, and so the page, past a phone's right edge.
LONG_WORD = "order-" + "x" * 90
LONG_TOKEN_NAME = "ci-deployer-" + "b" * 88  # the form's maxlength is 100

# The innermost elements that reach, or whose text reaches, past the right edge: what makes a page scroll sideways.
OVERFLOW_JS = """() => {
  const width = document.documentElement.clientWidth;
  const wide = [...document.querySelectorAll("body *")]
    .filter((e) => e.getBoundingClientRect().left + e.scrollWidth > width + 0.5)
    .map((e) => `${e.tagName.toLowerCase()}${e.id ? "#" + e.id : ""}.${[...e.classList].join(".")}`);
  return { scrollWidth: document.scrollingElement.scrollWidth, wide: wide.slice(-5) };
}"""
CAPTION_JS = "(cell) => getComputedStyle(cell, '::before').content"
OUTER_HTML_JS = "(element) => element.outerHTML.slice(0, 100)"


@pytest.fixture
def device(browser, console_server, login_states):
    """``device(PHONE)``: a fresh context of that size (a touch screen when it is the phone), signed in
    as alice unless ``signed_in=False``; fails the test on any uncaught script error."""
    contexts, errors = [], []

    def open_device(viewport, *, signed_in=True):
        touch = viewport == PHONE
        context = browser.new_context(
            viewport=viewport,
            is_mobile=touch,
            has_touch=touch,
            storage_state=login_states["alice"] if signed_in else None,
        )
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        return page

    yield open_device
    for context in contexts:
        context.close()
    assert not errors, f"uncaught script errors: {errors}"


def open_live(page, server, path="/"):
    page.goto(f"{server.base_url}{path}")
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")


def assert_no_sideways_scroll(page, width):
    found = page.evaluate(OVERFLOW_JS)
    assert found["scrollWidth"] <= width, f"{page.url} scrolls sideways at {width} px: {found}"


def assert_touch_target(locator, width=PHONE["width"]):
    """Visible, at least 44x44 CSS px, and wholly on screen horizontally."""
    expect(locator).to_be_visible()
    box = locator.bounding_box()
    assert box["width"] >= TOUCH_TARGET_PX and box["height"] >= TOUCH_TARGET_PX, box
    assert box["x"] >= 0 and box["x"] + box["width"] <= width, box


def caption(cell):
    return cell.evaluate(CAPTION_JS)


def assert_top_bar_folds_into_a_menu(page):
    """One short bar with the brand, the live status and Menu; the links appear, tappable, on a tap."""
    bar = page.locator("header.topbar")
    toggle = bar.get_by_role("button", name="Menu")
    assert_touch_target(toggle)
    expect(bar.get_by_role("link", name="API tokens")).to_be_hidden()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    assert bar.bounding_box()["height"] <= 64
    toggle.tap()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    for link in ("API tokens", "Audit trail"):
        assert_touch_target(bar.get_by_role("link", name=link))
    assert_touch_target(bar.get_by_role("button", name="Log out"))
    expect(bar.locator(".who")).to_have_text("alice")
    toggle.tap()
    expect(bar.get_by_role("link", name="API tokens")).to_be_hidden()


def test_on_a_phone_the_dashboard_stacks_the_runs_and_cancel_run_works_when_tapped_screenshot(device, console_server):
    page = device(PHONE)
    open_live(page, console_server)
    finished_id = start(page, {"tool": "crunch", "args": {"steps": 1, "pause": 0}})
    running_id = start(page, {"tool": "crunch", "args": {"steps": 6000, "pause": 0.1}})
    waiting_id = start(page, {"tool": "refund", "args": {"order": "A-2048", "amount": 49.9}})
    running = page.locator(f'#runs tr[data-run-id="{running_id}"]')
    waiting = page.locator(f'#runs tr[data-run-id="{waiting_id}"]')
    finished = page.locator(f'#recent-runs tr[data-run-id="{finished_id}"]')
    expect(running.locator(".status")).to_have_text("running", timeout=EVENT_TIMEOUT_MS)
    expect(waiting.locator(".status")).to_have_text("waiting", timeout=EVENT_TIMEOUT_MS)
    expect(finished.locator(".status")).to_have_text("succeeded", timeout=EVENT_TIMEOUT_MS)

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "runs-phone.png"
    page.screenshot(path=str(shot))  # the viewport: a full-page shot would drop the touch emulation
    if os.environ.get("UPDATE_README_SCREENSHOT") == "1":  # `make screenshot` refreshes the README's pictures
        copy_artifact(shot, REPO / "docs" / "runs-phone.png")

    assert_no_sideways_scroll(page, PHONE["width"])
    expect(page.locator("#runs-table thead")).to_be_hidden()
    assert caption(running.locator("td.args")) == '"Args"'
    assert caption(running.locator("td.started")) == '"Started"'
    assert caption(finished.locator("td.result")) == '"Result"'
    assert_touch_target(running.get_by_role("link", name=f"#{running_id}"))
    expect(page.locator("#show-keys")).to_be_hidden()  # no keys to press on a touch screen
    expect(page.locator("#focus-bar .key-hint")).to_be_hidden()
    assert_top_bar_folds_into_a_menu(page)

    # A long unbroken argument wraps inside its block instead of widening the page.
    long_id = start(page, {"tool": "refund", "args": {"order": LONG_WORD, "amount": 12.5}})
    long_row = page.locator(f'#runs tr[data-run-id="{long_id}"]')
    expect(long_row.locator(".status")).to_have_text("waiting", timeout=EVENT_TIMEOUT_MS)
    assert_no_sideways_scroll(page, PHONE["width"])

    for run_id, row in ((long_id, long_row), (waiting_id, waiting), (running_id, running)):
        cancel = row.get_by_role("button", name="Cancel run")
        assert_touch_target(cancel)
        cancel.tap()
        really = row.locator(".cancel-panel").get_by_role("button", name="Cancel run")
        assert_touch_target(really)
        assert_touch_target(row.get_by_role("button", name="Keep running"))
        really.tap()
        cancelled = page.locator(f'#recent-runs tr[data-run-id="{run_id}"] .status')
        expect(cancelled).to_have_text("cancelled", timeout=EVENT_TIMEOUT_MS)
    assert_no_sideways_scroll(page, PHONE["width"])


def test_on_a_phone_the_top_bar_menu_leads_to_the_other_pages(device, console_server):
    page = device(PHONE)
    page.goto(f"{console_server.base_url}/audit/")
    assert_no_sideways_scroll(page, PHONE["width"])
    page.get_by_role("button", name="Menu").tap()
    page.get_by_role("link", name="API tokens").tap()
    expect(page).to_have_url(f"{console_server.base_url}/tokens/")
    page.keyboard.press("Escape")  # a closed menu stays closed; Escape on it is harmless
    toggle = page.get_by_role("button", name="Menu")
    toggle.tap()
    page.keyboard.press("Escape")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(toggle).to_be_focused()


def test_on_a_phone_a_token_is_revoked_with_a_tap(device, console_server):
    page = device(PHONE)
    page.goto(f"{console_server.base_url}/tokens/")
    page.fill("#id_token_name", LONG_TOKEN_NAME)
    create = page.get_by_role("button", name="Create token")
    assert_touch_target(create)
    create.tap()
    expect(page.locator("#new-token-secret")).to_be_visible()
    assert_no_sideways_scroll(page, PHONE["width"])
    assert_touch_target(page.get_by_role("button", name="Copy token"))

    row = page.locator("#tokens tbody tr", has_text=LONG_TOKEN_NAME)
    expect(page.locator("#tokens thead")).to_be_hidden()
    assert caption(row.locator("td.created")) == '"Created"'
    assert caption(row.locator("td.used")) == '"Last used"'
    revoke = row.locator("summary", has_text="Revoke")
    assert_touch_target(revoke)
    assert_top_bar_folds_into_a_menu(page)
    revoke.tap()
    really = row.get_by_role("button", name=f"Revoke {LONG_TOKEN_NAME}")
    assert_touch_target(really)
    really.tap()
    expect(row.locator("td.state")).to_contain_text("revoked")
    expect(row.locator(".tokens-revoke")).to_have_count(0)
    assert_no_sideways_scroll(page, PHONE["width"])


def test_on_a_phone_an_agent_run_page_with_its_transcript_fits_and_cancel_run_works(device, console_server):
    page = device(PHONE)
    open_live(page, console_server)
    prompt = f'{LONG_WORD} call crunch with {{"steps": 6000, "pause": 0.1}}'
    started = call(page, "POST", "/api/v1/runs", {"agent": {"prompt": prompt, "model": "scripted"}})
    assert started["status"] == 201, started
    run_id = started["body"]["id"]
    open_live(page, console_server, f"/runs/{run_id}/")
    expect(page.locator('#transcript [data-kind="assistant"]')).to_contain_text("crunch", timeout=EVENT_TIMEOUT_MS)
    expect(page.locator("#run-status")).to_have_text("running", timeout=EVENT_TIMEOUT_MS)
    assert_no_sideways_scroll(page, PHONE["width"])
    expect(page.locator(".keys-hint")).to_be_hidden()
    assert_top_bar_folds_into_a_menu(page)

    cancel = page.locator("#run-cancel")
    assert_touch_target(cancel)
    cancel.tap()
    page.locator(".cancel-panel").get_by_role("button", name="Cancel run").tap()
    expect(page.locator("#run-status")).to_have_text("cancelled", timeout=EVENT_TIMEOUT_MS)
    assert_no_sideways_scroll(page, PHONE["width"])


def test_on_a_phone_the_login_and_password_pages_fit_and_log_in_with_taps(device, console_server):
    page = device(PHONE, signed_in=False)
    page.goto(f"{console_server.base_url}/accounts/password_reset/")  # not offered here: it says whom to ask
    assert_no_sideways_scroll(page, PHONE["width"])
    back = page.get_by_role("link", name="Back to log in")
    assert_touch_target(back)
    back.tap()
    expect(page).to_have_url(f"{console_server.base_url}/accounts/login/")
    assert_no_sideways_scroll(page, PHONE["width"])
    for field in ("#id_username", "#id_password"):
        assert_touch_target(page.locator(field))
    page.fill("#id_username", "alice")
    page.fill("#id_password", console_server.password)
    log_in = page.get_by_role("button", name="Log in")
    assert_touch_target(log_in)
    log_in.tap()
    expect(page).to_have_url(f"{console_server.base_url}/")
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    assert_no_sideways_scroll(page, PHONE["width"])


def small_targets(page):
    """Every visible link and control of ``page`` less than 44 px tall, each with its height."""
    controls = page.locator("a:visible, button:visible, input:visible, select:visible, summary:visible")
    found = []
    for control in controls.all():
        height = control.bounding_box()["height"]
        if height < TOUCH_TARGET_PX:
            found.append(f"{height:.0f}px {control.evaluate(OUTER_HTML_JS)}")
    return found


def test_on_a_phone_every_link_and_control_of_the_audit_page_is_a_touch_target(device, console_server):
    page = device(PHONE)
    open_live(page, console_server)
    run_id = start(page, {"tool": "refund", "args": {"order": LONG_WORD, "amount": 12.5}})
    waiting = page.locator(f'#runs tr[data-run-id="{run_id}"] .status')
    expect(waiting).to_have_text("waiting", timeout=EVENT_TIMEOUT_MS)
    assert call(page, "POST", f"/api/v1/runs/{run_id}/cancel")["status"] == 202
    expect(page.locator(f'#recent-runs tr[data-run-id="{run_id}"] .status')).to_have_text(
        "cancelled", timeout=EVENT_TIMEOUT_MS
    )

    # Two events a page: the middle page has every kind of link (newest, newer, older, run, export).
    page.goto(f"{console_server.base_url}/audit/?run={run_id}&limit=2")
    page.locator("#page-older").tap()
    expect(page.locator("#page-newer")).to_be_visible()
    for link in ("#page-newest", "#page-older", "#export-csv", "#export-jsonl", "#transcript-toggle"):
        expect(page.locator(link)).to_be_visible()
    expect(page.locator("#audit-events tbody tr").first.locator("td.what a")).to_have_text(f"run {run_id}")
    expect(page.locator("#audit-events summary").first).to_be_visible()
    assert small_targets(page) == []
    assert_no_sideways_scroll(page, PHONE["width"])
    page.locator("#audit-events summary").first.tap()  # a long payload opens within the width
    assert_no_sideways_scroll(page, PHONE["width"])
    assert_top_bar_folds_into_a_menu(page)
    page.locator("#transcript-toggle").tap()
    expect(page).to_have_url(re.compile(r"[?&]transcript=1"))
    page.wait_for_load_state()  # its modules have run (the top bar folded): the controls are the page's own
    assert small_targets(page) == []


def test_on_a_laptop_the_same_pages_keep_their_tables_and_top_bar(device, console_server):
    page = device(LAPTOP)
    open_live(page, console_server)
    run_id = start(page, {"tool": "crunch", "args": {"steps": 6000, "pause": 0.1}})
    row = page.locator(f'#runs tr[data-run-id="{run_id}"]')
    expect(row.locator(".status")).to_have_text("running", timeout=EVENT_TIMEOUT_MS)

    bar = page.locator("header.topbar")
    expect(bar.get_by_role("button", name="Menu")).to_be_hidden()
    for link in ("API tokens", "Audit trail"):
        expect(bar.get_by_role("link", name=link)).to_be_visible()
    expect(bar.get_by_role("button", name="Log out")).to_be_visible()
    assert bar.bounding_box()["height"] <= 64  # one line
    expect(page.locator("#runs-table thead")).to_be_visible()
    assert row.evaluate("(tr) => getComputedStyle(tr).display") == "table-row"
    assert caption(row.locator("td.args")) == "none"
    expect(page.locator("#show-keys")).to_be_visible()  # a keyboard is at hand
    assert_no_sideways_scroll(page, LAPTOP["width"])

    page.goto(f"{console_server.base_url}/runs/{run_id}/")
    expect(page.locator("#run-cancel")).to_be_visible()
    assert_no_sideways_scroll(page, LAPTOP["width"])
    page.locator("#run-cancel").click()
    page.locator(".cancel-panel").get_by_role("button", name="Cancel run").click()
    expect(page.locator("#run-status")).to_have_text("cancelled", timeout=EVENT_TIMEOUT_MS)

    page.goto(f"{console_server.base_url}/tokens/")
    page.fill("#id_token_name", "laptop-token")
    page.get_by_role("button", name="Create token").click()
    token_row = page.locator("#tokens tbody tr", has_text="laptop-token")
    expect(page.locator("#tokens thead")).to_be_visible()
    assert token_row.evaluate("(tr) => getComputedStyle(tr).display") == "table-row"
    expect(token_row.locator("summary", has_text="Revoke")).to_be_visible()
    assert_no_sideways_scroll(page, LAPTOP["width"])

    page.goto(f"{console_server.base_url}/audit/?run={run_id}")
    expect(page.locator("#audit-events thead")).to_be_visible()
    # Compact: the touch-sized targets are the phone's; here links and buttons keep their text's height.
    for target in ("#export-csv", "#transcript-toggle", "#audit-filters button[type=submit]"):
        assert page.locator(target).bounding_box()["height"] < TOUCH_TARGET_PX, target
    assert_no_sideways_scroll(page, LAPTOP["width"])
