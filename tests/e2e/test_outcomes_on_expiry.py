"""What a passed deadline did, as a reviewer reads it in Chromium (issue 35), at 1440x900 and 390x844: an expiry
reads "Expired at 20:14 UTC, nobody answered", never "Declined by"; a policy's ``apply_defaults`` reads
"Approved with its defaults when it expired at ..."; an escalation shows whom it went to and until when; a request
its policy keeps open says "deadline passed, kept open" and is still approved as any other.

This module runs its own console, with policies that approve ``auto-*`` with defaults, escalate ``esc-*``
from alice to bob and keep ``keep-*`` open. Deadlines are a few seconds away: the console's own timer acts on
them, and Playwright's ``expect`` waits for what the page shows (no sleeps).
"""

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.support.console_page import EVENT_TIMEOUT_MS, api_get, host_row, pick

from .conftest import console_with_policies

POLICIES = [
    {"name": "auto payments", "tool": "auto-*", "on_timeout": "apply_defaults"},
    {
        "name": "escalating payments",
        "tool": "esc-*",
        "users": ["alice"],
        "on_timeout": "escalate",
        "fallback_users": ["bob"],
    },
    {"name": "patient payments", "tool": "keep-*", "on_timeout": "keep_open"},
]
SHOTS = Path("/work/shots/expiry")
DEADLINE_MS = 15_000  # the timer acts within a second of a deadline a few seconds away
CLOCK = r"(\d{1,2} \w{3}( \d{4})? )?\d\d:\d\d UTC"


@pytest.fixture(scope="module")
def console_server(tmp_path_factory):
    """This module's console, with the policies above."""
    # Deadlines here are seconds away: defaults apply at once (the default waits 5 min after the opening).
    with console_with_policies(tmp_path_factory, "e2e-expiry", POLICIES, CONSOLE_DEFAULTS_AFTER_MINUTES="0") as server:
        yield server


def soon(seconds=3):
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_an_expiry_reads_nobody_answered_and_defaults_read_approved_with_them(alice_at, host_requests, console_server):
    tab, viewport = alice_at
    page = tab.page
    size = f"{viewport['width']}x{viewport['height']}"
    plain, auto, esc = f"plain-{size}", f"auto-{size}", f"esc-{size}"
    deadline = soon()
    host_requests(tab, [plain], tool="plain-pay", prompt="Pay 40 EUR to ACME?", expiresAt=deadline)
    host_requests(tab, [auto], tool="auto-pay", prompt="Pay 5 EUR to ACME?", expiresAt=deadline)
    host_requests(tab, [esc], tool="esc-pay", prompt="Pay 900 EUR to ACME?", expiresAt=deadline)

    # Picked before its deadline: the escalation reaches the open card live, still open, a new deadline an hour
    # on, and the card says to whom and until when.
    esc_card = pick(page, host_row(page, esc))
    note = esc_card.locator(".deadline-note")
    expect(note).to_be_hidden()
    expect(note).to_have_text(re.compile(rf"^Escalated to bob until {CLOCK}$"), timeout=DEADLINE_MS)
    expect(esc_card.locator(".countdown")).to_have_text(re.compile(r"^expires in (59m|1h 00m)"))
    expect(host_row(page, esc).locator(".countdown")).to_have_text(re.compile(r"^expires in (59m|1h 00m)"))
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"escalated-{size}.png"))

    expect(host_row(page, plain).locator(".row-state")).to_have_text(
        re.compile(rf"^Expired at {CLOCK}, nobody answered$"), timeout=DEADLINE_MS
    )
    expect(host_row(page, auto).locator(".row-state")).to_have_text(
        re.compile(rf"^Approved with its defaults when it expired at {CLOCK}$"), timeout=DEADLINE_MS
    )
    expect(host_row(page, auto)).to_have_attribute("data-outcome", "approved")
    card = pick(page, host_row(page, plain))
    expect(card.locator(".tombstone .card-error")).to_have_text(
        re.compile(rf"^No longer open: Expired at {CLOCK}, nobody answered$")
    )
    expect(card).not_to_contain_text("Declined")
    page.screenshot(path=str(SHOTS / f"expired-{size}.png"))

    # The request's own page: decided by nobody, the deadline passed.
    page.goto(f"{console_server.base_url}/requests/{auto}/")
    expect(page.locator("#request-decision")).to_have_text(
        re.compile(rf"^Approved with its defaults when it expired at {CLOCK}$")
    )
    expect(page.get_by_text("nobody: the deadline passed")).to_be_visible()
    page.screenshot(path=str(SHOTS / f"request-page-defaults-{size}.png"), full_page=True)


def test_a_request_kept_open_past_its_deadline_says_so_and_is_still_approved(alice_at, host_requests, console_server):
    tab, viewport = alice_at
    page = tab.page
    size = f"{viewport['width']}x{viewport['height']}"
    kept = f"keep-{size}"
    # A little further off than the others: the card is checked ticking before the deadline passes.
    host_requests(tab, [kept], tool="keep-pay", prompt="Pay 70 EUR to ACME?", expiresAt=soon(6))
    row = host_row(page, kept)
    card = pick(page, row)
    # Ticking while the deadline is ahead; once it passes, the card and its row say it was kept open, live.
    expect(card.locator("header .countdown")).to_have_text(re.compile(r"^expires in "))
    kept_open = card.locator("header .countdown.kept-open")
    expect(kept_open).to_have_text("deadline passed, kept open", timeout=DEADLINE_MS)
    expect(card.locator(".deadline-note")).to_have_text(re.compile(rf"^Deadline passed at {CLOCK}, kept open$"))
    expect(row.locator(".countdown.kept-open")).to_have_text("deadline passed, kept open")
    expect(row).not_to_have_class(re.compile(r"\bclosed\b"))  # neither refused nor approved: still open
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"kept-open-{size}.png"))

    # A reload draws it from the database alone: still kept open, still answerable.
    page.reload()
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    expect(row.locator(".countdown.kept-open")).to_have_text("deadline passed, kept open")
    card = pick(page, row)
    expect(card.locator("header .countdown.kept-open")).to_have_text("deadline passed, kept open")
    card.get_by_role("button", name="Approve", exact=True).click()
    # Her own answer goes through as on any open request: the toast says so and the row leaves her queue.
    expect(page.locator("#toasts .toast").last).to_contain_text("Approved · Pay 70 EUR to ACME?")
    expect(row).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    view = api_get(page.context, console_server, f"requests/{kept}").json()
    assert (view["status"], view["decided_by"], view["answered_by"]) == ("answered", "person", "alice")
    assert view["answer"]["ok"] is True
    page.screenshot(path=str(SHOTS / f"kept-open-approved-{size}.png"))
