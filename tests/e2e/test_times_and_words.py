"""Times and words as people read them, in Chromium against a real daphne (issue 28.3 and 28.4).

Every page, toast and message writes a time one way ("20:14 UTC", "4 Dec 20:14 UTC"), whatever the
browser's own zone and locale: the pages are read in a New York, en-US browser, where any
``toLocaleTimeString`` would say "08:14 PM" and any local clock would be five hours off. The run page
speaks in words (no process ids, no event names, a finished run without an "Open request" panel, a
refusal said once), the audit page links request ids and names who acted, an approved tombstone reads
as approved, an exclusive bound reads "greater than", and Retry opens the new run under its own URL.
"""

import re
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

from tests.support.browser_api import call, start
from tests.support.console_page import EVENT_TIMEOUT_MS, Tab, decline, pick, request_row

from .conftest import ARTIFACTS, LAPTOP, PHONE

ZONE, LOCALE = "America/New_York", "en-US"  # a browser whose own clock is neither UTC nor 24-hour

# What the console must never show a person: a 12-hour clock, a clock without its zone, ISO or US dates.
TWELVE_HOUR = re.compile(r"\b\d{1,2}:\d\d(?::\d\d)?\s*[AaPp]\.?[Mm]\b|\b[AP]M\b")
CLOCK_WITHOUT_ZONE = re.compile(r"\b\d{1,2}:\d\d(?::\d\d)?(?![:\d])(?! UTC)")
ISO_DATE = re.compile(r"\b\d{4}-\d\d-\d\d\b")
US_DATE = re.compile(
    r"\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{1,2}, \d{4}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b"
)
# The one way: "20:14 UTC" today, "4 Dec 20:14 UTC" this year, "4 Dec 2025 20:14 UTC" before.
ONE_WAY = re.compile(r"^(?:\d{1,2} [A-Z][a-z]{2}(?: \d{4})? )?\d\d:\d\d UTC$")
RELATIVE = re.compile(r"^\d+[hms](?: \d+[ms])? ago$")  # where it helps: how long a request has waited


def other_time_formats(text):
    """Every time in ``text`` written another way than the console's one."""
    return [
        match.group(0)
        for pattern in (TWELVE_HOUR, CLOCK_WITHOUT_ZONE, ISO_DATE, US_DATE)
        for match in pattern.finditer(text)
    ]


def test_the_format_check_sees_each_other_way_of_writing_a_time():
    said = "08:14 PM · Jan 1, 2030, 12:00 PM · 2026-12-04 20:14:05 UTC · 20:08 · at 18:31 · 12/04/2026"
    found = other_time_formats(said)
    for written in ("08:14 PM", "12:00 PM", "20:08", "18:31", "2026-12-04", "Jan 1, 2030", "12/04/2026"):
        assert written in found, (written, found)
    assert other_time_formats("20:14 UTC, 4 Dec 20:14 UTC, 4 Dec 2025 07:05 UTC, 3m 5s ago, 2 of 3") == []


@pytest.fixture
def in_new_york(browser, console_server, login_states):
    """``in_new_york("alice", viewport)``: a signed-in tab whose browser lives in New York, en-US."""
    contexts, tabs = [], []

    def open_as(username="alice", viewport=LAPTOP, path="/"):
        context = browser.new_context(
            viewport=viewport, storage_state=login_states[username], timezone_id=ZONE, locale=LOCALE
        )
        contexts.append(context)
        tab = Tab(context.new_page())
        tabs.append(tab)
        tab.page.goto(f"{console_server.base_url}{path}")
        return tab

    yield open_as
    for context in contexts:
        context.close()
    errors = [error for tab in tabs for error in tab.errors]
    assert not errors, f"uncaught script errors: {errors}"


def read_times(page, where):
    """The page's visible text, checked: no time in another format, and every <time> in the one way."""
    text = page.locator("body").inner_text()
    assert other_time_formats(text) == [], f"{where}: {other_time_formats(text)}\n{text}"
    times = page.locator("time:visible").evaluate_all("ts => ts.map((t) => [t.innerText, t.getAttribute('datetime')])")
    for shown, exact in times:
        if shown != "—":
            assert ONE_WAY.match(shown) or RELATIVE.match(shown), f"{where}: <time> reads {shown!r}"
            assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d", exact or ""), f"{where}: {shown!r} keeps no exact instant"
    return text


