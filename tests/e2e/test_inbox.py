"""The reviewer's inbox with more than 1,000 open requests, in a real browser against a real daphne.

Search, filters, sort and grouping are held in the URL (shareable, kept over a reload) and
answered by the server; a new request matching the filter shows as "1 new request — show"
instead of reshuffling the list; and a bulk decline of every request matching a filter asks
first (how many, which tools, who is skipped and why), then reports what was answered,
skipped and already closed, each answer with its own audit event.

This console has its own daphne and database, filled before the server starts
(``tests/support/long_queue.py``): 1,000 refunds from billing-bot, 40 deploys and 15 wires
from ops-bot (only bob may answer a wire), and 12 identical key rotations.
"""

import json
import re

import pytest
from playwright.sync_api import expect

from tests.support.browser_api import call
from tests.support.live_console import console_env, manage

from .conftest import CREATE_USERS, PASSWORD, USERS, VIEWPORT, Watched, login, serve_console

EVENT_TIMEOUT_MS = 5000  # a list read or a bulk answer of 55 on a loaded 2-core CI machine
QUEUE = 1000
DEPLOYS, WIRES, ROTATIONS = 40, 15, 12
POLICIES = [{"name": "wires are bob's", "tool": "wire", "users": ["bob"]}]
FILL = f"""
from approvals.models import Request
from tests.support.long_queue import open_requests_in_bulk
open_requests_in_bulk({QUEUE})
open_requests_in_bulk({DEPLOYS}, prefix="deploy")
Request.objects.filter(id__startswith="deploy-").update(host="ops-bot", tool="deploy", args={{"service": "web"}})
open_requests_in_bulk({WIRES}, prefix="wire")
Request.objects.filter(id__startswith="wire-").update(host="ops-bot", tool="wire", args={{"amount": 900}})
open_requests_in_bulk({ROTATIONS}, prefix="rotate")
Request.objects.filter(id__startswith="rotate-").update(
    host="keys-bot", tool="rotate", kind="approval", args={{"key": "api"}}, prompt="Rotate the API key?", data={{}}
)
"""


@pytest.fixture(scope="module")
def inbox_console(tmp_path_factory):
    with serve_console(
        tmp_path_factory.mktemp("e2e-inbox"),
        "e2e-inbox",
        CREATE_USERS + FILL,
        USERS,
        PASSWORD,
        DJANGO_SUPERUSER_PASSWORD=PASSWORD,
        CONSOLE_POLICIES=json.dumps(POLICIES),
    ) as server:
        yield server


@pytest.fixture
def inbox(browser, inbox_console):
    """``inbox("alice")``: a fresh signed-in dashboard on the 1,000-request console."""
    contexts, tabs = [], []

    def open_as(username="alice"):
        context = browser.new_context(viewport=VIEWPORT)
        contexts.append(context)
        page = context.new_page()
        tabs.append(Watched(page))
        login(page, inbox_console, username)
        expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
        return page

    yield open_as
    for context in contexts:
        context.close()
    errors = [error for tab in tabs for error in tab.errors]
    assert not errors, f"uncaught script errors: {errors}"


def rows(page):
    return page.locator("#requests > .row")


def row_ids(page):
    return rows(page).evaluate_all("rows => rows.map((row) => row.dataset.requestId)")


def progress(page):
    return page.locator("#requests-more .progress")


def api_count(page, server, query):
    response = page.context.request.get(f"{server.base_url}/api/v1/requests?{query}&limit=1")
    assert response.ok, response.text()
    return response.json()["count"]


