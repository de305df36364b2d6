"""Edits the model is told of (issue 36, part 3): a reviewer approves with changed arguments.

The retry gets the request's arguments with the approved edits over them (the tool's own parameters hold
them, not only ``answer.data["args"]``), and the result the model reads ends with what changed, in tool runs
and agent runs, and after a restart. Each agent test reads the exact messages the scripted model is sent next
(a recording wrapper around the real model), the transcript's tool result, and the run's answer.
"""

import asyncio
import copy

import pytest
from asgiref.sync import sync_to_async
from toolnexus import Answer, define_tool, pending

from approvals.models import AuditEvent, Request, Run, RunStatus, TranscriptEntry
from approvals.review import decisions
from approvals.runs import runner, waiting
from approvals.runs.runner import start_agent_run
from approvals.runs.supervisor import supervisors_by_loop

pytestmark = pytest.mark.django_db(transaction=True)
Kind = TranscriptEntry.Kind

NOTICE = " (a reviewer changed amount 500 → 50 before approving; the call ran with the changed values)"


@pytest.fixture(autouse=True)
def _stop_leftover_runs(stop_leftover_runs):
    """Every test here cancels what it left running (the fixture is in tests/conftest.py)."""


def payout_tool(received):
    """Asks to pay ``amount`` (editable) on its first call; on the retry pays what its own parameters say,
    never reading ``answer.data``. Records every call's arguments and answer data."""

    async def execute(order: str, amount: int, currency: str = "EUR", ctx=None):
        answer = getattr(ctx, "answer", None)
        received.append(({"order": order, "amount": amount, "currency": currency}, getattr(answer, "data", None)))
        if answer is None:
            return pending(
                kind="approval", prompt=f"Pay {amount} {currency} on {order}?", data={"editable": ["amount"]}
            )
        return f"paid {amount} {currency} on {order}"

    return define_tool(execute, name="payout")


async def finished(run_id, timeout=15):
    await asyncio.wait_for(runner.wait_for_run(run_id), timeout)
    return await Run.objects.aget(pk=run_id)


async def blocked(console_events, run_id):
    """The next time the agent loop blocks on a reviewer (its ``waiting`` transcript entry)."""
    while True:
        frame = await console_events.next(AuditEvent.Action.RUN_TRANSCRIPT, run_id=run_id)
        if frame["payload"]["kind"] == "waiting":
            return frame["payload"]


def tool_results_read(messages):
    """The tool results in the messages the model was sent, by call id (OpenAI wire shape)."""
    return {m["tool_call_id"]: m["content"] for m in messages if m.get("role") == "tool"}


async def transcript_results(run_id):
    return {
        e.call_id: e.text
        async for e in TranscriptEntry.objects.filter(run_id=run_id, kind=Kind.TOOL_RESULT).order_by("seq")
    }


STOPPED_OWNER = "a-console-that-stopped"


async def stop_the_process(monkeypatch, *run_ids):
    """The old console process goes away: its tasks vanish and withdraw nothing; its rows stay as they are."""

    async def withdraw_nothing(request_id, reason):
        return Answer(id=request_id, ok=False, reason=reason)

    sup = runner.supervisor()
    with monkeypatch.context() as patch:
        patch.setattr(waiting, "_withdraw", withdraw_nothing)
        tasks = [sup.tasks[run_id] for run_id in run_ids] + sup.background_tasks()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    supervisors_by_loop.pop(asyncio.get_running_loop())
    await Run.objects.filter(pk__in=run_ids).aupdate(owner=STOPPED_OWNER)


EDITED = {"args": {"amount": 50}, "comment": "half is plenty"}
ASKED = {"order": "A-7", "amount": 500, "currency": "EUR"}
MERGED = {"order": "A-7", "amount": 50, "currency": "EUR"}


# -- tool runs --------------------------------------------------------------------------------------


async def test_a_tool_run_approved_with_an_edit_retries_with_the_merged_args_and_says_what_changed(
    extra_tools, console_events, make_user
):
    received = []
    extra_tools(payout_tool(received))
    rita = await sync_to_async(make_user)("rita", password=None)
    run = await runner.start_run(tool="payout", args={"order": "A-7", "amount": 500})
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk)
    await decisions.aresolve_request(opened["request_id"], ok=True, data=copy.deepcopy(EDITED), user=rita)
    done = await finished(run.pk)

    assert received == [(ASKED, None), (MERGED, EDITED)]  # answer.data itself is unchanged
    assert (done.status, done.result_output) == (RunStatus.SUCCEEDED, "paid 50 EUR on A-7" + NOTICE)


