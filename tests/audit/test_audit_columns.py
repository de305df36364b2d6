"""The audit page shows who, what and the decision as columns, and leaves an agent's transcript entries
(``run.transcript``) out unless asked; its CSV and JSON Lines export carry the same."""

import csv
import html
import io
import json
import re

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient, Client
from toolnexus import Request as WireRequest

from approvals.models import AuditEvent
from approvals.review import decisions
from approvals.runs import services as runs
from approvals.runs import transcript
from tests.support.dashboard import waiting_request

pytestmark = pytest.mark.django_db(transaction=True)
TRANSCRIPT = AuditEvent.Action.RUN_TRANSCRIPT


@pytest.fixture
def reviewer(make_user):
    client = Client()
    client.force_login(make_user("reviewer"))
    return client


def decided_trail(alice, bob, demo):
    """Three decided requests of one run, with transcript entries recorded between them."""
    run_id = waiting_request("r-ok", starter=demo, prompt="Refund 40 EUR?").run_id
    transcript.record(run_id, "prompt", text="refund things")
    decisions.resolve_request("r-ok", ok=True, comment="fine", user=alice)
    decisions.open_request(WireRequest(id="r-no", kind="approval", prompt="No?"), run_id=run_id, tool="refund")
    transcript.record(run_id, "thinking", turn=1)
    decisions.resolve_request("r-no", ok=False, reason="declined", comment="too large", user=bob)
    decisions.open_request(WireRequest(id="r-gone", kind="approval", prompt="Gone?"), run_id=run_id, tool="refund")
    transcript.record(run_id, "thinking", turn=2)
    runs.request_cancel_run(run_id, user=demo)
    decisions.resolve_request("r-gone", ok=False, reason="cancelled", actor="system")  # as runs/waiting.py does
    return run_id


def table_rows(content):
    """{seq: {column class or label: cell text}} of the audit table."""
    rows = {}
    for seq, block in re.findall(r'<tr data-seq="(\d+)"[^>]*>(.*?)</tr>', content, re.DOTALL):
        cells = {}
        for label, cell in re.findall(r'<td[^>]*data-label="([^"]+)"[^>]*>(.*?)</td>', block, re.DOTALL):
            cells[html.unescape(label)] = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", cell)).split())
        cells["action"] = re.search(
            r'data-action="([^"]+)"', re.search(rf'<tr data-seq="{seq}"[^>]*>', content).group(0)
        ).group(1)
        rows[int(seq)] = cells
    return rows


def test_transcript_entries_are_hidden_until_asked_for(reviewer, alice, bob, make_user):
    decided_trail(alice, bob, make_user("demo"))
    assert AuditEvent.objects.filter(action=TRANSCRIPT).count() == 3

    response = reviewer.get("/audit/")
    content = response.content.decode()
    shown = table_rows(content)
    assert shown and TRANSCRIPT not in {row["action"] for row in shown.values()}
    assert [r["seq"] for r in response.context["page"].rows] == list(
        AuditEvent.objects.exclude(action=TRANSCRIPT).order_by("-id").values_list("id", flat=True)
    )
    toggle = re.search(r'<a href="([^"]+)" id="transcript-toggle">Show transcript entries</a>', content)
    assert toggle and html.unescape(toggle.group(1)) == "/audit/?transcript=1"
    assert 'name="transcript" value="1" id="show-transcript">' in content  # the filter form's box, unticked

    content = reviewer.get("/audit/", {"transcript": "1"}).content.decode()
    assert sum(row["action"] == TRANSCRIPT for row in table_rows(content).values()) == 3
    assert 'id="show-transcript" checked' in content
    hide = re.search(r'<a href="([^"]+)" id="transcript-toggle">Hide transcript entries</a>', content)
    assert html.unescape(hide.group(1)) == "/audit/"

    # Asking for that very action shows them without the box.
    only = reviewer.get("/audit/", {"action": TRANSCRIPT}).context["page"].rows
    assert [row["action"] for row in only] == [TRANSCRIPT] * 3


def test_who_what_and_decision_are_columns(reviewer, alice, bob, make_user):
    run_id = decided_trail(alice, bob, make_user("demo"))
    rows = table_rows(reviewer.get("/audit/").content.decode())
    by_action = {}
    for row in rows.values():
        by_action.setdefault(row["action"], []).append(row)

    [approved] = by_action["request.answered"]
    assert (approved["Who"], approved["Decision"]) == ("alice", "Approved by alice")
    assert approved["What"] == f"request.answered refund: approval request r-ok in run {run_id}"
    [declined] = by_action["request.declined"]
    assert (declined["Who"], declined["Decision"]) == ("bob", "Declined by bob: too large")
    [cancelled] = by_action["request.cancelled"]
    assert (cancelled["Who"], cancelled["Decision"]) == ("demo", "Cancelled by demo")  # the console did it for demo
    [started] = by_action["request.opened"][:1]
    assert started["Decision"] == ""


def test_paging_skips_hidden_rows_and_keeps_the_choice(reviewer, alice, bob, make_user):
    decided_trail(alice, bob, make_user("demo"))
    decided = list(AuditEvent.objects.exclude(action=TRANSCRIPT).order_by("-id").values_list("id", flat=True))
    everything = list(AuditEvent.objects.order_by("-id").values_list("id", flat=True))
    for query, expected in (({"limit": 2}, decided), ({"limit": 2, "transcript": "1"}, everything)):
        seen = []
        while True:
            response = reviewer.get("/audit/", query)
            page = response.context["page"]
            seen += [row["seq"] for row in page.rows]
            if page.older is None:
                break
            assert ("transcript=1" in response.context["older_url"]) == ("transcript" in query)
            query = {**query, "before": page.older}
        assert seen == expected


async def test_the_csv_and_json_lines_carry_who_what_and_decision(alice, bob, make_user):
    run_id = await sync_to_async(decided_trail)(alice, bob, await sync_to_async(make_user)("demo"))
    client = AsyncClient()
    await client.aforce_login(alice)

    async def export(fmt, **query):
        response = await client.get(f"/audit/export.{fmt}", query)
        assert response.status_code == 200
        return b"".join([chunk async for chunk in response.streaming_content]).decode()

    table = list(csv.DictReader(io.StringIO(await export("csv"))))
    assert list(table[0])[:6] == ["seq", "at", "actor", "action", "what", "decision"]
    assert TRANSCRIPT not in {row["action"] for row in table}  # the export is the page's view
    declined = next(row for row in table if row["action"] == "request.declined")
    assert (declined["actor"], declined["what"], declined["decision"]) == (
        "bob",
        f"refund: approval request r-no in run {run_id}",
        "Declined by bob: too large",
    )
    cancelled = next(row for row in table if row["action"] == "request.cancelled")
    assert cancelled["decision"] == "Cancelled by demo"
    shown = csv.DictReader(io.StringIO(await export("csv", transcript="1")))
    assert sum(row["action"] == TRANSCRIPT for row in shown) == 3

    lines = [json.loads(line) for line in (await export("jsonl")).splitlines()]
    approved = next(line for line in lines if line["action"] == "request.answered")
    assert approved["decision"] | {"at": None} == {
        "outcome": "approved",
        "by": "alice",
        "at": None,
        "comment": "fine",
        "changes": [],
        "response": None,
        "message": None,
        "option": None,
        "text": "Approved by alice",
        "decided_by": "person",  # in the vocabulary the API and the metrics use
    }
    assert approved["decision"]["at"] == approved["at"]
    undecided = [line for line in lines if line["action"] in ("run.started", "request.opened", "run.cancel_requested")]
    assert undecided and all(line["decision"] is None for line in undecided)