def test_search_filters_sort_and_group_live_in_the_url_and_survive_a_reload(inbox, inbox_console):
    page = inbox("alice")
    total = QUEUE + DEPLOYS + WIRES + ROTATIONS
    expect(page.locator("#request-totals")).to_contain_text(f"{total} open")
    expect(progress(page)).to_have_text(f"Showing 50 of {total} requests")

    # Server-side search: over prompt, tool, arguments and host.
    page.fill("#inbox-q", "A-000123")
    expect(page).to_have_url(re.compile(r"\?q=A-000123$"))
    expect(rows(page)).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    assert row_ids(page) == ["queued-00123"]
    expect(progress(page)).to_be_hidden()
    page.fill("#inbox-q", "")
    expect(page).to_have_url(f"{inbox_console.base_url}/")

    # Filters: kind, host, "I may answer" (the wires are bob's); the count is the server's.
    page.locator("#filter-more summary").click()
    page.select_option("select[name=kind]", "input")
    expect(page).to_have_url(re.compile(r"\?kind=input$"))
    inputs = api_count(page, inbox_console, "status=open&kind=input")
    expect(progress(page)).to_have_text(f"Showing 50 of {inputs} matching requests", timeout=EVENT_TIMEOUT_MS)
    assert set(rows(page).evaluate_all("rows => rows.map((row) => row.dataset.kind)")) == {"input"}
    page.select_option("select[name=kind]", "")
    page.fill("input[name=host]", "ops-bot")
    page.check("input[name=may_answer]")
    expect(page).to_have_url(re.compile(r"\?host=ops-bot&may_answer=1$"), timeout=EVENT_TIMEOUT_MS)
    expect(rows(page)).to_have_count(DEPLOYS, timeout=EVENT_TIMEOUT_MS)
    assert all(row.startswith("deploy-") for row in row_ids(page))
    page.uncheck("input[name=may_answer]")
    expect(progress(page)).to_have_text(f"Showing 50 of {DEPLOYS + WIRES} matching requests", timeout=EVENT_TIMEOUT_MS)
    expect(page.locator("#filter-more .filter-count")).to_have_text("(1)")

    # Sort: newest first puts the last rotation on top.
    page.fill("input[name=host]", "")
    page.select_option("#inbox-sort", "newest")
    expect(page).to_have_url(re.compile(r"\?sort=newest$"), timeout=EVENT_TIMEOUT_MS)
    expect(rows(page).first).to_have_attribute("data-request-id", f"rotate-{ROTATIONS - 1:05d}")

    # Group by identical tool and arguments: the twelve rotations are one row, "12 alike".
    page.select_option("#inbox-sort", "oldest")
    page.fill("#inbox-q", "Rotate the API key")
    page.select_option("#inbox-group", "alike")
    expect(page).to_have_url(re.compile(r"\?q=Rotate\+the\+API\+key&group=alike$"), timeout=EVENT_TIMEOUT_MS)
    expect(rows(page)).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    expect(rows(page).first.locator(".alike")).to_have_text(f"{ROTATIONS} alike")
    rows(page).first.click()
    expect(page.locator("#request-detail .group-note")).to_contain_text(f"{ROTATIONS} alike")
    picked = rows(page).first.get_attribute("data-request-id")
    expect(page).to_have_url(re.compile(rf"&request={picked}$"))

    # The whole view is in the URL: a reload (or a colleague with the link) sees the same.
    page.reload()
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    expect(page.locator("#inbox-q")).to_have_value("Rotate the API key")
    expect(page.locator("#inbox-group")).to_have_value("alike")
    expect(rows(page)).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    expect(rows(page).first.locator(".alike")).to_have_text(f"{ROTATIONS} alike")
    expect(page.locator("#request-detail article.card")).to_have_attribute("data-request-id", picked)


