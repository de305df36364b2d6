"""A run page's timeline in Chromium against a real daphne: no event is lost between the page's render
and its socket connecting, and a long timeline shows its newest page with the earlier ones a click away.

The socket is held back by a gate (tests/support/socket_gate.py) that refuses it until the test opens it;
everything else is the real console.
"""

import pytest
from playwright.sync_api import expect

from tests.support.browser_api import call, start
from tests.support.live_console import console_env, manage
from tests.support.socket_gate import ConsoleSocketGate

from .conftest import VIEWPORT, Watched

EVENT_TIMEOUT_MS = 5000  # a catch-up after a connect on a loaded 2-core CI machine
PAGE_EVENTS = 50  # frames.RUN_TIMELINE_EVENTS
LONG_TIMELINE = 70

# A finished run with LONG_TIMELINE events, written by another process as the console's own would be.
GIVE_A_LONG_TIMELINE = f"""
from django.contrib.auth import get_user_model
from django.db import transaction
from approvals import events
from approvals.models import AuditEvent, Run, RunStatus
run = Run.objects.create(tool="crunch", status=RunStatus.SUCCEEDED, started_by=get_user_model().objects.get(username="alice"))
with transaction.atomic():
    for step in range({LONG_TIMELINE}):
        events.record(AuditEvent.Action.RUN_TRANSCRIPT, actor=f"step-{{step}}", run=run, payload={{"step": step}})
print(run.pk)
"""


@pytest.fixture
def signed_in(browser, console_server, login_states):
    """``signed_in("alice")``: a fresh context's page for that reviewer, not yet on any page; errors checked."""
    contexts, tabs = [], []

    def open_as(username):
        context = browser.new_context(viewport=VIEWPORT, storage_state=login_states[username])
        contexts.append(context)
        page = context.new_page()
        tabs.append(Watched(page))
        return page

    yield open_as
    for context in contexts:
        context.close()
    errors = [error for tab in tabs for error in tab.errors]
    assert not errors, f"uncaught script errors: {errors}"


def timeline_actions(page):
    return page.locator("#timeline > li").evaluate_all("items => items.map((li) => li.dataset.action)")


def timeline_seqs(page):
    return [
        int(seq) for seq in page.locator("#timeline > li").evaluate_all("items => items.map((li) => li.dataset.seq)")
    ]


def test_an_event_made_before_the_socket_connects_is_shown(signed_in, console_server):
    page = signed_in("alice")
    gate = ConsoleSocketGate(page)
    page.goto(f"{console_server.base_url}/")
    run_id = start(page, {"tool": "deploy", "args": {"service": "timeline"}})
    page.goto(f"{console_server.base_url}/runs/{run_id}/")
    request = page.locator("#run-requests li.run-request")
    expect(request).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    request_id = request.get_attribute("data-request-id")

    # The page is drawn again with its socket held back; the request is answered before it connects.
    gate.shut()
    page.reload()
    expect(page.locator('#timeline > li[data-action="request.opened"]')).to_have_count(1)
    assert "request.answered" not in timeline_actions(page)
    answered = call(
        page, "POST", f"/api/v1/requests/{request_id}/answer", {"ok": True, "data": {"env": "staging"}, "comment": "go"}
    )
    assert answered["status"] == 200, answered
    gate.open()

    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    answered_event = page.locator('#timeline > li[data-action="request.answered"]')
    expect(answered_event).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    expect(page.locator('#timeline > li[data-action="run.finished"]')).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    seqs = timeline_seqs(page)
    assert seqs == sorted(set(seqs)), seqs  # each event once, in order


def test_a_long_timeline_shows_its_newest_page_and_loads_the_earlier_events(signed_in, console_server):
    printed = manage(console_env(console_server.db_path), "shell", "--no-imports", "-c", GIVE_A_LONG_TIMELINE)
    run_id = int(printed.split()[-1])
    page = signed_in("alice")
    page.goto(f"{console_server.base_url}/runs/{run_id}/")
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    items = page.locator("#timeline > li")
    expect(items).to_have_count(PAGE_EVENTS)
    expect(items.first).to_contain_text(f"by step-{LONG_TIMELINE - PAGE_EVENTS}")
    expect(items.last).to_contain_text(f"by step-{LONG_TIMELINE - 1}")

    earlier = page.get_by_role("button", name="Show earlier")
    earlier.click()
    expect(items).to_have_count(LONG_TIMELINE, timeout=EVENT_TIMEOUT_MS)
    expect(items.first).to_contain_text("by step-0")
    expect(earlier).to_be_hidden()  # nothing earlier is left
    seqs = timeline_seqs(page)
    assert seqs == sorted(set(seqs)), seqs


def test_a_read_answered_after_the_runs_last_frame_never_takes_its_status_back(signed_in, console_server):
    """The transcript panel re-reads the run when its socket connects. Before: a read made while the run was
    running, answered after the run's "cancelled" frame, put "running" back and hid Retry for good."""
    page = signed_in("alice")
    page.goto(f"{console_server.base_url}/")
    run_id = start(page, {"tool": "crunch", "args": {"steps": 400, "pause": 0.05}})
    retry = page.locator("#run-retry")
    held = []

    def answer_late(route):
        stale = route.fetch()  # the run as it is now: running
        assert stale.json()["status"] == "running", stale.json()
        assert call(page, "POST", f"/api/v1/runs/{run_id}/cancel")["status"] == 202
        expect(retry).to_be_visible(timeout=EVENT_TIMEOUT_MS)  # the cancelled frame has reached the panel
        held.append(route.request)
        route.fulfill(response=stale)

    page.route(f"{console_server.base_url}/api/v1/runs/{run_id}", answer_late)
    with page.expect_request_finished(lambda request: request.url.endswith(f"/api/v1/runs/{run_id}")):
        page.goto(f"{console_server.base_url}/runs/{run_id}/")
    assert held, "the panel's read of the run went by without the late answer"
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => setTimeout(done)))")  # the read applied
    expect(retry).to_be_visible()
    expect(page.locator("#transcript-panel")).to_have_attribute("data-run-status", "cancelled")
