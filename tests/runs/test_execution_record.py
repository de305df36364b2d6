"""Issue 36: the record from an approval to its tool's outcome, at most once, in tool runs and agent runs.

Each tool here counts its executions (a side effect), so "the tool ran once" is counted, not inferred.
"""

import asyncio

import pytest
from toolnexus import Answer, ToolResult, define_tool, pending

from approvals import frames
from approvals.models import AuditEvent, Request, Run, RunStatus
from approvals.review import decisions, execution
from approvals.runs import loop_rule, runner, waiting
from approvals.runs.agent_runner import AgentLoop, Suspension
from approvals.runs.cancel import CancelToken
from approvals.runs.runner import start_agent_run
from approvals.runs.supervisor import RunScope, supervisors_by_loop

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _stop_leftover_runs(stop_leftover_runs):
    """Every test here cancels what it left running (the fixture is in tests/conftest.py)."""


def counting_tool(name, runs, *, output="paid {amount}", fail=False, hold=None):
    """A tool that suspends on an approval, then on its retry appends to ``runs`` (the side effect) and returns
    ``output`` (an error result when ``fail``). ``hold``: (started, release) events the retry sets and waits on."""

    async def execute(amount: int = 0, ctx=None):
        answer = getattr(ctx, "answer", None)
        if answer is None:
            return pending(kind="approval", prompt=f"Pay {amount}?")
        runs.append(amount)
        if hold is not None:
            started, release = hold
            started.set()
            await release.wait()
        return ToolResult(output=output.format(amount=amount), is_error=fail)

    return define_tool(execute, name=name)


async def finished(run_id, timeout=15):
    await asyncio.wait_for(runner.wait_for_run(run_id), timeout)
    return await Run.objects.aget(pk=run_id)


async def approved_tool_run(console_events, tool, args):
    run = await runner.start_run(tool=tool, args=args)
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk)
    await decisions.aresolve_request(opened["request_id"], ok=True)
    return run, opened["request_id"]


async def test_an_approved_tool_run_records_its_tool_succeeded_with_its_output(extra_tools, console_events):
    runs = []
    extra_tools(counting_tool("pay", runs))
    run, request_id = await approved_tool_run(console_events, "pay", {"amount": 12})
    done = await finished(run.pk)
    assert (done.status, runs) == (RunStatus.SUCCEEDED, [12])
    stored = await Request.objects.aget(pk=request_id)
    assert (stored.execution_state, stored.execution_message) == ("succeeded", "paid 12")
    assert stored.execution_at is not None and stored.execution_at >= stored.answered_at
    view = (await frames.arequest_detail(request_id))["execution"]
    assert view["state"] == view["outcome"] == "succeeded" and view["message"] == "paid 12" and view["at"]


async def test_the_answer_frame_says_executing_and_the_finish_frame_says_how_it_ended(extra_tools, console_events):
    runs = []
    started, release = asyncio.Event(), asyncio.Event()
    extra_tools(counting_tool("pay", runs, hold=(started, release)))
    run = await runner.start_run(tool="pay", args={"amount": 5})
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk)
    await decisions.aresolve_request(opened["request_id"], ok=True)
    answered = await console_events.next(AuditEvent.Action.REQUEST_ANSWERED, run_id=run.pk)
    assert answered["request"]["execution"]["state"] == "executing"
    await asyncio.wait_for(started.wait(), 10)
    assert (await Request.objects.aget(pk=opened["request_id"])).execution_state == "executing"
    release.set()
    ended = await console_events.next(AuditEvent.Action.RUN_FINISHED, run_id=run.pk)
    assert ended["request"]["id"] == opened["request_id"]
    assert ended["request"]["execution"] == {
        "state": "succeeded",
        "outcome": "succeeded",
        "message": "paid 5",
        "at": ended["request"]["execution"]["at"],
    }
    assert ended["words"] == "Finished; its approved call succeeded"


async def test_a_failing_tool_after_approval_records_failed_with_its_error(extra_tools, console_events):
    runs = []
    extra_tools(counting_tool("pay", runs, output="card declined for {amount}", fail=True))
    run, request_id = await approved_tool_run(console_events, "pay", {"amount": 7})
    assert (await finished(run.pk)).status == RunStatus.FAILED
    stored = await Request.objects.aget(pk=request_id)
    assert (stored.execution_state, stored.execution_message, runs) == ("failed", "card declined for 7", [7])


async def test_a_long_output_is_kept_cut_to_2000_characters(extra_tools, console_events):
    extra_tools(counting_tool("pay", [], output="x" * 5000 + "{amount}"))
    run, request_id = await approved_tool_run(console_events, "pay", {"amount": 1})
    done = await finished(run.pk)
    stored = await Request.objects.aget(pk=request_id)
    assert len(done.result_output) == 5001  # the run keeps it all
    assert stored.execution_message == "x" * execution.EXECUTION_MESSAGE_CHARS