def test_a_new_request_matching_the_filter_shows_as_new_instead_of_reshuffling(inbox, inbox_console):
    page = inbox("alice")
    page.goto(f"{inbox_console.base_url}/?host=late-bot&sort=newest")
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    expect(page.locator("#requests-empty")).to_be_visible(timeout=EVENT_TIMEOUT_MS)
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")

    def open_request(request_id, host):
        body = {"id": request_id, "kind": "approval", "prompt": f"Approve {request_id}?", "host": host}
        answer = page.context.request.post(
            f"{inbox_console.base_url}/api/v1/requests", data=body, headers={"X-CSRFToken": csrf}
        )
        assert answer.status == 201, answer.text()

    open_request("late-1", "late-bot")
    open_request("other-1", "other-bot")  # does not match: not counted
    fresh = page.locator("#inbox-new")
    expect(fresh).to_have_text("1 new request — show", timeout=EVENT_TIMEOUT_MS)
    expect(rows(page)).to_have_count(0)
    fresh.click()
    expect(rows(page)).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    assert row_ids(page) == ["late-1"]
    expect(fresh).to_be_hidden()
    # The counts in the header still follow every event.
    expect(page.locator("#request-totals")).to_contain_text(f"{QUEUE + DEPLOYS + WIRES + ROTATIONS + 2} open")
    for request_id in ("late-1", "other-1"):
        page.context.request.post(
            f"{inbox_console.base_url}/api/v1/requests/{request_id}/cancel", headers={"X-CSRFToken": csrf}
        )


def test_a_filtered_count_follows_a_request_closed_beyond_the_loaded_page(inbox, inbox_console):
    page = inbox("alice")
    other = inbox("bob")
    open_before = api_count(page, inbox_console, "status=open")
    page.fill("#inbox-q", "A-0001")  # orders A-000100 to A-000199: 100 matching, 50 loaded
    expect(progress(page)).to_have_text("Showing 50 of 100 matching requests", timeout=EVENT_TIMEOUT_MS)
    assert "queued-00190" not in row_ids(page)
    answered = call(other, "POST", "/api/v1/requests/queued-00190/answer", {"ok": False, "reason": "declined"})
    assert answered["status"] == 200, answered
    expect(progress(page)).to_have_text("Showing 50 of 99 matching requests", timeout=EVENT_TIMEOUT_MS)
    # The server agrees, and a request closed outside the filter changes nothing.
    assert api_count(page, inbox_console, "status=open&q=A-0001") == 99
    answered = call(other, "POST", "/api/v1/requests/queued-00900/answer", {"ok": False, "reason": "declined"})
    assert answered["status"] == 200, answered
    expect(page.locator("#request-totals")).to_contain_text(f"{open_before - 2} open")
    expect(progress(page)).to_have_text("Showing 50 of 99 matching requests")


# Keeps every IntersectionObserver's callback and targets, so a test can hand one a late entry.
KEEP_OBSERVERS = """
window.keptObservers = [];
const Native = window.IntersectionObserver;
window.IntersectionObserver = class extends Native {
  constructor(callback, options) {
    super(callback, options);
    this.kept = { callback, observer: this, targets: [] };
    window.keptObservers.push(this.kept);
  }
  observe(target) { this.kept.targets.push(target); super.observe(target); }
};
"""

# Hands the list end's observer the entry it may deliver late: "in view", from a layout already gone.
STALE_IN_VIEW = """() => {
  const box = document.getElementById("requests-more");
  const kept = window.keptObservers.find((kept) => kept.targets.includes(box));
  kept.callback([{ isIntersecting: true, target: box }], kept.observer);
  return box.querySelector(".progress").textContent;
}"""


def test_a_late_in_view_report_loads_nothing_once_the_list_end_is_out_of_view(inbox, inbox_console):
    # An observer's entries arrive as a task after the layout they describe. The filtered list is read after
    # the page's first layout, in which the empty list showed its end: that report, arriving once 50 rows
    # have pushed the end away, read a page nobody scrolled to.
    page = inbox("alice")
    page.add_init_script(KEEP_OBSERVERS)
    page.goto(f"{inbox_console.base_url}/?host=ops-bot")
    expect(rows(page)).to_have_count(50, timeout=EVENT_TIMEOUT_MS)
    expect(progress(page)).to_have_text(f"Showing 50 of {DEPLOYS + WIRES} matching requests")
    assert page.evaluate(STALE_IN_VIEW) == f"Showing 50 of {DEPLOYS + WIRES} matching requests"
    expect(rows(page)).to_have_count(50)
    # Scrolling to the end still reads the next page.
    page.evaluate("document.getElementById('requests-more').scrollIntoView()")
    expect(rows(page)).to_have_count(DEPLOYS + WIRES, timeout=EVENT_TIMEOUT_MS)
    expect(progress(page)).to_have_text(f"Showing {DEPLOYS + WIRES} of {DEPLOYS + WIRES} matching requests")