def live(page):
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")


def test_every_page_toast_and_message_writes_time_one_way(in_new_york, console_server, host_requests, browser):
    alice_tab, bob = in_new_york("alice"), in_new_york("bob").page
    alice = alice_tab.page
    live(alice)
    now = datetime.now(UTC).replace(microsecond=0)
    # Deadlines: one days away (a date), one within the day (a countdown).
    [far] = host_requests(
        alice_tab, ["times-far"], expiresAt=(now + timedelta(days=3)).isoformat().replace("+00:00", "Z")
    )
    host_requests(alice_tab, ["times-near"], expiresAt=(now + timedelta(hours=5)).isoformat().replace("+00:00", "Z"))
    days = now + timedelta(days=3)
    expect(far.locator(".countdown")).to_have_text(
        re.compile(rf"^expires on {days.day} {days:%b}( {days.year})? {days:%H:%M} UTC$")
    )
    expect(far.locator(".countdown")).to_have_attribute("title", re.compile(r"UTC"))

    # A tombstone: bob approves the request alice has picked; its row, card and sticky bar say when.
    approved = start(alice, {"tool": "refund", "args": {"order": "E2E-TIMES-1"}})
    card = pick(alice, request_row(alice, approved))
    request_id = card.get_attribute("data-request-id")
    assert call(bob, "POST", f"/api/v1/requests/{request_id}/answer", {"ok": True})["status"] == 200
    expect(card.locator(".tombstone")).to_contain_text("Approved by bob · ", timeout=EVENT_TIMEOUT_MS)
    read_times(alice, "the dashboard with a tombstone")

    # An ok toast (my own answer) and a warn toast (a key that cannot act), each read as it shows.
    declined = start(alice, {"tool": "refund", "args": {"order": "E2E-TIMES-2"}})
    declined_card = pick(alice, request_row(alice, declined))
    decline(declined_card)
    expect(alice.locator("#toasts .toast-ok")).not_to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    read_times(alice, "an ok toast")
    alice.locator(f'#requests > .row[data-request-id="{request_id}"]').click()
    alice.keyboard.press("a")
    expect(alice.locator("#toasts .toast-warn")).not_to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    read_times(alice, "a warn toast")

    # A late answer is refused with who and when: the message on the request's own page.
    late = start(bob, {"tool": "refund", "args": {"order": "E2E-TIMES-3"}})
    [late_view] = [r for r in call(bob, "GET", "/api/v1/requests?status=open")["body"]["requests"] if r["run"] == late]
    alice.goto(f"{console_server.base_url}/requests/{late_view['id']}/")
    live(alice)
    assert (
        call(bob, "POST", f"/api/v1/requests/{late_view['id']}/answer", {"ok": False, "reason": "declined"})["status"]
        == 200
    )
    refused = call(alice, "POST", f"/api/v1/requests/{late_view['id']}/answer", {"ok": True})["body"]["message"]
    assert re.fullmatch(r"This request was already declined by bob at \d\d:\d\d UTC\.", refused), refused
    read_times(alice, "a request's page as it closed")  # its tombstone says who and when
    alice.reload()
    expect(alice.locator("#request-decision")).to_have_text("Declined by bob")
    read_times(alice, "a resolved request's page")
    alice.goto(f"{console_server.base_url}/requests/times-far/")
    read_times(alice, "an open request's page")

    # Every other page: a run's, the audit trail, the tokens, the 404, the login.
    alice.goto(f"{console_server.base_url}/runs/{approved}/")
    live(alice)
    read_times(alice, "a run's page")
    alice.goto(f"{console_server.base_url}/audit/")
    read_times(alice, "the audit page")
    alice.goto(f"{console_server.base_url}/tokens/")
    alice.fill("#id_token_name", "times")
    alice.locator("#id_token_name").press("Enter")
    expect(alice.locator("td.created time").first).to_be_visible()
    read_times(alice, "the tokens page")
    alice.goto(f"{console_server.base_url}/runs/999999/")
    read_times(alice, "the 404 page")
    stranger = browser.new_context(viewport=LAPTOP, timezone_id=ZONE, locale=LOCALE)
    try:
        login = stranger.new_page()
        login.goto(f"{console_server.base_url}/accounts/login/")
        read_times(login, "the login page")
    finally:
        stranger.close()

    # What the API says in words carries its zone too.
    resolved = call(alice, "GET", "/api/v1/requests?status=resolved&limit=500")["body"]["requests"]
    words = " · ".join(r["decision"]["text"] for r in resolved if r["decision"])
    assert words and other_time_formats(words) == [], words


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["1440x900", "390x844"])
def test_an_approved_tombstone_reads_as_approved(in_new_york, viewport):
    """Before: drawn in the danger colour with its prompt struck through, like a refusal."""
    tab, bob = in_new_york("alice", viewport), in_new_york("bob").page
    page = tab.page
    live(page)
    approved = start(page, {"tool": "refund", "args": {"order": f"E2E-GREEN-{viewport['width']}"}})
    row = request_row(page, approved)
    card = pick(page, row)
    request_id = card.get_attribute("data-request-id")
    assert call(bob, "POST", f"/api/v1/requests/{request_id}/answer", {"ok": True})["status"] == 200
    expect(card.locator(".tombstone")).to_have_attribute("data-outcome", "approved", timeout=EVENT_TIMEOUT_MS)
    expect(row).to_have_attribute("data-outcome", "approved")
    ok, danger = "rgb(6, 118, 71)", "rgb(180, 35, 24)"
    expect(row.locator(".row-state")).to_have_css("color", ok)
    expect(row.locator(".row-prompt")).not_to_have_css("text-decoration-line", "line-through")
    expect(card.locator(".tombstone .card-error")).to_have_css("color", ok)
    expect(card.locator(".tombstone")).not_to_have_css("background-color", "rgb(254, 243, 242)")
    page.screenshot(path=str(ARTIFACTS / f"tombstone-approved-{viewport['width']}.png"))

    # A refusal still reads as one.
    declined = start(page, {"tool": "refund", "args": {"order": f"E2E-RED-{viewport['width']}"}})
    red_row = request_row(page, declined)
    red_card = pick(page, red_row)
    red_id = red_card.get_attribute("data-request-id")
    assert call(bob, "POST", f"/api/v1/requests/{red_id}/answer", {"ok": False, "reason": "declined"})["status"] == 200
    expect(red_row).to_have_attribute("data-outcome", "declined", timeout=EVENT_TIMEOUT_MS)
    expect(red_row.locator(".row-state")).to_have_css("color", danger)
    expect(red_row.locator(".row-prompt")).to_have_css("text-decoration-line", "line-through")