async def test_a_declined_request_has_no_execution_and_its_tool_never_runs(extra_tools, console_events):
    runs = []
    extra_tools(counting_tool("pay", runs))
    run = await runner.start_run(tool="pay", args={"amount": 3})
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk)
    await decisions.aresolve_request(opened["request_id"], ok=False, reason="declined")
    await finished(run.pk)
    stored = await Request.objects.aget(pk=opened["request_id"])
    assert (stored.execution_state, runs) == (None, [])
    assert (await frames.arequest_detail(opened["request_id"]))["execution"] is None


async def test_a_second_resumer_of_the_same_approval_does_not_run_the_tool_again(extra_tools, console_events):
    """archestra#5132: two channels resume one approval. The run's own retry holds the mark; a second resumer,
    arriving while the tool executes and again after it finished, is told why and the tool is not run."""
    runs = []
    started, release = asyncio.Event(), asyncio.Event()
    tool = counting_tool("pay", runs, hold=(started, release))
    extra_tools(tool)
    run = await runner.start_run(tool="pay", args={"amount": 40})
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk)
    await decisions.aresolve_request(opened["request_id"], ok=True)
    await asyncio.wait_for(started.wait(), 10)

    answer = Answer(id=opened["request_id"], ok=True)
    second = RunScope(run_id=run.pk, tool="pay", args={"amount": 40}, token=CancelToken())
    during = await loop_rule.retry_with_answer(tool, {"amount": 40}, "Pay 40?", answer, second, kind="approval")
    assert (during.output, during.is_error) == (
        "not run again: this approval was already executed (executing)",
        True,
    )
    release.set()
    await finished(run.pk)
    after = await loop_rule.retry_with_answer(tool, {"amount": 40}, "Pay 40?", answer, second, kind="approval")
    assert after.output == "not run again: this approval was already executed (succeeded)"
    assert runs == [40]  # the tool ran once
    assert (await Request.objects.aget(pk=opened["request_id"])).execution_state == "succeeded"


async def test_two_resumers_racing_for_an_unclaimed_approval_run_the_tool_once(extra_tools, console_events):
    """Neither holds a claim: both go through the conditional mark, and exactly one runs the tool."""
    runs = []
    tool = counting_tool("pay", runs)
    extra_tools(tool)
    run = await runner.start_run(tool="pay", args={"amount": 9})
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk)
    await decisions.aresolve_request(opened["request_id"], ok=True)
    await finished(run.pk)  # the run's own retry ran: runs == [9]
    await Request.objects.filter(pk=opened["request_id"]).aupdate(execution_state=None)  # as if nobody had yet
    answer = Answer(id=opened["request_id"], ok=True)

    def scope():
        return RunScope(run_id=run.pk, tool="pay", args={"amount": 9}, token=CancelToken())

    results = await asyncio.gather(
        *(
            loop_rule.retry_with_answer(tool, {"amount": 9}, "Pay 9?", answer, scope(), kind="approval")
            for _ in range(2)
        )
    )
    assert sorted(r.output for r in results) == [
        "not run again: this approval was already executed (executing)",
        "paid 9",
    ]
    assert runs == [9, 9]  # the run's own, then exactly one of the two resumers


async def test_an_agent_run_records_each_approved_call_succeeded_or_failed(extra_tools, console_events):
    runs = []
    extra_tools(counting_tool("pay", runs), counting_tool("repay", runs, output="no such order", fail=True))
    run = await start_agent_run(agent={"prompt": 'call pay with {"amount": 2} and call repay with {"amount": 3}'})
    opened = [await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk) for _ in range(2)]
    for frame in opened:
        await decisions.aresolve_request(frame["request_id"], ok=True)
    assert (await finished(run.pk)).status == RunStatus.SUCCEEDED
    by_tool = {r.tool: r async for r in Request.objects.filter(run=run)}
    assert (by_tool["pay"].execution_state, by_tool["pay"].execution_message) == ("succeeded", "paid 2")
    assert (by_tool["repay"].execution_state, by_tool["repay"].execution_message) == ("failed", "no such order")
    assert sorted(runs) == [2, 3]
    executed = [e async for e in AuditEvent.objects.filter(run=run, action=AuditEvent.Action.REQUEST_EXECUTED)]
    assert sorted(e.payload["outcome"] for e in executed) == ["failed", "succeeded"]


