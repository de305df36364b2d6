"""Issue 36 in Chromium against a real daphne: after an approval, the request's page, the run page's list and
the inbox's card say what became of the tool, live: "Executing…", then how it ended with the tool's message;
a host's request reads "Approved, not yet reported" until its host reports. Screenshots at 1440x900 and 390x844
go to /work/shots/execution/ (and test-artifacts/).

The run's tool (tests/e2e/execution_tools.py) keeps executing until the test creates its release file.
"""

import shutil
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.support.browser_api import SIDEWAYS_JS, call, start
from tests.support.console_page import EVENT_TIMEOUT_MS, assert_not_reloaded, host_row, mark_page

from .conftest import ARTIFACTS, LAPTOP, PHONE, console_with_policies, login

SHOTS = Path("/work/shots/execution")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with console_with_policies(
        tmp_path_factory, "e2e-execution", [], TOOLNEXUS_TOOL_MODULES="tests.e2e.execution_tools"
    ) as served:
        yield served


@pytest.fixture(scope="module")
def states(browser, server, tmp_path_factory):
    """Each reviewer's signed-in storage state for this module's console."""
    saved = {}
    for username in ("alice", "bob"):
        context = browser.new_context()
        page = context.new_page()
        login(page, server, username)
        path = tmp_path_factory.mktemp("execution-states") / f"{username}.json"
        context.storage_state(path=str(path))
        saved[username] = str(path)
        context.close()
    return saved


@pytest.fixture
def tabs(browser, server, states):
    """``tabs("alice", viewport)``: a signed-in page on the dashboard (which sets the CSRF cookie the API uses)."""
    contexts, errors = [], []

    def open_as(username, viewport=LAPTOP):
        context = browser.new_context(viewport=viewport, storage_state=states[username])
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"{server.base_url}/")
        expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
        return page

    yield open_as
    for context in contexts:
        context.close()
    assert not errors, f"uncaught script errors: {errors}"


def shoot(page, name):
    ARTIFACTS.mkdir(exist_ok=True)
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"execution-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    shutil.copyfile(path, SHOTS / f"{name}.png")


def run_request_id(page, server, run_id):
    """The run page's one request, once it is listed: (its row, its id)."""
    page.goto(f"{server.base_url}/runs/{run_id}/")
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    row = page.locator("#run-requests li.run-request")
    expect(row).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    return row, row.get_attribute("data-request-id")


def open_request_page(page, server, request_id):
    page.goto(f"{server.base_url}/requests/{request_id}/")
    mark_page(page)
    return page.locator("#request-execution")