def test_bulk_decline_of_all_matching_a_filter_asks_first_skips_who_may_not_and_audits_each(inbox, inbox_console):
    page = inbox("alice")
    bob = inbox("bob")
    bob.goto(f"{inbox_console.base_url}/?host=ops-bot")
    expect(rows(bob)).to_have_count(50, timeout=EVENT_TIMEOUT_MS)
    bob.locator('#requests > .row[data-request-id="deploy-00003"]').click()
    bob.locator("#request-detail textarea.comment").fill("bob was about to approve this one")

    page.goto(f"{inbox_console.base_url}/?host=ops-bot")
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    matching = DEPLOYS + WIRES
    expect(rows(page)).to_have_count(50, timeout=EVENT_TIMEOUT_MS)  # the first page of 55
    expect(progress(page)).to_have_text(f"Showing 50 of {matching} matching requests")

    rows(page).first.locator(".row-select").check()
    expect(page.locator("#bulk-count")).to_have_text("1 selected")
    page.locator("#bulk-all").click()  # "Select all 55 matching this filter"
    expect(page.locator("#bulk-count")).to_have_text(f"All {matching} matching this filter")
    page.fill("#bulk-comment", "ops freeze: nothing ships today")
    page.click("#bulk-decline")

    # The dry run: how many, which tools, and who would be skipped and why. Nothing is answered yet.
    confirm = page.locator("#bulk-confirm")
    expect(confirm).to_be_visible(timeout=EVENT_TIMEOUT_MS)
    expect(confirm.locator(".bulk-question")).to_have_text(f"Decline {DEPLOYS} requests? Tools: deploy {DEPLOYS}.")
    expect(confirm).to_contain_text("Filter: host ops-bot")
    expect(confirm).to_contain_text("“ops freeze: nothing ships today”")
    expect(confirm).to_contain_text(f"{WIRES} requests will be skipped:")
    expect(confirm.locator(".bulk-skipped li").first).to_contain_text("Only bob may answer this")
    assert api_count(page, inbox_console, "status=open&host=ops-bot") == matching

    confirm.get_by_role("button", name=f"Decline {DEPLOYS}").click()
    result = page.locator("#bulk-result")
    expect(result.locator(".bulk-summary")).to_have_text(
        f"Declined {DEPLOYS} · {WIRES} skipped · 0 already closed", timeout=EVENT_TIMEOUT_MS
    )
    # Who may not answer which is said request by request: the wires are bob's.
    expect(result.locator(".bulk-skipped li")).to_have_count(WIRES)
    expect(result.locator(".bulk-skipped li").first).to_contain_text("Only bob may answer this")
    # My own answers leave my list; the wires stay, and the count follows. The shorter list reads the wires
    # past its first page once its end is in view (the confirmation may have scrolled it there already).
    expect(page.locator('#requests > .row[data-request-id^="deploy-"]')).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    page.evaluate("document.getElementById('requests-more').scrollIntoView()")
    expect(rows(page)).to_have_count(WIRES, timeout=EVENT_TIMEOUT_MS)
    expect(progress(page)).to_have_text(f"Showing {WIRES} of {WIRES} matching requests")
    assert all(row.startswith("wire-") for row in row_ids(page))
    assert api_count(page, inbox_console, "status=open&host=ops-bot") == WIRES
    assert api_count(page, inbox_console, "status=declined&host=ops-bot") == DEPLOYS

    # Each declined request has its own audit event, by alice, with the one comment.
    export = page.context.request.get(
        f"{inbox_console.base_url}/audit/export.jsonl?action=request.declined&tool=deploy"
    )
    events = [json.loads(line) for line in export.text().splitlines()]
    assert sorted(event["request"] for event in events) == [f"deploy-{i:05d}" for i in range(DEPLOYS)]
    assert {event["actor"] for event in events} == {"alice"}

    # bob, who had one of them open with a comment typed, sees who declined it and keeps his text.
    bobs = bob.locator("#request-detail article.card")
    expect(bobs).to_have_class(re.compile(r"\bclosed\b"), timeout=EVENT_TIMEOUT_MS)
    expect(bobs.locator(".tombstone .card-error")).to_contain_text("Declined by alice: ops freeze: nothing ships today")
    expect(bobs.locator("textarea.comment")).to_have_value("bob was about to approve this one")


