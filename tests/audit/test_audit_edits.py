"""An approval's edits are in the audit trail's words: the page's Decision column and the CSV's read
"Approved by demo with amount 33 → 4"; the JSON Lines carry the edits as data (``decision.changes``).
The one door records them in the sealed event; an event recorded before that reads as it always did."""

import csv
import io
import json

import pytest
from django.test import AsyncClient, Client
from toolnexus import Request as WireRequest

from approvals import demo_tools, events
from approvals.audit import chain
from approvals.audit import pages as audit
from approvals.models import AuditEvent, Run, RunStatus
from approvals.review import decisions
from approvals.runs import runner

pytestmark = pytest.mark.django_db(transaction=True)

WORDS = "Approved by demo with amount 33 → 4, currency EUR → USD"
CHANGES = [{"field": "amount", "from": 33, "to": 4}, {"field": "currency", "from": "EUR", "to": "USD"}]


@pytest.fixture
def edited_refund(make_user, alice):
    """A refund of 33 EUR (alice's run) that demo approved as 4 USD; returns the request's id."""
    demo = make_user("demo")
    run = Run.objects.create(tool="refund", status=RunStatus.RUNNING, started_by=alice, owner=runner.PROCESS_ID)
    args = {"order": "A-7", "amount": 33, "currency": "EUR"}
    wire = WireRequest(
        id="r-edit", kind="approval", prompt="Refund?", data={**args, "editable": ["amount", "currency"]}
    )
    decisions.open_request(
        wire, run_id=run.pk, tool="refund", args=args, tool_input_schema=demo_tools.refund.input_schema
    )
    decisions.resolve_request("r-edit", ok=True, data={"args": {"amount": 4, "currency": "USD"}}, user=demo)
    return "r-edit"


def test_the_audit_page_says_the_edit_in_the_decision_column(edited_refund, make_user):
    client = Client()
    client.force_login(make_user("reviewer"))
    response = client.get("/audit/", {"action": "request.answered"})
    [row] = response.context["page"].rows
    assert row["decision"]["text"] == WORDS
    assert row["decision"]["changes"] == CHANGES
    assert f'data-outcome="approved">{WORDS}</td>' in response.content.decode()
    assert chain.verify_chain().ok  # recorded in the sealed event, as any payload


async def test_the_exports_say_the_edit_in_words_and_as_data(edited_refund, alice):
    client = AsyncClient()
    await client.aforce_login(alice)

    async def export(fmt):
        response = await client.get(f"/audit/export.{fmt}", {"action": "request.answered"})
        assert response.status_code == 200
        return b"".join([chunk async for chunk in response.streaming_content]).decode()

    [row] = list(csv.DictReader(io.StringIO(await export("csv"))))
    assert row["decision"] == WORDS
    [line] = [json.loads(text) for text in (await export("jsonl")).splitlines()]
    assert line["decision"]["text"] == WORDS
    assert line["decision"]["changes"] == CHANGES
    assert line["payload"]["changes"] == CHANGES


def test_an_event_recorded_before_edits_were_worded_reads_as_before(make_user):
    demo = make_user("demo")
    event = events.record(
        AuditEvent.Action.REQUEST_ANSWERED,
        actor="demo",
        actor_user=demo,
        payload={"ok": True, "reason": None, "comment": "", "data": {"args": {"amount": 4}}},
    )
    row = audit.event_row(AuditEvent.objects.get(pk=event.pk))
    assert row["decision"]["text"] == "Answered by demo"  # no request kind on this bare event: "answered"
    assert row["decision"]["changes"] == []
