"""MCP elicitation end to end: a real stdio server (the official SDK's FastMCP) asks mid-call.

The server (tests/support/eliciting_server.py) runs as a subprocess started by
toolnexus from an mcp.json written in a temporary directory, the way
TOOLNEXUS_MCP_CONFIG is used in production. Its ``ctx.elicit`` reaches the console
as an ``input`` request tied to the run; the reviewer's answer goes back to the
server, and the server's tool result reaches the run.
"""

import asyncio
import json
import sys
from pathlib import Path

import pytest

from approvals.models import AuditEvent, Request, RequestStatus, Run, RunStatus, TranscriptEntry
from approvals.review import decisions
from approvals.runs import runner, toolkit
from approvals.runs.runner import start_agent_run

pytestmark = pytest.mark.django_db(transaction=True)

SERVER = Path(__file__).resolve().parents[1] / "support" / "eliciting_server.py"


@pytest.fixture
async def trips_server(settings, tmp_path):
    """The console's Toolkit with the eliciting server configured by an mcp.json; closed afterwards."""
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {"mcpServers": {"trips": {"type": "local", "command": [sys.executable, str(SERVER)], "timeout": 20000}}}
        )
    )
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "MCP_CONFIG": str(config)}
    toolkit.reset_toolkit()
    built = await toolkit.get_toolkit()
    assert built.mcp_status() == {"trips": "connected"}
    yield built
    await toolkit.close_toolkit()


async def finished(run_id, timeout=20):
    await asyncio.wait_for(runner.wait_for_run(run_id), timeout)
    return await Run.objects.aget(pk=run_id)


async def test_elicitation_in_an_agent_run_is_an_input_request_and_its_answer_reaches_the_server(
    trips_server, console_events
):
    run = await start_agent_run(agent={"prompt": 'call trips_book_trip with {"traveller": "Ada"}'})
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk, timeout=20)
    request = opened["request"]
    assert request["kind"] == "input"
    assert request["prompt"] == "Where should Ada travel to?"
    assert request["data"]["schema"]["required"] == ["city"]
    assert set(request["data"]["schema"]["properties"]) == {"city", "nights"}
    assert request["tool"] == "trips_book_trip" and request["args"] == {"traveller": "Ada"}
    assert request["form"] is not None  # the dashboard can show a form for it

    await decisions.aresolve_request(opened["request_id"], ok=True, data={"city": "Lisbon", "nights": 3})
    done = await finished(run.pk)

    assert done.status == RunStatus.SUCCEEDED
    assert (
        done.result_output == 'Done. 1 tool call:\n- trips_book_trip: {"result": "booked Ada to Lisbon for 3 nights"}'
    )
    steps = [e async for e in TranscriptEntry.objects.filter(run=run).order_by("seq")]
    asked = [e for e in steps if e.kind == TranscriptEntry.Kind.ASKED]
    assert [(e.tool, e.call_id, e.text, e.request_id) for e in asked] == [
        ("trips_book_trip", "call_1_1", "Where should Ada travel to?", opened["request_id"])
    ]
    stored = await Request.objects.aget(pk=opened["request_id"])
    assert (stored.run_id, stored.resumable, stored.status) == (run.pk, False, RequestStatus.ANSWERED)


async def test_a_declined_elicitation_is_the_servers_decline(trips_server, console_events):
    run = await runner.start_run(tool="trips_book_trip", args={"traveller": "Bo"})
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk, timeout=20)
    await decisions.aresolve_request(opened["request_id"], ok=False, reason="declined")
    done = await finished(run.pk)
    assert done.status == RunStatus.SUCCEEDED
    assert done.result_output == '{"result": "no trip booked for Bo (decline)"}'


async def test_cancelling_the_run_during_an_elicitation_cancels_it_at_the_server(trips_server, console_events):
    run = await start_agent_run(agent={"prompt": 'call trips_book_trip with {"traveller": "Cy"} then call refund'})
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk, timeout=20)
    await runner.cancel_run(run.pk)
    done = await finished(run.pk)

    assert done.status == RunStatus.CANCELLED
    stored = await Request.objects.aget(pk=opened["request_id"])
    assert (stored.status, stored.answer_reason) == (RequestStatus.CANCELLED, "cancelled")
    result = await TranscriptEntry.objects.aget(run=run, kind=TranscriptEntry.Kind.TOOL_RESULT)
    assert result.text == '{"result": "no trip booked for Cy (cancel)"}'  # the server heard "cancel"
    assert await Request.objects.filter(run=run).acount() == 1  # refund never ran


async def test_an_mcp_tool_that_does_not_elicit_just_answers(trips_server):
    run = await start_agent_run(agent={"prompt": 'call trips_echo with {"text": "hi"}'})
    done = await finished(run.pk)
    assert done.result_output == 'Done. 1 tool call:\n- trips_echo: {"result": "echo: hi"}'
