"""A run's page lists each of its requests with its prompt and, once decided, the decision in words,
what was chosen, who, when and the comment; a page at a time. The API's request views carry the same
"decision" (the inbox contract's field)."""

import html
import re

import pytest
from django.test import Client
from toolnexus import Request as WireRequest

from approvals import frames, moments
from approvals.models import Request, RunStatus
from approvals.review import decisions
from approvals.runs import services as runs
from tests.support.dashboard import waiting_request
from tests.support.pages import json_script

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def browser(alice):
    client = Client()
    client.force_login(alice)
    return client


def ask(run_id, request_id, *, kind="approval", prompt=None, data=None, expires_at=None):
    wire = WireRequest(id=request_id, kind=kind, prompt=prompt or f"{request_id}?", data=data, expiresAt=expires_at)
    return decisions.open_request(wire, run_id=run_id, tool="refund", actor="tool:refund")


def listed(content):
    """The run page's request rows: {request id: (status, the row's text with tags dropped, the row's HTML)}."""
    rows = {}
    for block in re.findall(r'<li class="run-request".*?</li>', content, re.DOTALL):
        request_id = html.unescape(re.search(r'data-request-id="([^"]*)"', block).group(1))
        status = re.search(r'data-status="([^"]*)"', block).group(1)
        text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", block)).split())
        rows[request_id] = (status, text, block)
    return rows


def field(block, name):
    found = re.search(rf'class="{name}"[^>]*>(.*?)</', block, re.DOTALL)
    return html.unescape(found.group(1)) if found else None


def test_each_request_shows_its_decision_who_when_and_comment(browser, alice, bob, make_user):
    demo = make_user("demo")
    first = waiting_request("r-approve", starter=demo, prompt="Refund 40 EUR on order A-1?")
    run_id = first.run_id
    ask(run_id, "r-decline", prompt="Refund 900 EUR on order A-2?")
    ask(run_id, "r-expire", expires_at="2030-01-01T18:31:00Z")
    ask(run_id, "r-cancel")
    ask(run_id, "r-input", kind="input", data={"schema": {"type": "object"}})
    ask(run_id, "r-open")
    decisions.resolve_request("r-approve", ok=True, comment="fine", user=bob)
    decisions.resolve_request("r-decline", ok=False, reason="declined", comment="too large", user=bob)
    decisions.expire_request("r-expire", run_timed_out=True)
    decisions.resolve_request("r-input", ok=True, data={"env": "staging"}, user=alice)
    # Cancel run: demo asks, then the console withdraws the run's open requests (as runs/waiting.py does).
    runs.request_cancel_run(run_id, user=demo)
    decisions.resolve_request("r-cancel", ok=False, reason="cancelled", actor="system")

    response = browser.get(f"/runs/{run_id}/")
    assert response.status_code == 200
    rows = listed(response.content.decode())
    assert list(rows) == ["r-approve", "r-decline", "r-expire", "r-cancel", "r-input", "r-open"]  # oldest first
    stored = {r.pk: r for r in Request.objects.all()}

    def when(request_id):
        return moments.iso_time(stored[request_id].answered_at)

    status, text, block = rows["r-approve"]
    assert status == "answered" and "Refund 40 EUR on order A-1?" in text
    assert field(block, "decision-text") == "Approved by bob"
    assert (field(block, "decision-by"), field(block, "decision-comment")) == ("bob", "fine")
    assert f'datetime="{when("r-approve")}"' in block

    _, _, block = rows["r-decline"]
    assert field(block, "decision-text") == "Declined by bob: too large"
    assert (field(block, "decision-by"), field(block, "decision-comment")) == ("bob", "too large")

    _, _, block = rows["r-expire"]
    assert field(block, "decision-text") == f"Expired at {stored['r-expire'].answered_at:%H:%M} UTC, nobody answered"
    assert field(block, "decision-by") == "nobody: the deadline passed" and field(block, "decision-comment") is None

    _, _, block = rows["r-cancel"]
    assert (field(block, "decision-text"), field(block, "decision-by")) == ("Cancelled by demo", "demo")
    assert f'datetime="{when("r-cancel")}"' in block

    _, _, block = rows["r-input"]
    assert field(block, "decision-text") == "Answered by alice"
    assert field(block, "decision-given") == '{"env":"staging"}'  # what was chosen

    status, text, _ = rows["r-open"]
    assert status == "open" and "Waiting for an answer." in text


def test_a_tool_runs_decision_sits_beside_its_result(browser, alice, bob):
    request = waiting_request("r-tool", starter=alice, prompt="Refund 40 EUR?")
    decisions.resolve_request("r-tool", ok=False, reason="declined", comment="too large", user=bob)
    runs.finish_run(request.run_id, RunStatus.SUCCEEDED, "declined/expired: Refund 40 EUR?", True)
    content = browser.get(f"/runs/{request.run_id}/").content.decode()
    assert re.search(r'<pre id="run-result"[^>]*>declined/expired: Refund 40 EUR\?</pre>', content)  # §10, as it was
    assert re.search(r'<dd id="run-decision"[^>]*data-outcome="declined">Declined by bob: too large</dd>', content)


def test_a_run_with_many_requests_lists_them_a_page_at_a_time(browser, alice, monkeypatch):
    monkeypatch.setattr(frames, "RUN_PAGE_REQUESTS", 3)
    run_id = waiting_request("q-0", starter=alice).run_id
    for index in range(1, 7):
        ask(run_id, f"q-{index}")

    seen, pages, url = [], [], f"/runs/{run_id}/"
    while url:
        content = browser.get(url).content.decode()
        rows = listed(content)
        seen += list(rows)
        last_page = re.search(r'id="run-requests"[^>]*data-last-page="(\w+)"', content).group(1)
        later = re.search(r'href="([^"]+)" id="run-requests-later"', content)
        pages.append((len(rows), last_page, "run-requests-first" in content))
        url = html.unescape(later.group(1)) if later else None
    assert seen == [f"q-{index}" for index in range(7)]
    # Only the last page takes a request that opens now; every later page links back to the first.
    assert pages == [(3, "false", False), (3, "false", True), (1, "true", True)]


def test_a_made_up_page_of_requests_says_so_and_shows_the_first(browser, alice):
    run_id = waiting_request("r-1", starter=alice).run_id
    response = browser.get(f"/runs/{run_id}/", {"requests_after": "not-a-cursor"})
    assert response.status_code == 400
    content = response.content.decode()
    assert "That page of requests is not one this console links to; here are the first ones." in content
    assert list(listed(content)) == ["r-1"]


def test_the_api_views_carry_the_decision(browser, alice, bob):
    request = waiting_request("r-api", starter=alice)
    decisions.resolve_request("r-api", ok=False, reason="declined", comment="too large", user=bob)
    listing = browser.get("/api/v1/requests", {"status": "declined"}).json()
    [view] = listing["requests"]
    assert view["decision"] | {"at": None} == {
        "outcome": "declined",
        "decided_by": "person",
        "by": "bob",
        "at": None,
        "comment": "too large",
        "changes": [],
        "response": None,
        "message": None,
        "option": None,
        "text": "Declined by bob: too large",
    }
    run = browser.get(f"/api/v1/runs/{request.run_id}").json()
    assert run["request"]["decision"]["text"] == "Declined by bob: too large"
    # The run page's first paint carries it too, for its script.
    page = browser.get(f"/runs/{request.run_id}/").content.decode()
    assert json_script(page, "initial-run")["request"]["decision"]["text"] == "Declined by bob: too large"
