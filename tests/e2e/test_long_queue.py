"""A dashboard in a real browser against a console with 10,000 open requests.

Past about 980 open requests the socket's snapshot passed daphne's 1 MiB frame limit:
daphne refused to send it and the dashboard reconnected forever. At 10,000 the inbox
still opens on one page of rows with the server's totals, pages on, searches and
filters on the server, and a live event changes the counts and the visible rows only. This console has its
own daphne and database (the shared e2e console must not be left with a long queue),
filled with ``tests/support/long_queue.py`` before the server starts.
"""

import json
import re

import pytest
from playwright.sync_api import expect

from tests.support.browser_api import call
from tests.support.live_console import console_env, manage
from tests.support.socket_gate import ConsoleSocketGate

from .conftest import CREATE_USERS, PASSWORD, USERS, VIEWPORT, Watched, login, serve_console

OPEN_REQUESTS = 10_000
INPUTS = OPEN_REQUESTS // 3  # every third is an input request (tests/support/long_queue.py)
SNAPSHOT_BUDGET_BYTES = 256 * 1024
EVENT_TIMEOUT_MS = 5000  # a page frame of 50 cards on a loaded 2-core CI machine

# Keeps every frame the dashboard's socket receives, to weigh the snapshot as daphne sent it.
RECORD_SOCKET_FRAMES_JS = """
window.__framesReceived = [];
const PageSocket = window.WebSocket;
window.WebSocket = class extends PageSocket {
  constructor(...args) {
    super(...args);
    this.addEventListener("message", (message) => window.__framesReceived.push(message.data));
  }
};
"""

FILL_QUEUE = f"""
from tests.support.long_queue import open_requests_in_bulk
open_requests_in_bulk({OPEN_REQUESTS})
"""


@pytest.fixture(scope="module")
def long_queue_console(tmp_path_factory):
    """A real daphne on a fresh database holding 10,000 open requests, and the e2e reviewers."""
    with serve_console(
        tmp_path_factory.mktemp("e2e-long-queue"),
        "e2e-long-queue",
        CREATE_USERS + FILL_QUEUE,
        USERS,
        PASSWORD,
        DJANGO_SUPERUSER_PASSWORD=PASSWORD,
    ) as server:
        yield server


def test_a_dashboard_with_10000_open_requests_shows_the_totals_pages_searches_and_follows_events(
    browser, long_queue_console
):
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        tab = Watched(page)
        page.add_init_script(RECORD_SOCKET_FRAMES_JS)
        login(page, long_queue_console, "alice")

        expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
        page.wait_for_function(
            "() => window.__framesReceived.length > 0"
        )  # a function: an expression string is eval()ed when polled, which the CSP refuses
        first = page.evaluate("window.__framesReceived[0]")
        snapshot = json.loads(first)
        assert snapshot["type"] == "snapshot"
        assert len(first.encode()) < SNAPSHOT_BUDGET_BYTES

        # The totals are the server's, not the rows on the page.
        expect(page.locator("#request-count")).to_have_text(str(OPEN_REQUESTS))
        expect(page.locator("#request-totals")).to_have_text(
            f"{OPEN_REQUESTS} open · approval {OPEN_REQUESTS - INPUTS} · input {INPUTS} · "
            f"{OPEN_REQUESTS} for you to answer"
        )
        rows = page.locator("#requests > .row")
        first_page = len(snapshot["requests"])
        expect(rows).to_have_count(first_page)
        progress = page.locator("#requests-more .progress")
        expect(progress).to_have_text(f"Showing {first_page} of {OPEN_REQUESTS} requests")

        # Load more: the next page, after the first, in the dashboard's order (oldest first).
        page.click("#requests-more button")
        expect(rows).to_have_count(2 * first_page, timeout=EVENT_TIMEOUT_MS)
        expect(progress).to_have_text(f"Showing {2 * first_page} of {OPEN_REQUESTS} requests")
        ids = rows.evaluate_all("rows => rows.map((row) => row.dataset.requestId)")
        assert ids == [f"queued-{index:05d}" for index in range(2 * first_page)]

        # Search and filter are the server's: one match out of 10,000, then every input request counted.
        page.fill("#inbox-q", "A-009876")
        expect(rows).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
        assert rows.evaluate_all("rows => rows.map((row) => row.dataset.requestId)") == ["queued-09876"]
        page.fill("#inbox-q", "")
        page.locator("#filter-more summary").click()
        page.select_option("select[name=kind]", "input")
        expect(progress).to_have_text(f"Showing {first_page} of {INPUTS} matching requests", timeout=EVENT_TIMEOUT_MS)
        assert set(rows.evaluate_all("rows => rows.map((row) => row.dataset.kind)")) == {"input"}
        page.select_option("select[name=kind]", "")
        expect(progress).to_have_text(f"Showing {first_page} of {OPEN_REQUESTS} requests", timeout=EVENT_TIMEOUT_MS)

        # Answering the oldest from its card: the totals follow the event, and nothing reloads.
        oldest = page.locator('#requests > .row[data-request-id="queued-00000"]')
        oldest.click()
        page.locator('#request-detail article.card[data-request-id="queued-00000"] button.primary').click()
        expect(oldest).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
        expect(page.locator("#request-count")).to_have_text(str(OPEN_REQUESTS - 1))
        expect(page).to_have_title(f"({OPEN_REQUESTS - 1}) toolnexus console")
        assert tab.errors == []
    finally:
        context.close()