RAW_EVENT_NAME = re.compile(r"\b(?:run|request|auth)\.[a-z_]+\b")


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["1440x900", "390x844"])
def test_the_run_page_says_a_cancelled_run_in_words_once(in_new_york, console_server, viewport):
    """Before: "Console process vm:…", `run.cancel_requested by demo`, `request.cancelled by system`, the
    result "declined/expired: <prompt>" beside "Cancelled by alice", and an empty "Open request" panel."""
    page = in_new_york("alice", viewport).page
    live(page)
    run_id = start(page, {"tool": "deploy", "args": {"service": "words"}})
    page.goto(f"{console_server.base_url}/runs/{run_id}/")
    live(page)
    expect(page.locator("#requests article.card")).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    expect(page.locator("#open-request-panel")).to_be_visible()
    page.locator("#run-cancel").click()
    page.locator(".cancel-panel").get_by_role("button", name="Cancel run").click()

    # Live: the result is the decision, said once; the panel with nothing to answer goes.
    result = page.locator("#run-result")
    expect(result).to_have_text("Cancelled by alice", timeout=EVENT_TIMEOUT_MS)
    expect(result).to_have_attribute("data-output", "declined/expired: Which environment should words be deployed to?")
    expect(page.locator("#run-decision-row")).to_be_hidden()
    expect(page.locator("#open-request-panel")).to_be_hidden()
    timeline = page.locator("#timeline > li")
    expect(page.locator('#timeline > li[data-action="run.finished"]')).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    live_lines = [" ".join(line.split()[2:]) for line in timeline.all_inner_texts()]
    assert "Cancel asked by alice" in live_lines and "Request withdrawn by alice" in live_lines, live_lines

    def words_only():
        text = page.locator("body").inner_text()
        assert not RAW_EVENT_NAME.findall(text), RAW_EVENT_NAME.findall(text)
        assert "declined/expired" not in text and "Console process" not in text and "system" not in text
        assert text.count("Cancelled by alice") == 2  # the run's result, and its request under "Requests and decisions"
        owner = page.locator("#run-detail").get_attribute("data-owner")
        assert owner and owner not in text  # kept for operators, not shown

    words_only()
    # Drawn by the server, the page reads the same as it did live.
    page.reload()
    live(page)
    assert [" ".join(line.split()[2:]) for line in timeline.all_inner_texts()] == live_lines
    expect(page.locator("#open-request-panel")).to_be_hidden()
    words_only()
    expect(page.locator('#timeline > li[data-action="run.cancel_requested"]')).to_contain_text("Cancel asked by alice")
    page.screenshot(path=str(ARTIFACTS / f"run-in-words-{viewport['width']}.png"), full_page=True)

    # The audit page: Who names alice, and the request id is a link to its page.
    page.goto(f"{console_server.base_url}/audit/?run={run_id}")
    withdrawn = page.locator('#audit-events tr[data-action="request.cancelled"]')
    expect(withdrawn.locator("td.who")).to_have_text("alice")
    expect(withdrawn.locator("td.decision")).to_have_text("Cancelled by alice")
    link = withdrawn.locator("td.what a.request-link")
    request_id = link.inner_text()
    expect(link).to_have_attribute("href", f"/requests/{request_id}/")
    page.screenshot(path=str(ARTIFACTS / f"audit-in-words-{viewport['width']}.png"), full_page=True)
    link.click()
    expect(page).to_have_url(f"{console_server.base_url}/requests/{request_id}/")
    expect(page.locator("#request-decision")).to_have_text("Cancelled by alice")


