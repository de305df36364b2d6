"""Decisions stay visible, in Chromium against a real daphne: the run page lists each request with the
decision in words, who, when and the comment, live; the transcript says the decision beside the §10
result; the audit page hides transcript entries until asked and shows who / what / decision; on a
phone (390x844) neither page scrolls sideways.

Runs are started and answered through the API from the page's own session (a reviewer in another tab,
as far as the run page can tell), so what is under test is what the pages show.
"""

import re

import pytest
from playwright.sync_api import expect

from tests.support.browser_api import SIDEWAYS_JS, call, start
from tests.support.console_page import EVENT_TIMEOUT_MS, assert_not_reloaded, mark_page

from .conftest import ARTIFACTS, PHONE, VIEWPORT

# What the tool (and a model) reads after §10's prefix when bob declines with the comment "too large" (issue 36).
BOBS_REASON = (
    '(declined by bob: "too large") '
    "Do not make the same call again; follow the reviewer's reason, or ask the user how to go on."
)


@pytest.fixture
def tabs(browser, console_server, login_states):
    """``tabs("alice")``: a signed-in page on the dashboard (which sets the CSRF cookie the API calls use)."""
    contexts, errors = [], []

    def open_as(username, viewport=VIEWPORT):
        context = browser.new_context(viewport=viewport, storage_state=login_states[username])
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"{console_server.base_url}/")
        return page

    yield open_as
    for context in contexts:
        context.close()
    assert not errors, f"uncaught script errors: {errors}"


def open_run_page(page, server, run_id):
    page.goto(f"{server.base_url}/runs/{run_id}/")
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    mark_page(page)


def the_request(page):
    """The run's one request in its list (drawn by the server or added live); returns (row, request id)."""
    row = page.locator("#run-requests li.run-request")
    expect(row).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    return row, row.get_attribute("data-request-id")


def answer(page, request_id, **body):
    answered = call(page, "POST", f"/api/v1/requests/{request_id}/answer", body)
    assert answered["status"] == 200, answered


def test_a_decline_shows_who_when_and_why_on_the_run_page_live(tabs, console_server):
    alice, bob = tabs("alice"), tabs("bob")
    run_id = start(alice, {"tool": "refund", "args": {"order": "E2E-D1", "amount": 900}})
    open_run_page(alice, console_server, run_id)
    row, request_id = the_request(alice)
    expect(row.locator(".prompt")).to_have_text("Refund 900 EUR on order E2E-D1?")
    expect(row.locator(".decision")).to_have_text("Waiting for an answer.")

    answer(bob, request_id, ok=False, reason="declined", comment="too large")

    expect(row.locator(".decision-text")).to_have_text("Declined by bob: too large", timeout=EVENT_TIMEOUT_MS)
    expect(row.locator(".decision-by")).to_have_text("bob")
    expect(row.locator(".decision-comment")).to_have_text("too large")
    expect(row.locator("time.decision-at")).to_have_attribute("datetime", re.compile(r"^\d{4}-\d\d-\d\dT"))
    expect(row.locator("time.decision-at")).not_to_have_text(re.compile(r"^\d{4}-\d\d-\d\dT"))  # in the reader's clock
    # The run's result is the decision, said once; §10's words the tool got stay in data-output and the title.
    result = alice.locator("#run-result")
    expect(result).to_have_text("Declined by bob: too large", timeout=EVENT_TIMEOUT_MS)
    expect(result).to_have_attribute("data-output", f"declined/expired: Refund 900 EUR on order E2E-D1? {BOBS_REASON}")
    expect(alice.locator("#run-decision-row")).to_be_hidden()
    assert_not_reloaded(alice)
    alice.screenshot(path=str(ARTIFACTS / "decisions-run-desktop.png"), full_page=True)


def test_approve_cancel_and_expiry_each_read_distinctly_on_the_run_page(tabs, console_server):
    alice, bob = tabs("alice"), tabs("bob")

    approved = start(alice, {"tool": "refund", "args": {"order": "E2E-A1", "amount": 5}})
    open_run_page(alice, console_server, approved)
    row, request_id = the_request(alice)
    answer(bob, request_id, ok=True, comment="fine")
    expect(row.locator(".decision-text")).to_have_text("Approved by bob", timeout=EVENT_TIMEOUT_MS)
    expect(row.locator(".decision-comment")).to_have_text("fine")
    expect(alice.locator("#run-status")).to_have_text("succeeded", timeout=EVENT_TIMEOUT_MS)

    cancelled = start(alice, {"tool": "refund", "args": {"order": "E2E-C1"}})
    open_run_page(alice, console_server, cancelled)
    row, _ = the_request(alice)
    alice.locator("#run-cancel").click()
    alice.locator(".cancel-panel").get_by_role("button", name="Cancel run").click()
    expect(row.locator(".decision-text")).to_have_text("Cancelled by alice", timeout=EVENT_TIMEOUT_MS)
    expect(row.locator(".decision-by")).to_have_text("alice")
    expect(alice.locator("#run-result")).to_have_text("Cancelled by alice", timeout=EVENT_TIMEOUT_MS)

    expiring = start(
        alice, {"tool": "refund", "args": {"order": "E2E-E1"}, "timeout": 2, "timeout_counts_waiting": True}
    )
    open_run_page(alice, console_server, expiring)
    row, _ = the_request(alice)
    expect(row.locator(".decision-text")).to_have_text(
        re.compile(r"^Expired at \d\d:\d\d UTC, nobody answered$"), timeout=10_000
    )
    expect(row.locator(".decision-by")).to_have_text("nobody: the deadline passed")
    expect(alice.locator("#run-status")).to_have_text("timed out", timeout=EVENT_TIMEOUT_MS)