@pytest.mark.parametrize(
    ("fail", "ended", "message"),
    [
        (False, "Succeeded", "paid out 12 EUR, receipt R-12"),
        (True, "Failed", "the bank refused 12 EUR: account frozen"),
    ],
    ids=["succeeded", "failed"],
)
def test_a_runs_pages_show_executing_then_how_the_tool_ended_live(tabs, server, tmp_path, fail, ended, message):
    release = tmp_path / "release"
    alice = tabs("alice")
    run_id = start(alice, {"tool": "slow_payout", "args": {"amount": 12, "release": str(release), "fail": fail}})
    row, request_id = run_request_id(alice, server, run_id)
    expect(row.locator(".execution")).to_have_count(0)
    mark_page(alice)
    answered = call(alice, "POST", f"/api/v1/requests/{request_id}/answer", {"ok": True})
    assert answered["status"] == 200, answered

    expect(row.locator(".execution")).to_have_text("Executing…", timeout=EVENT_TIMEOUT_MS)
    page = tabs("bob")
    facts = open_request_page(page, server, request_id)
    expect(facts).to_have_text("Executing…")
    expect(facts).to_have_attribute("data-state", "executing")
    state = "succeeded" if not fail else "failed"
    if not fail:
        shoot(page, "request-executing-desktop")

    release.write_text("go")
    expect(row.locator(".execution")).to_have_text(f"{ended}: {message}", timeout=EVENT_TIMEOUT_MS)
    expect(row.locator(".execution")).to_have_attribute("data-state", state)
    expect(facts.locator(".execution-message")).to_have_text(message, timeout=EVENT_TIMEOUT_MS)
    expect(facts).to_have_attribute("data-state", state)
    expect(facts).to_contain_text(ended)
    assert_not_reloaded(page)
    assert_not_reloaded(alice)
    shoot(page, f"request-{state}-desktop")
    shoot(alice, f"run-{state}-desktop")

    phone = tabs("alice", PHONE)
    facts = open_request_page(phone, server, request_id)
    expect(facts.locator(".execution-message")).to_have_text(message)
    assert phone.evaluate(SIDEWAYS_JS) == 0
    shoot(phone, f"request-{state}-phone")
    run_request_id(phone, server, run_id)
    expect(phone.locator("#run-requests .execution")).to_have_text(f"{ended}: {message}")
    assert phone.evaluate(SIDEWAYS_JS) == 0
    shoot(phone, f"run-{state}-phone")


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["desktop", "phone"])
def test_a_host_requests_card_says_approved_not_yet_reported_until_the_host_reports(tabs, server, viewport):
    name = "desktop" if viewport == LAPTOP else "phone"
    request_id = f"e2e-host-payout-{name}"
    alice, bob = tabs("alice", viewport), tabs("bob")
    opened = call(
        alice,
        "POST",
        "/api/v1/requests",
        {"id": request_id, "kind": "approval", "prompt": "Pay out 40 EUR?", "host": "payouts", "tool": "payout"},
    )
    assert opened["status"] == 201, opened
    row = host_row(alice, request_id)
    expect(row).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    row.click()
    card = alice.locator(f'article.card[data-request-id="{request_id}"]')
    expect(card).to_have_count(1)

    assert call(bob, "POST", f"/api/v1/requests/{request_id}/answer", {"ok": True})["status"] == 200
    line = card.locator(".tombstone .execution")
    expect(line).to_have_text("Approved, not yet reported", timeout=EVENT_TIMEOUT_MS)
    expect(row.locator(".row-execution")).to_have_text("Approved, not yet reported")
    shoot(alice, f"card-unreported-{name}")

    # The host (alice's token opened it: her session here) reports; the card follows, then the request's page.
    reported = call(alice, "POST", f"/api/v1/requests/{request_id}/outcome", {"ok": True, "message": "receipt R-40"})
    assert reported["status"] == 200, reported
    expect(line).to_have_text("Succeeded: receipt R-40", timeout=EVENT_TIMEOUT_MS)
    expect(line).to_have_attribute("data-state", "succeeded")
    expect(row.locator(".row-execution")).to_have_text("Succeeded: receipt R-40")
    assert alice.evaluate(SIDEWAYS_JS) == 0
    shoot(alice, f"card-succeeded-{name}")

    page = tabs("bob", viewport)
    facts = open_request_page(page, server, request_id)
    expect(facts).to_contain_text("Succeeded")
    expect(facts.locator(".execution-message")).to_have_text("receipt R-40")


def test_a_host_requests_page_follows_the_report_live(tabs, server):
    request_id = "e2e-host-page-live"
    alice = tabs("alice")
    opened = call(
        alice,
        "POST",
        "/api/v1/requests",
        {"id": request_id, "kind": "approval", "prompt": "Rotate the key?", "host": "keys"},
    )
    assert opened["status"] == 201, opened
    assert call(alice, "POST", f"/api/v1/requests/{request_id}/answer", {"ok": True})["status"] == 200
    page = tabs("bob")
    facts = open_request_page(page, server, request_id)
    expect(facts).to_have_text("Approved, not yet reported")
    # The page has no connection badge; a report made before its socket connects is read when it does.
    shoot(page, "request-unreported-desktop")
    assert (
        call(alice, "POST", f"/api/v1/requests/{request_id}/outcome", {"ok": False, "message": "HSM offline"})["status"]
        == 200
    )
    expect(facts.locator(".execution-message")).to_have_text("HSM offline", timeout=EVENT_TIMEOUT_MS)
    expect(facts).to_have_attribute("data-state", "failed")
    assert_not_reloaded(page)