def test_retry_opens_the_new_run_under_its_own_url(in_new_york, console_server):
    page = in_new_york("alice").page
    live(page)
    first = start(page, {"tool": "crunch", "args": {"steps": 200, "pause": 0.05}})
    page.goto(f"{console_server.base_url}/runs/{first}/")
    live(page)
    assert call(page, "POST", f"/api/v1/runs/{first}/cancel")["status"] == 202
    retry = page.locator("#run-retry")
    expect(retry).to_be_visible(timeout=EVENT_TIMEOUT_MS)
    retries = []
    page.on("request", lambda r: retries.append(r) if r.url.endswith(f"/api/v1/runs/{first}/retry") else None)
    retry.dblclick()  # a careless hand: one retry all the same
    expect(page).not_to_have_url(f"{console_server.base_url}/runs/{first}/")
    expect(page).to_have_url(re.compile(rf"^{re.escape(console_server.base_url)}/runs/\d+/$"))
    again = int(page.url.rstrip("/").rsplit("/", 1)[1])
    assert again > first and len(retries) == 1, (again, len(retries))
    expect(page.locator("h1")).to_have_text(f"Run {again}: crunch")
    expect(page.locator("#run-retry-of")).to_contain_text(f"run #{first}")
    page.go_back()
    expect(page).to_have_url(f"{console_server.base_url}/runs/{first}/")
    expect(page.locator("h1")).to_have_text(f"Run {first}: crunch")
    expect(page.locator("#run-retried-as a")).to_have_text([f"run #{again}"])
    assert call(page, "POST", f"/api/v1/runs/{again}/cancel")["status"] in (202, 409)


def test_an_agent_runs_page_names_it(in_new_york, console_server):
    """Before: its heading read "Run 4:" and stopped (an agent run has no tool)."""
    page = in_new_york("alice").page
    live(page)
    run_id = start(page, {"agent": {"prompt": "think 0", "model": "scripted"}})
    page.goto(f"{console_server.base_url}/runs/{run_id}/")
    expect(page.locator("h1")).to_have_text(f"Run {run_id}: agent (scripted)")


def test_an_exclusive_minimum_reads_greater_than(in_new_york, console_server):
    """Before: refund's amount (exclusiveMinimum 0) was hinted "of at least 0", though 0 is refused."""
    tab = in_new_york("alice")
    live(tab.page)
    run_id = start(tab.page, {"tool": "refund", "args": {"order": "E2E-BOUND"}})
    card = pick(tab.page, request_row(tab.page, run_id))
    hint = card.locator('.field:has([name="amount"]) .hint')
    expect(hint).to_have_text("greater than 0")
    decline(card)
