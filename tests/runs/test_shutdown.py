"""A console process's graceful stop (approvals/runs/shutdown.py), in this process: what it hands over,
what it waits for, what it interrupts, and that the next process adopts what was handed over.

The same stop with a real SIGTERM to a daphne process, and a second console adopting the run, is in
tests/cluster/test_graceful_stop.py.
"""

import asyncio

import pytest
from asgiref.sync import sync_to_async
from toolnexus import define_tool, pending

from approvals.models import AuditEvent, ConsoleProcess, Request, RequestStatus, Run, RunStatus
from approvals.review import decisions
from approvals.runs import runner, shutdown
from approvals.runs import services as runs

pytestmark = pytest.mark.django_db(transaction=True)

NEXT_PROCESS = "the-next-console"


@pytest.fixture(autouse=True)
def stop_settings(settings, monkeypatch, stop_leftover_runs):
    """No drain (nobody polls readiness here), and a stop that has not begun."""
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "SHUTDOWN_DRAIN_SECONDS": 0.0, "SHUTDOWN_GRACE_SECONDS": 5.0}
    monkeypatch.setattr(shutdown, "_stopping_since", None)


async def opened_request(console_events, run):
    return (await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk))["request_id"]


async def finished(run_id, timeout=10):
    await asyncio.wait_for(runner.wait_for_run(run_id), timeout)
    return await Run.objects.aget(pk=run_id)


def slow_then_suspend(seconds):
    """A tool that works for ``seconds``, then asks (its retry replies with the answer)."""

    async def execute(ctx=None):
        if ctx is not None and ctx.answer is not None:
            return f"went on with {ctx.answer.data}"
        await asyncio.sleep(seconds)
        return pending(kind="approval", prompt="Go on?")

    return define_tool(execute, name="slow_then_suspend")


async def test_a_stop_hands_a_waiting_run_over_and_the_next_process_adopts_it(console_events):
    await runner.ensure_started()
    run = await runner.start_run(tool="deploy", args={"service": "api"})
    request_id = await opened_request(console_events, run)
    task = runner.supervisor().tasks[run.pk]

    stop = await asyncio.wait_for(shutdown.stop_gracefully(), 10)

    assert stop.handed_over == [run.pk] and stop.tripped == []
    assert task.cancelled()  # stopped here, nothing withdrawn
    handed = await Run.objects.aget(pk=run.pk)
    assert (handed.status, handed.owner) == (RunStatus.WAITING, runs.released_owner(runner.PROCESS_ID))
    assert (await Request.objects.aget(pk=request_id)).status == RequestStatus.OPEN
    assert not await ConsoleProcess.objects.filter(pk=runner.PROCESS_ID).aexists()  # left: no timeout to wait out

    recovery = await runs.arecover_orphaned_runs(NEXT_PROCESS)

    assert recovery.adopted == [run.pk]
    adopted = await AuditEvent.objects.aget(run_id=run.pk, action=AuditEvent.Action.RUN_ADOPTED)
    assert adopted.payload["previous_owner"] == runs.released_owner(runner.PROCESS_ID)


async def test_an_answer_given_after_the_hand_over_is_kept_for_the_adopter(console_events):
    await runner.ensure_started()
    run = await runner.start_run(tool="deploy", args={"service": "api"})
    request_id = await opened_request(console_events, run)
    await shutdown.stop_gracefully()

    assert request_id not in runner.supervisor().waiters  # nothing here waits to claim it
    await decisions.aresolve_request(request_id, ok=True, data={"env": "staging"})

    request = await Request.objects.aget(pk=request_id)
    assert (request.status, request.resumed_by) == (RequestStatus.ANSWERED, "")  # left for the adopter
    assert (await runs.arecover_orphaned_runs(NEXT_PROCESS)).adopted == [run.pk]


async def test_a_suspension_opened_during_the_grace_period_is_handed_over_as_it_opens(extra_tools, console_events):
    extra_tools(slow_then_suspend(0.3))
    await runner.ensure_started()
    run = await runner.start_run(tool="slow_then_suspend", args={})

    started = asyncio.get_running_loop().time()
    stop = await asyncio.wait_for(shutdown.stop_gracefully(), 10)
    took = asyncio.get_running_loop().time() - started

    assert stop.handed_over == [run.pk] and stop.tripped == []
    assert took < 2.0  # not the 5 s grace period: the stop went on once the run was only waiting
    handed = await Run.objects.aget(pk=run.pk)
    assert (handed.status, handed.owner) == (RunStatus.WAITING, runs.released_owner(runner.PROCESS_ID))


async def test_a_tool_that_finishes_within_the_grace_period_finishes_its_run(console_events):
    await runner.ensure_started()
    run = await runner.start_run(tool="crunch", args={"steps": 3, "pause": 0.1})

    stop = await asyncio.wait_for(shutdown.stop_gracefully(), 10)

    assert (stop.handed_over, stop.tripped, stop.finished) == ([], [], 1)
    done = await Run.objects.aget(pk=run.pk)
    assert (done.status, done.result_output) == (RunStatus.SUCCEEDED, "crunched 3 of 3 steps")


async def test_a_tool_still_executing_after_the_grace_period_is_interrupted(settings, console_events):
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "SHUTDOWN_GRACE_SECONDS": 0.3}
    await runner.ensure_started()
    run = await runner.start_run(tool="crunch", args={"steps": 100, "pause": 0.1})

    stop = await asyncio.wait_for(shutdown.stop_gracefully(), 10)

    assert stop.tripped == [run.pk]
    done = await Run.objects.aget(pk=run.pk)
    assert done.status == RunStatus.INTERRUPTED
    assert done.result_output.startswith("cancelled after ")  # crunch saw its token trip and said how far it got
    assert done.owner == runner.PROCESS_ID  # never handed over: it was executing


async def test_a_stopping_process_starts_no_new_runs(api):
    shutdown.begin()

    with pytest.raises(shutdown.ShuttingDown):
        await runner.start_run(tool="deploy", args={"service": "api"})
    response = await api.post(
        "/api/v1/runs", {"tool": "deploy", "args": {"service": "api"}}, content_type="application/json"
    )

    assert response.status_code == 503
    assert response["Retry-After"] == "1"
    body = response.json()
    assert body["error"] == "shutting_down"
    assert body["message"].startswith("This console is shutting down and starts no new runs; nothing was started.")
    assert not await sync_to_async(Run.objects.exists)()