RUN_REQUESTS = 120  # more than two of a page's 50 cards
GIVE_A_RUN_REQUESTS = f"""
from django.contrib.auth import get_user_model
from approvals.models import ConsoleProcess, Request, Run, RunStatus
owner = ConsoleProcess.objects.get().pk  # the live console's: a run of no living process would be taken over
run = Run.objects.create(tool="refund", status=RunStatus.WAITING, owner=owner,
                         started_by=get_user_model().objects.get(username="alice"))
Request.objects.filter(pk__in=[f"queued-{{i:05d}}" for i in range(1000, 1000 + {RUN_REQUESTS})]).update(run=run)
print(run.pk)
"""


def test_a_run_page_shows_every_open_request_of_its_run_page_after_page(browser, long_queue_console):
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        tab = Watched(page)
        login(page, long_queue_console, "alice")
        run_id = manage(console_env(long_queue_console.db_path), "shell", "--no-imports", "-c", GIVE_A_RUN_REQUESTS)
        page.goto(f"{long_queue_console.base_url}/runs/{run_id.strip()}/")
        cards = page.locator("#requests > article.card")
        expect(cards).to_have_count(RUN_REQUESTS, timeout=EVENT_TIMEOUT_MS)
        ids = cards.evaluate_all("cards => cards.map((card) => card.dataset.requestId)")
        assert ids == [f"queued-{index:05d}" for index in range(1000, 1000 + RUN_REQUESTS)]
        assert tab.errors == []
    finally:
        context.close()


def test_after_a_reconnect_the_inbox_shows_the_rows_it_had_less_those_closed_meanwhile(browser, long_queue_console):
    context = browser.new_context(viewport=VIEWPORT)
    others = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        tab = Watched(page)
        gate = ConsoleSocketGate(page)
        login(page, long_queue_console, "alice")
        status = page.locator("#conn-status")
        expect(status).to_have_attribute("data-state", "live")
        rows = page.locator("#requests > .row")
        expect(rows.first).to_be_visible()
        first_page = rows.count()
        for pages in (2, 3):  # Load more, twice
            page.click("#requests-more button")
            expect(rows).to_have_count(pages * first_page, timeout=EVENT_TIMEOUT_MS)
        shown = rows.evaluate_all("rows => rows.map((row) => row.dataset.requestId)")
        picked = page.locator(f'#requests > .row[data-request-id="{shown[-30]}"]')
        picked.click()
        expect(picked).to_have_attribute("aria-selected", "true")
        picked.scroll_into_view_if_needed()
        count = int(page.locator("#request-count").inner_text())
        total = int(re.search(r"of (\d+)", page.locator("#requests-more .progress").inner_text()).group(1))

        gate.shut()
        expect(status).to_have_attribute("data-state", "offline")
        # Meanwhile bob declines one of the rows the second page brought.
        gone = shown[first_page + 20]
        bob = others.new_page()
        login(bob, long_queue_console, "bob")
        declined = call(bob, "POST", f"/api/v1/requests/{gone}/answer", {"ok": False, "comment": "duplicate"})
        assert declined["status"] == 200, declined
        gate.open()

        # The same rows in the same order, less the one that closed; a page read to its end may add the next.
        kept = [request_id for request_id in shown if request_id != gone]
        expect(status).to_have_attribute("data-state", "live")
        expect(page.locator(f'#requests > .row[data-request-id="{gone}"]')).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
        expect(page.locator("#requests-more button")).to_be_enabled()  # the rows shown before are back
        ids = rows.evaluate_all("rows => rows.map((row) => row.dataset.requestId)")
        assert ids[: len(kept)] == kept, f"{len(ids)} rows after the reconnect, {len(kept)} expected first"
        queue = call(page, "GET", f"/api/v1/requests?status=open&limit={len(ids)}")["body"]["requests"]
        assert ids == [request["id"] for request in queue]  # nothing skipped, nothing out of order
        assert len(ids) < len(kept) + first_page
        expect(picked).to_have_attribute("aria-selected", "true")
        expect(picked).to_be_in_viewport()
        expect(page.locator("#request-count")).to_have_text(str(count - 1))
        expect(page.locator("#requests-more .progress")).to_have_text(f"Showing {len(ids)} of {total - 1} requests")
        assert tab.errors == []
    finally:
        others.close()
        context.close()