def test_a_group_of_alike_requests_is_approved_in_one_bulk_answer(inbox, inbox_console):
    page = inbox("alice")
    page.goto(f"{inbox_console.base_url}/?group=alike&tool=rotate")
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    expect(rows(page)).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    rows(page).first.click()
    page.locator("#request-detail").get_by_role("button", name=f"Select all {ROTATIONS} for a bulk answer").click()
    expect(page.locator("#bulk-count")).to_have_text(f"{ROTATIONS} selected")
    page.click("#bulk-approve")
    confirm = page.locator("#bulk-confirm")
    expect(confirm.locator(".bulk-question")).to_contain_text(
        f"Approve {ROTATIONS} requests? Tools: rotate {ROTATIONS}."
    )
    expect(confirm).to_contain_text("approved with its own arguments")
    confirm.get_by_role("button", name=f"Approve {ROTATIONS}").click()
    expect(page.locator("#bulk-result .bulk-summary")).to_have_text(
        f"Approved {ROTATIONS} · 0 skipped · 0 already closed", timeout=EVENT_TIMEOUT_MS
    )
    expect(page.locator("#toasts .toast").last).to_contain_text(f"Approved {ROTATIONS}")
    assert api_count(page, inbox_console, "status=answered&tool=rotate") == ROTATIONS


GIVE_A_RUN_THREE = """
from django.contrib.auth import get_user_model
from approvals.models import ConsoleProcess, Request, Run, RunStatus
owner = ConsoleProcess.objects.get().pk  # the live console's: a run of no living process would be taken over
run = Run.objects.create(tool="refund", status=RunStatus.WAITING, owner=owner,
                         started_by=get_user_model().objects.get(username="bob"))
Request.objects.filter(pk__in=["queued-00500", "queued-00501", "queued-00502"]).update(run=run)
print(run.pk)
"""


def test_grouping_by_run_shows_a_runs_requests_as_one_row(inbox, inbox_console):
    run_id = manage(console_env(inbox_console.db_path), "shell", "--no-imports", "-c", GIVE_A_RUN_THREE).strip()
    page = inbox("alice")
    page.goto(f"{inbox_console.base_url}/?q=A-00050&group=run")
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    grouped = page.locator(f'#requests > .row[data-run="{run_id}"]')
    expect(grouped).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    expect(grouped.locator(".alike")).to_have_text("3 in this run")
    expect(grouped.locator(".starter")).to_have_text("by bob")
    grouped.click()
    expect(page.locator("#request-detail .group-note")).to_contain_text("3 in this run")
    expect(page.locator("#request-detail article.card a[href^='/runs/']")).to_have_attribute("href", f"/runs/{run_id}/")


