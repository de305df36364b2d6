"""Extending a request's deadline in Chromium: alice presses "Extend +1 h" on a card and the new deadline shows
at once on her page, on bob's (another browser context) and on the request's own page, without a reload; a
double click extends once; the button says how much room is left and goes once the 24-hour cap is reached.
A policy's reminder marks the card on every dashboard, until an extension gives a new deadline.
Screenshots at 1440x900 and 390x844 go to test-artifacts/ (and /work/shots/extend/ when it exists)."""

import json
import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.support.console_page import EVENT_TIMEOUT_MS, api_post, host_row, pick, request_in

from .conftest import ARTIFACTS, LAPTOP, PHONE, console_with_policies

SHOTS = Path("/work/shots/extend")
# A policy for the reminder's tool alone: the others fall to the default policy (anyone logged in).
POLICIES = [{"name": "remind soon", "tool": "remindme", "remind_minutes_before": 1}]


@pytest.fixture(scope="module")
def console_server(tmp_path_factory):
    """This module's console: the shared one's two reviewers, plus the reminding policy above."""
    with console_with_policies(tmp_path_factory, "e2e-extend", POLICIES) as server:
        yield server


def _wire(moment):
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _later(wire, minutes):
    return _wire(datetime.fromisoformat(wire) + timedelta(minutes=minutes))


def _shot(page, name):
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"extend-{name}.png"
    page.screenshot(path=str(path))
    if SHOTS.parent.exists():
        SHOTS.mkdir(exist_ok=True)
        shutil.copyfile(path, SHOTS / path.name)


def _extends_sent(tab):
    return [f for f in (json.loads(p) for p in tab.frames_sent if isinstance(p, str)) if f.get("type") == "extend"]


def test_an_extension_shows_on_every_page_at_once_and_stops_at_the_cap(
    reviewer, host_requests, console_server, browser, login_states
):
    alice, bob = reviewer("alice"), reviewer("bob")
    deadline = _wire(datetime.now(UTC) + timedelta(minutes=30))
    host_requests(alice, ["ext-1"], prompt="Rotate the signing key?", tool="rotate", expiresAt=deadline)
    expect(host_row(bob.page, "ext-1")).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    alices, bobs = pick(alice.page, host_row(alice.page, "ext-1")), pick(bob.page, host_row(bob.page, "ext-1"))
    request_page = alice.page.context.new_page()
    request_page.goto(f"{console_server.base_url}/requests/ext-1/")
    expect(request_page.locator("#conn-status")).to_have_attribute("data-state", "live")
    expect(request_page.locator("#request-deadline")).to_have_attribute("data-expires", deadline)

    button = alices.get_by_role("button", name="Extend +1 h")
    expect(button).to_be_visible()
    alice.page.set_viewport_size(LAPTOP)
    _shot(alice.page, "desktop-before")
    button.dblclick()  # a careless double click: the card is busy until the console replies, so one extension
    moved = _later(deadline, 60)
    expect(alices.locator("header .countdown")).to_have_attribute("data-expires", moved, timeout=EVENT_TIMEOUT_MS)
    expect(bobs.locator("header .countdown")).to_have_attribute("data-expires", moved, timeout=EVENT_TIMEOUT_MS)
    expect(host_row(bob.page, "ext-1").locator(".countdown")).to_have_attribute("data-expires", moved)
    expect(request_page.locator("#request-deadline")).to_have_attribute("data-expires", moved, timeout=EVENT_TIMEOUT_MS)
    assert len(_extends_sent(alice)) == 1
    assert request_in(alice.page.context, console_server, "ext-1", "open")["deadline"]["extended_minutes"] == 60
    expect(alices.locator(".countdown")).to_contain_text("expires in 1h 29m")
    _shot(alice.page, "desktop-extended")

    # Elsewhere (a program, another tab) it moved 22 h 30 min more: 30 minutes of room are left.
    moved_more = api_post(alice.page.context, console_server, "requests/ext-1/extend", {"minutes": 1350})
    assert moved_more.status == 200, moved_more.text()
    expect(bobs.get_by_role("button", name="Extend +30 min")).to_be_visible(timeout=EVENT_TIMEOUT_MS)
    request_page.get_by_role("button", name="Extend +30 min").click()
    at_cap = _later(deadline, 24 * 60)
    expect(bobs.locator("header .countdown")).to_have_attribute("data-expires", at_cap, timeout=EVENT_TIMEOUT_MS)
    for card in (alices, bobs, request_page.locator("article.card")):
        expect(card.locator("button.extend")).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    expect(alices.get_by_role("button", name="Decline")).to_be_enabled()  # the card is not left busy

    refused = api_post(alice.page.context, console_server, "requests/ext-1/extend", {})
    assert refused.status == 409 and "cannot be extended any further" in refused.json()["message"]

    phone = browser.new_context(
        viewport=PHONE, storage_state=login_states["alice"], is_mobile=True, has_touch=True, device_scale_factor=2
    )
    try:
        on_phone = phone.new_page()
        deadline_2 = _wire(datetime.now(UTC) + timedelta(minutes=45))
        host_requests(alice, ["ext-2"], prompt="Rotate the other key?", tool="rotate", expiresAt=deadline_2)
        on_phone.goto(f"{console_server.base_url}/requests/ext-2/")
        expect(on_phone.locator("#conn-status")).to_have_attribute("data-state", "live")
        on_phone.get_by_role("button", name="Extend +1 h").click()
        expect(on_phone.locator("#request-deadline")).to_have_attribute(
            "data-expires", _later(deadline_2, 60), timeout=EVENT_TIMEOUT_MS
        )
        assert on_phone.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        box = on_phone.get_by_role("button", name="Extend +1 h").bounding_box()
        assert box is not None and box["height"] >= 44
        _shot(on_phone, "phone-request-page")
    finally:
        phone.close()


def test_a_policys_reminder_marks_the_card_on_every_dashboard(reviewer, host_requests, console_server):
    alice, bob = reviewer("alice"), reviewer("bob")
    # Due for its reminder a few seconds after it opens: only the console's own timer sends it.
    deadline = _wire(datetime.now(UTC) + timedelta(seconds=64))
    host_requests(alice, ["remind-1"], prompt="Ship the release?", tool="remindme", expiresAt=deadline)
    card = pick(bob.page, host_row(bob.page, "remind-1"))
    reminder_wait = 12_000  # the timer reads at least every 5 s; the reminder is due 4 s after the opening
    expect(card.locator(".reminder-mark")).to_have_text("reminder sent", timeout=reminder_wait)
    expect(card.locator("header .countdown")).to_have_class(re.compile(r"\breminded\b"))
    expect(host_row(alice.page, "remind-1").locator(".countdown")).to_have_class(re.compile(r"\breminded\b"))
    bob.page.set_viewport_size(LAPTOP)
    _shot(bob.page, "desktop-reminded")
    # An extension gives a new deadline: the mark goes until that one's reminder is due.
    card.get_by_role("button", name="Extend +1 h").click()
    expect(card.locator(".reminder-mark")).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    expect(host_row(alice.page, "remind-1").locator(".countdown")).not_to_have_class(re.compile(r"\breminded\b"))