async def test_a_tool_run_approved_as_asked_reads_no_notice(extra_tools, console_events):
    received = []
    extra_tools(payout_tool(received))
    run = await runner.start_run(tool="payout", args={"order": "A-7", "amount": 500})
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk)
    await decisions.aresolve_request(opened["request_id"], ok=True, data={"args": {"amount": 500}})
    done = await finished(run.pk)

    assert received[1] == (ASKED, {"args": {"amount": 500}})
    assert done.result_output == "paid 500 EUR on A-7"


async def test_a_tool_run_adopted_after_a_restart_keeps_the_merged_args_and_the_notice(extra_tools, console_events):
    received = []
    extra_tools(payout_tool(received))
    run = await runner.start_run(tool="payout", args={"order": "A-7", "amount": 500})
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk)
    await stop_the_process(pytest.MonkeyPatch(), run.pk)
    await runner.ensure_started()  # the next process adopts the run and waits on the same request
    assert (await Run.objects.aget(pk=run.pk)).owner == runner.PROCESS_ID

    await decisions.aresolve_request(opened["request_id"], ok=True, data=copy.deepcopy(EDITED))
    done = await finished(run.pk)
    assert received == [(ASKED, None), (MERGED, EDITED)]
    assert (done.status, done.result_output) == (RunStatus.SUCCEEDED, "paid 50 EUR on A-7" + NOTICE)


# -- agent runs -------------------------------------------------------------------------------------


async def test_an_agent_run_approved_with_an_edit_retries_with_the_merged_args_and_the_model_reads_the_notice(
    extra_tools, console_events, model_inputs
):
    received = []
    extra_tools(payout_tool(received))
    run = await start_agent_run(agent={"prompt": 'call payout with {"order": "A-7", "amount": 500}'})
    waited = await blocked(console_events, run.pk)
    await decisions.aresolve_request(waited["request"], ok=True, data=copy.deepcopy(EDITED))
    done = await finished(run.pk)

    told = "paid 50 EUR on A-7" + NOTICE
    assert received == [(ASKED, None), (MERGED, EDITED)]
    assert len(model_inputs) == 2
    assert tool_results_read(model_inputs[1]) == {"call_1_1": told}
    assert await transcript_results(run.pk) == {"call_1_1": told}
    assert (done.status, done.result_output) == (RunStatus.SUCCEEDED, f"Done. 1 tool call:\n- payout: {told}")


async def test_only_the_edited_call_of_a_turn_reads_a_notice(extra_tools, console_events, model_inputs):
    received = []
    extra_tools(payout_tool(received))
    run = await start_agent_run(
        agent={
            "prompt": 'call payout with {"order": "A-7", "amount": 500} and call payout with {"order": "B-8", "amount": 9}'
        }
    )
    await blocked(console_events, run.pk)
    requests = {r.args["order"]: r.pk async for r in Request.objects.filter(run_id=run.pk)}
    await decisions.aresolve_request(requests["B-8"], ok=True)
    await decisions.aresolve_request(requests["A-7"], ok=True, data=copy.deepcopy(EDITED))
    await finished(run.pk)

    expected = {"call_1_1": "paid 50 EUR on A-7" + NOTICE, "call_1_2": "paid 9 EUR on B-8"}
    assert tool_results_read(model_inputs[1]) == expected
    assert await transcript_results(run.pk) == expected