def test_a_bulk_confirm_answers_what_it_named_not_what_arrived_meanwhile(inbox, inbox_console):
    # The approvals among the refunds of orders A-000900 to A-000999: more than a page, so "Select all" is offered.
    page = inbox("alice")
    other = inbox("bob")
    page.goto(f"{inbox_console.base_url}/?q=A-0009&kind=approval")
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    matching = api_count(page, inbox_console, "status=open&q=A-0009&kind=approval")
    expect(progress(page)).to_have_text(f"Showing 50 of {matching} matching requests", timeout=EVENT_TIMEOUT_MS)
    rows(page).first.locator(".row-select").check()
    page.locator("#bulk-all").click()
    page.click("#bulk-decline")
    confirm = page.locator("#bulk-confirm")
    expect(confirm.locator(".bulk-question")).to_have_text(
        f"Decline {matching} requests? Tools: refund {matching}.", timeout=EVENT_TIMEOUT_MS
    )

    # While the confirmation is open, a request the filter matches arrives.
    late = {
        "id": "late-refund",
        "kind": "approval",
        "prompt": "Refund every order from A-0009 on?",
        "host": "later-bot",
    }
    opened = call(other, "POST", "/api/v1/requests", late)
    assert opened["status"] == 201, opened
    assert api_count(page, inbox_console, "status=open&q=A-0009&kind=approval") == matching + 1

    confirm.get_by_role("button", name=f"Decline {matching}").click()
    expect(page.locator("#bulk-result .bulk-summary")).to_have_text(
        f"Declined {matching} · 0 skipped · 0 already closed", timeout=2 * EVENT_TIMEOUT_MS
    )
    assert api_count(page, inbox_console, "status=open&host=later-bot") == 1
    assert api_count(page, inbox_console, "status=open&q=A-0009&kind=approval") == 1
    assert call(other, "POST", "/api/v1/requests/late-refund/cancel")["status"] == 200


def test_a_bulk_yes_confirmation_lists_the_requests_that_need_their_own_answer(inbox, inbox_console):
    # Orders A-000020 to A-000029: six approvals and four input forms.
    page = inbox("alice")
    page.goto(f"{inbox_console.base_url}/?q=A-00002&host=billing-bot")
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    expect(rows(page)).to_have_count(10, timeout=EVENT_TIMEOUT_MS)
    page.locator("#select-shown").check()
    expect(page.locator("#bulk-count")).to_have_text("10 selected")
    page.click("#bulk-approve")
    confirm = page.locator("#bulk-confirm")
    expect(confirm.locator(".bulk-question")).to_have_text(
        "Approve 6 requests? Tools: refund 6.", timeout=EVENT_TIMEOUT_MS
    )
    expect(confirm).to_contain_text("4 requests will be skipped:")
    skipped = confirm.locator(".bulk-skipped li")
    expect(skipped).to_have_count(4)
    expect(skipped.first).to_contain_text("this input request needs its own answer: open it and fill in its form")

    confirm.get_by_role("button", name="Approve 6").click()
    expect(page.locator("#bulk-result .bulk-summary")).to_have_text(
        "Approved 6 · 4 skipped · 0 already closed", timeout=EVENT_TIMEOUT_MS
    )
    assert api_count(page, inbox_console, "status=open&q=A-00002&host=billing-bot") == 4


def test_a_view_of_resolved_requests_counts_a_request_new_once_whatever_frames_follow_it(inbox, inbox_console):
    """A request resolved into a view of resolved requests is one new request, though its outcome report (issue
    36) sends its frame again; the header's open count says when the last frame has arrived."""
    page = inbox("alice")
    page.goto(f"{inbox_console.base_url}/?status=resolved&host=report-bot")
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    totals = page.locator("#request-totals")
    expect(totals).to_contain_text(" open", timeout=EVENT_TIMEOUT_MS)
    open_before = api_count(page, inbox_console, "status=open")
    for request_id in ("reported-1", "reported-2"):
        opened = call(
            page,
            "POST",
            "/api/v1/requests",
            {"id": request_id, "kind": "approval", "prompt": "Go?", "host": "report-bot"},
        )
        assert opened["status"] == 201, opened
    expect(totals).to_contain_text(f"{open_before + 2} open", timeout=EVENT_TIMEOUT_MS)
    assert call(page, "POST", "/api/v1/requests/reported-1/answer", {"ok": True})["status"] == 200
    reported = call(page, "POST", "/api/v1/requests/reported-1/outcome", {"ok": True, "message": "done"})
    assert reported["status"] == 200, reported
    assert call(page, "POST", "/api/v1/requests/reported-2/answer", {"ok": True})["status"] == 200
    expect(totals).to_contain_text(f"{open_before} open", timeout=EVENT_TIMEOUT_MS)  # every frame is in
    expect(page.locator("#inbox-new")).to_have_text("2 new requests — show")
