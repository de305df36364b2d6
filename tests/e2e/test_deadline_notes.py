"""What a passed deadline did shows on the request's own page too, live (issue 35): an escalation's note on the
card and on the Deadline line, where only the inbox showed it before. (A kept-open card in the inbox:
test_outcomes_on_expiry.py.) This module runs its own console with an escalating policy; the deadline is a few
seconds away and the console's own timer acts on it.
"""

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from playwright.sync_api import expect

from .conftest import console_with_policies

POLICIES = [
    {"name": "escalating", "tool": "esc-*", "users": ["alice"], "on_timeout": "escalate", "fallback_users": ["bob"]},
]
SHOTS = Path("/work/shots/expiry")
DEADLINE_MS = 15_000  # the timer acts within a second of a deadline a few seconds away
CLOCK = r"(\d{1,2} \w{3}( \d{4})? )?\d\d:\d\d UTC"


@pytest.fixture(scope="module")
def console_server(tmp_path_factory):
    with console_with_policies(tmp_path_factory, "e2e-deadline-notes", POLICIES) as server:
        yield server


def soon(seconds=3):
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_an_escalation_shows_on_the_requests_own_page_live(alice_at, host_requests, console_server):
    tab, viewport = alice_at
    page = tab.page
    request_id = f"esc-page-{viewport['width']}"
    host_requests(tab, [request_id], tool="esc-pay", prompt="Pay 900 EUR to ACME?", expiresAt=soon())
    page.goto(f"{console_server.base_url}/requests/{request_id}/")
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    escalated = re.compile(rf"^Escalated to bob until {CLOCK}$")
    card = page.locator(f'article.card[data-request-id="{request_id}"]')
    expect(card.locator(".deadline-note")).to_have_text(escalated, timeout=DEADLINE_MS)
    expect(page.locator("#request-deadline .deadline-note")).to_have_text(
        re.compile(rf"^\(Escalated to bob until {CLOCK}\)$")
    )
    expect(card.locator("header .countdown")).to_have_text(re.compile(r"^expires in (59m|1h 00m)"))
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"escalated-request-page-{viewport['width']}x{viewport['height']}.png"))