async def test_an_agent_call_resumed_twice_for_one_approval_runs_the_tool_once(extra_tools, console_events):
    runs = []
    tool = counting_tool("pay", runs)
    extra_tools(tool)
    run = await start_agent_run(agent={"prompt": 'call pay with {"amount": 4}'})
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk)
    await decisions.aresolve_request(opened["request_id"], ok=True)
    await finished(run.pk)
    # A second loop (another channel, another process) gets the same answer and calls the tool with it.
    again = AgentLoop(run.pk, "scripted", CancelToken(), None)
    again.suspensions[opened["request_id"]] = Suspension(call_id="c1", tool="pay", args={"amount": 4}, prompt="Pay 4?")
    result = await again.call(tool, {"amount": 4}, Answer(id=opened["request_id"], ok=True))
    assert result.output == "not run again: this approval was already executed (succeeded)"
    assert runs == [4]


async def test_a_run_whose_process_died_while_executing_stays_executing_and_is_not_run_again(
    extra_tools, console_events, monkeypatch
):
    runs = []
    started, release = asyncio.Event(), asyncio.Event()
    extra_tools(counting_tool("pay", runs, hold=(started, release)))
    run = await runner.start_run(tool="pay", args={"amount": 66})
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk)
    await decisions.aresolve_request(opened["request_id"], ok=True)
    await asyncio.wait_for(started.wait(), 10)

    # The process goes away mid-execution: its tasks vanish without a word, its rows stay as they are.
    async def withdraw_nothing(request_id, reason):
        return Answer(id=request_id, ok=False, reason=reason)

    sup = runner.supervisor()
    with monkeypatch.context() as patch:
        patch.setattr(waiting, "_withdraw", withdraw_nothing)
        tasks = [sup.tasks[run.pk], *sup.background_tasks()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    supervisors_by_loop.pop(asyncio.get_running_loop())
    await Run.objects.filter(pk=run.pk).aupdate(owner="a-console-that-died")

    await runner.ensure_started()  # the next process takes over
    taken_over = await Run.objects.aget(pk=run.pk)
    assert taken_over.status == RunStatus.INTERRUPTED
    stored = await Request.objects.aget(pk=opened["request_id"])
    assert stored.execution_state == "executing"  # nobody knows how it ended: it says so
    assert (await frames.arequest_detail(opened["request_id"]))["execution"]["state"] == "executing"
    assert runs == [66]  # never run again


async def test_a_question_asked_from_inside_a_running_tool_has_no_execution_record(extra_tools, console_events):
    """Its answer resumes no tool (the call that asked is running): it is never "executing", before or after the
    run ends."""
    from toolnexus import Request as WireRequest

    from approvals.runs.waiting import console_wait_for

    async def confirm_then_pay(amount: int = 0, ctx=None):
        answer = await console_wait_for(WireRequest(id="inside-1", kind="confirmation", prompt=f"Really pay {amount}?"))
        return f"paid {amount}" if answer.ok else "not paid"

    extra_tools(define_tool(confirm_then_pay, name="confirm_then_pay"))
    run = await runner.start_run(tool="confirm_then_pay", args={"amount": 3})
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk)
    await decisions.aresolve_request(opened["request_id"], ok=True)
    done = await finished(run.pk)

    assert (done.status, done.result_output) == (RunStatus.SUCCEEDED, "paid 3")
    stored = await Request.objects.aget(pk=opened["request_id"])
    assert (stored.resumable, stored.execution_state) == (False, None)
    assert (await frames.arequest_detail(stored.pk))["execution"] is None
    actions = [a async for a in AuditEvent.objects.filter(request_id=stored.pk).values_list("action", flat=True)]
    assert AuditEvent.Action.REQUEST_EXECUTING not in actions


async def test_a_request_the_console_asked_outside_any_run_never_reads_unreported(console_events):
    """Nobody reports it (only a host's request awaits its host's report)."""
    from toolnexus import Request as WireRequest

    from approvals.runs.waiting import console_wait_for

    asking = asyncio.ensure_future(console_wait_for(WireRequest(id="outside-1", kind="approval", prompt="Go?")))
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED)
    await decisions.aresolve_request(opened["request_id"], ok=True)
    assert (await asyncio.wait_for(asking, 10)).ok
    assert (await frames.arequest_detail(opened["request_id"]))["execution"] is None


async def test_an_edited_approvals_record_keeps_the_tools_own_output_not_the_models_notice(extra_tools, console_events):
    async def pay(amount: int = 0, ctx=None):
        if getattr(ctx, "answer", None) is None:
            return pending(kind="approval", prompt=f"Pay {amount}?", data={"editable": ["amount"]})
        return f"paid {amount}"

    extra_tools(define_tool(pay, name="pay"))
    run = await runner.start_run(tool="pay", args={"amount": 50})
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk)
    await decisions.aresolve_request(opened["request_id"], ok=True, data={"args": {"amount": 5}})
    done = await finished(run.pk)

    assert done.result_output.startswith("paid 5 (a reviewer changed amount 50 → 5")  # the run's result: as told
    stored = await Request.objects.aget(pk=opened["request_id"])
    assert (stored.execution_state, stored.execution_message) == ("succeeded", "paid 5")