def decline_an_agents_refund(alice, bob, console_server, order):
    run_id = start(
        alice, {"agent": {"prompt": f'call refund with {{"order": "{order}", "amount": 900}}', "model": "scripted"}}
    )
    open_run_page(alice, console_server, run_id)
    _, request_id = the_request(alice)
    answer(bob, request_id, ok=False, reason="declined", comment="too large")
    return run_id


def test_the_transcript_says_the_decision_beside_the_loop_rules_result(tabs, console_server):
    alice, bob = tabs("alice"), tabs("bob")
    decline_an_agents_refund(alice, bob, console_server, "E2E-T1")
    transcript = alice.locator("#transcript")
    expect(transcript.locator('[data-kind="answer"] .transcript-decision')).to_have_text(
        "Declined by bob: too large", timeout=EVENT_TIMEOUT_MS
    )
    result = transcript.locator('[data-kind="tool_result"]').first
    expect(result.locator("pre")).to_have_text(f"declined/expired: Refund 900 EUR on order E2E-T1? {BOBS_REASON}")
    expect(result.locator(".transcript-decision")).to_have_text("Declined by bob: too large")
    assert_not_reloaded(alice)
    # Read again from the server (a reload), the same words.
    alice.reload()
    expect(transcript.locator('[data-kind="answer"] .transcript-decision')).to_have_text("Declined by bob: too large")


def test_the_audit_page_hides_transcript_entries_until_asked(tabs, console_server):
    alice, bob = tabs("alice"), tabs("bob")
    run_id = decline_an_agents_refund(alice, bob, console_server, "E2E-U1")
    expect(alice.locator("#run-status")).to_have_text("succeeded", timeout=EVENT_TIMEOUT_MS)

    alice.goto(f"{console_server.base_url}/audit/?run={run_id}")
    rows = alice.locator("#audit-events tbody tr")
    expect(rows.first).to_be_visible()
    expect(alice.locator('#audit-events tr[data-action="run.transcript"]')).to_have_count(0)
    declined = alice.locator('#audit-events tr[data-action="request.declined"]')
    expect(declined.locator("td.who")).to_have_text("bob")
    expect(declined.locator("td.decision")).to_have_text("Declined by bob: too large")
    expect(declined.locator("td.what")).to_contain_text("refund: approval request")

    alice.locator("#transcript-toggle").click()
    expect(alice).to_have_url(re.compile(r"[?&]transcript=1"))
    expect(alice.locator('#audit-events tr[data-action="run.transcript"]').first).to_be_visible()
    expect(alice.locator("#show-transcript")).to_be_checked()
    alice.screenshot(path=str(ARTIFACTS / "decisions-audit-desktop.png"))
    # The filter form keeps the choice: filtering again still shows them.
    alice.locator("#audit-filters button[type=submit]").click()
    expect(alice).to_have_url(re.compile(r"[?&]transcript=1"))
    expect(alice.locator('#audit-events tr[data-action="run.transcript"]').first).to_be_visible()


def test_on_a_phone_the_audit_and_run_pages_do_not_scroll_sideways(tabs, console_server):
    alice, bob = tabs("alice", PHONE), tabs("bob")
    run_id = start(alice, {"tool": "refund", "args": {"order": "E2E-P1-" + "long" * 20, "amount": 900}})
    open_run_page(alice, console_server, run_id)
    _, request_id = the_request(alice)
    answer(bob, request_id, ok=False, reason="declined", comment="too large " * 20)
    expect(alice.locator("#run-result")).to_contain_text("Declined by bob: too large", timeout=EVENT_TIMEOUT_MS)
    assert alice.evaluate(SIDEWAYS_JS) <= 0, "the run page scrolls sideways at 390 px"
    alice.screenshot(path=str(ARTIFACTS / "decisions-run-phone.png"), full_page=True)

    alice.goto(f"{console_server.base_url}/audit/")
    decision = alice.locator('#audit-events tr[data-action="request.declined"] td.decision').first
    expect(decision).to_contain_text("Declined by bob: too large")
    assert alice.evaluate(SIDEWAYS_JS) <= 0, "the audit page scrolls sideways at 390 px"
    alice.screenshot(path=str(ARTIFACTS / "decisions-audit-phone.png"))
    box = decision.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