async def test_an_agent_run_resumed_after_a_restart_keeps_the_merged_args_and_the_notice(
    extra_tools, console_events, model_inputs
):
    """The edit is approved while no process owns the run: the process that resumes it (executing the tool
    itself, outside the client's hooks) passes the merged args and tells the model the same words."""
    received = []
    extra_tools(payout_tool(received))
    run = await start_agent_run(agent={"prompt": 'call payout with {"order": "A-7", "amount": 500}'})
    waited = await blocked(console_events, run.pk)
    await stop_the_process(pytest.MonkeyPatch(), run.pk)
    await decisions.aresolve_request(waited["request"], ok=True, data=copy.deepcopy(EDITED))
    await runner.ensure_started()
    done = await finished(run.pk)

    told = "paid 50 EUR on A-7" + NOTICE
    assert received == [(ASKED, None), (MERGED, EDITED)]
    assert tool_results_read(model_inputs[-1]) == {"call_1_1": told}
    assert await transcript_results(run.pk) == {"call_1_1": told}
    assert (done.status, done.result_output) == (RunStatus.SUCCEEDED, f"Done. 1 tool call:\n- payout: {told}")


# -- an approval's own editable fields ----------------------------------------------------------------

OWN_FIELDS = {"schema": {"type": "object", "properties": {"note": {"type": "string"}, "amount": {"type": "integer"}}}}


def noted_payout_tool(received):
    """Asks with editable fields of its own (``data.args = {schema, values}``): ``note`` is not one of its
    parameters, ``amount`` is. On the retry it reads the note from ``answer.data`` and pays what its own
    parameters say."""

    async def execute(order: str, amount: int, ctx=None):
        answer = getattr(ctx, "answer", None)
        received.append(({"order": order, "amount": amount}, getattr(answer, "data", None)))
        if answer is None:
            values = {"note": "", "amount": amount}
            return pending(kind="approval", prompt=f"Pay {amount}?", data={"args": {**OWN_FIELDS, "values": values}})
        return f"paid {amount} on {order}, noted {answer.data['args']['note']!r}"

    return define_tool(execute, name="noted_payout")


NOTED = {"args": {"note": "for the March invoice", "amount": 500}}
NOTED_AND_EDITED = {"args": {"note": "half now", "amount": 50}}
AMOUNT_NOTICE = " (a reviewer changed amount 500 → 50 before approving; the call ran with the changed values)"


async def test_a_tool_run_approved_with_a_field_the_tool_does_not_take_runs_with_its_own_args(
    extra_tools, console_events
):
    received = []
    extra_tools(noted_payout_tool(received))
    run = await runner.start_run(tool="noted_payout", args={"order": "A-7", "amount": 500})
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk)
    await decisions.aresolve_request(opened["request_id"], ok=True, data=copy.deepcopy(NOTED))
    done = await finished(run.pk)

    assert received == [({"order": "A-7", "amount": 500}, None), ({"order": "A-7", "amount": 500}, NOTED)]
    assert (done.status, done.result_output) == (
        RunStatus.SUCCEEDED,
        "paid 500 on A-7, noted 'for the March invoice'",
    )


async def test_a_tool_run_merges_only_its_own_parameters_and_the_notice_names_only_them(extra_tools, console_events):
    received = []
    extra_tools(noted_payout_tool(received))
    run = await runner.start_run(tool="noted_payout", args={"order": "A-7", "amount": 500})
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk)
    await decisions.aresolve_request(opened["request_id"], ok=True, data=copy.deepcopy(NOTED_AND_EDITED))
    done = await finished(run.pk)

    assert received[1] == ({"order": "A-7", "amount": 50}, NOTED_AND_EDITED)
    assert (done.status, done.result_output) == (
        RunStatus.SUCCEEDED,
        "paid 50 on A-7, noted 'half now'" + AMOUNT_NOTICE,
    )


async def test_an_agent_run_approved_with_a_field_the_tool_does_not_take_runs_with_its_own_args(
    extra_tools, console_events, model_inputs
):
    received = []
    extra_tools(noted_payout_tool(received))
    run = await start_agent_run(agent={"prompt": 'call noted_payout with {"order": "A-7", "amount": 500}'})
    waited = await blocked(console_events, run.pk)
    await decisions.aresolve_request(waited["request"], ok=True, data=copy.deepcopy(NOTED_AND_EDITED))
    done = await finished(run.pk)

    told = "paid 50 on A-7, noted 'half now'" + AMOUNT_NOTICE
    assert received == [({"order": "A-7", "amount": 500}, None), ({"order": "A-7", "amount": 50}, NOTED_AND_EDITED)]
    assert tool_results_read(model_inputs[1]) == {"call_1_1": told}
    assert await transcript_results(run.pk) == {"call_1_1": told}
    assert done.status == RunStatus.SUCCEEDED
