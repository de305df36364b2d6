"""An agent run's transcript says what the reviewer decided, in words, beside the §10 result the model got."""

import asyncio

import pytest
from asgiref.sync import sync_to_async

from approvals.models import Run
from approvals.review import decisions
from approvals.runs import runner, transcript
from approvals.runs.runner import start_agent_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _stop_leftover_runs(stop_leftover_runs):
    """Every test here cancels what it left running (the fixture is in tests/conftest.py)."""


async def next_entry(console_events, run_id, kind):
    while True:
        frame = await console_events.next("run.transcript", run_id=run_id)
        if frame["payload"]["kind"] == kind:
            return frame["payload"]


async def test_a_declined_call_reads_declined_by_who_in_the_transcript(console_events, make_user):
    alice = await sync_to_async(make_user)("alice", password=None)
    bob = await sync_to_async(make_user)("bob", password=None)
    run = await start_agent_run(agent={"prompt": 'call refund with {"order": "A-9", "amount": 900}'}, user=alice)
    opened = await console_events.next("request.opened", run_id=run.pk)
    await decisions.aresolve_request(opened["request_id"], ok=False, reason="declined", comment="too large", user=bob)

    live = await next_entry(console_events, run.pk, "answer")  # what the run page's script receives
    assert live["decision"]["text"] == "Declined by bob: too large"
    await asyncio.wait_for(runner.wait_for_run(run.pk), 10)

    entries = await transcript.aentries(run.pk)
    [answer] = [e for e in entries if e["kind"] == "answer"]
    assert answer["decision"] == live["decision"]
    assert (answer["decision"]["outcome"], answer["decision"]["by"]) == ("declined", "bob")
    # The result the model was given keeps §10's prefix, then who and why; only the answer entry carries the decision.
    [result] = [e for e in entries if e["kind"] == "tool_result"]
    assert result["text"] == (
        'declined/expired: Refund 900 EUR on order A-9? (declined by bob: "too large") '
        "Do not make the same call again; follow the reviewer's reason, or ask the user how to go on."
    )
    assert (result["call_id"], result["decision"]) == (answer["call_id"], None)
    assert (await Run.objects.aget(pk=run.pk)).status == "succeeded"


async def test_an_approved_call_reads_approved_by_who(console_events, make_user):
    alice = await sync_to_async(make_user)("alice", password=None)
    run = await start_agent_run(agent={"prompt": 'call refund with {"order": "A-8", "amount": 5}'}, user=alice)
    opened = await console_events.next("request.opened", run_id=run.pk)
    await decisions.aresolve_request(opened["request_id"], ok=True, comment="fine", user=alice)
    await asyncio.wait_for(runner.wait_for_run(run.pk), 10)
    [answer] = [e for e in await transcript.aentries(run.pk) if e["kind"] == "answer"]
    assert answer["decision"]["text"] == "Approved by alice"
    assert answer["decision"]["comment"] == "fine"
