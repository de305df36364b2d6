"""The runner: every branch of the §10 loop rule, the cancel token, the deadline, the demo tools."""

import asyncio
import re
import threading

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connection
from toolnexus import Answer, Tool, ToolContext, ToolResult, define_tool, pending

from approvals import demo_tools, moments
from approvals.models import AuditEvent, Request, RequestStatus, Run, RunStatus
from approvals.review import decisions
from approvals.runs import runner
from approvals.runs import services as runs
from approvals.runs.cancel import CancelToken
from approvals.runs.supervisor import PROCESS_ID, supervisor
from tests.support.statements import counting_statements

pytestmark = pytest.mark.django_db(transaction=True)


async def finished(run, timeout=10):
    await asyncio.wait_for(runner.wait_for_run(run.pk), timeout)
    return await Run.objects.aget(pk=run.pk)


def suspending_tool(name="ask", prompt="Pick a colour", *, suspend_again=False):
    """A tool that suspends on its first call and records every execution (args, ctx.answer)."""
    calls = []

    async def execute(colour_hint: str = "", ctx=None):
        calls.append({"args": {"colour_hint": colour_hint}, "answer": getattr(ctx, "answer", None)})
        if ctx is not None and ctx.answer is not None and not suspend_again:
            return f"picked {ctx.answer.data['colour']} (hint {colour_hint})"
        # A kind with no form of its own: its answer is the reviewer's JSON reply (an approval's is only a comment).
        return pending(kind="confirmation", prompt=prompt, data={"hint": colour_hint})

    return define_tool(execute, name=name), calls


# -- the §10 loop rule -----------------------------------------------------------------


async def test_no_suspension_succeeds_with_the_output(extra_tools):
    async def echo(text: str, ctx=None):
        return f"echo {text}"

    extra_tools(define_tool(echo, name="echo"))
    run = await runner.start_run(tool="echo", args={"text": "hi"})
    assert run.status == RunStatus.RUNNING
    done = await finished(run)
    assert done.status == RunStatus.SUCCEEDED
    assert done.result_output == "echo hi"
    assert done.result_is_error is False
    assert done.finished_at is not None
    assert await Request.objects.filter(run_id=run.pk).acount() == 0


async def test_suspension_then_ok_re_executes_once_with_the_answer(extra_tools, console_events, make_user):
    tool, calls = suspending_tool()
    extra_tools(tool)
    user = await sync_to_async(make_user)(password=None)
    starter = await sync_to_async(make_user)("starter", password=None)  # someone else answers
    run = await runner.start_run(tool="ask", args={"colour_hint": "warm"}, user=starter)
    opened = await console_events.next("request.opened", run_id=run.pk)
    assert (await Run.objects.aget(pk=run.pk)).status == RunStatus.WAITING
    assert opened["request"]["prompt"] == "Pick a colour"
    await decisions.aresolve_request(opened["request_id"], ok=True, data={"colour": "red"}, user=user)
    done = await finished(run)

    assert done.status == RunStatus.SUCCEEDED
    assert done.result_output == "picked red (hint warm)"
    assert len(calls) == 2
    assert calls[0] == {"args": {"colour_hint": "warm"}, "answer": None}
    assert calls[1]["args"] == calls[0]["args"]
    assert calls[1]["answer"] == Answer(id=opened["request_id"], ok=True, data={"colour": "red"}, reason=None)


async def test_an_answer_committed_in_this_process_resumes_its_run_without_the_channel_layer(
    extra_tools, console_events, make_user, settings, monkeypatch
):
    # The commit itself wakes this process's waiter, ahead of the event's frame and the layer.
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "SAFETY_POLL_SECONDS": 3600}  # no safety poll to fall back on
    tool, calls = suspending_tool()
    extra_tools(tool)
    user = await sync_to_async(make_user)(password=None)
    starter = await sync_to_async(make_user)("starter", password=None)
    run = await runner.start_run(tool="ask", args={"colour_hint": "cool"}, user=starter)
    opened = await console_events.next("request.opened", run_id=run.pk)
    # The run listens for its answer from before its request opened, and reads it only once woken.
    assert supervisor().waiters[opened["request_id"]]

    async def lost(group, message):
        pass

    monkeypatch.setattr(get_channel_layer(), "group_send", lost)  # every notification from here on is lost
    await decisions.aresolve_request(opened["request_id"], ok=True, data={"colour": "blue"}, user=user)
    done = await finished(run)
    assert done.status == RunStatus.SUCCEEDED
    assert done.result_output == "picked blue (hint cool)"


async def test_an_answer_that_claimed_its_runs_resume_here_hands_the_run_what_a_read_would_give(
    extra_tools, console_events, make_user
):
    # The answer's own transaction claimed the resume for this process: on SQLite the run's waiter takes the
    # Answer as committed instead of reading the request back, and gets the stored JSON's values in a copy of its own.
    tool, calls = suspending_tool()
    extra_tools(tool)
    user = await sync_to_async(make_user)(password=None)
    run = await runner.start_run(tool="ask", args={"colour_hint": "warm"})
    opened = await console_events.next("request.opened", run_id=run.pk)
    sent = {"colour": "red", "shades": [1, 2.5, {"deep": None}], "note": "ünïcode"}
    with counting_statements() as counter:
        await decisions.aresolve_request(opened["request_id"], ok=True, data=sent, user=user)
        done = await finished(run)
    assert done.status == RunStatus.SUCCEEDED
    stored = await Request.objects.aget(pk=opened["request_id"])
    assert stored.resumed_by == PROCESS_ID
    handed = calls[1]["answer"]
    assert handed == Answer(id=stored.pk, ok=True, data=stored.answer_data, reason=None)
    assert handed.data == sent and handed.data is not sent and handed.data["shades"] is not sent["shades"]
    reads_of_the_request = [
        s.sql for s in counter.taken() if s.verb == "SELECT" and 'FROM "approvals_request" WHERE' in s.sql
    ]
    # PostgreSQL's jsonb gives keys back sorted and numbers rewritten: there the run reads the row.
    assert len(reads_of_the_request) == (0 if connection.vendor == "sqlite" else 1)
    assert supervisor().answers_handed == {}


async def test_second_suspension_is_unresolved(extra_tools, console_events):
    tool, calls = suspending_tool(prompt="Still need a colour", suspend_again=True)
    extra_tools(tool)
    run = await runner.start_run(tool="ask", args={})
    opened = await console_events.next("request.opened", run_id=run.pk)
    await decisions.aresolve_request(opened["request_id"], ok=True, data={"colour": "blue"})
    done = await finished(run)

    assert done.status == RunStatus.FAILED
    assert done.result_output == "unresolved: Still need a colour"
    assert done.result_is_error is True
    assert len(calls) == 2
    # The second suspension is not a new request: the loop rule never waits twice.
    assert await Request.objects.filter(run_id=run.pk).acount() == 1


async def test_decline_is_declined_expired_and_does_not_re_execute(extra_tools, console_events):
    tool, calls = suspending_tool(prompt="Paint it?")
    extra_tools(tool)
    run = await runner.start_run(tool="ask", args={})
    opened = await console_events.next("request.opened", run_id=run.pk)
    await decisions.aresolve_request(opened["request_id"], ok=False, reason="declined")
    done = await finished(run)

    assert done.status == RunStatus.FAILED
    assert (
        done.result_output
        == "declined/expired: Paint it? (declined by the console) Do not make the same call again; ask the user how to go on."
    )
    assert done.result_is_error is True
    assert len(calls) == 1


async def test_a_raising_tool_fails_its_run_and_the_server_keeps_working(extra_tools):
    async def explode(args, ctx=None):
        raise RuntimeError("kaboom")

    boom = Tool(
        name="boom",
        description="Always raises.",
        input_schema={"type": "object", "properties": {}},
        source="custom",
        execute=explode,
    )

    async def echo(text: str = "again", ctx=None):
        return f"echo {text}"

    extra_tools(boom, define_tool(echo, name="echo"))
    done = await finished(await runner.start_run(tool="boom", args={}))
    assert done.status == RunStatus.FAILED
    assert done.result_output == "RuntimeError: kaboom"
    assert done.result_is_error is True

    after = await finished(await runner.start_run(tool="echo", args={}))
    assert after.status == RunStatus.SUCCEEDED
    assert after.result_output == "echo again"


async def test_an_error_result_fails_the_run(extra_tools):
    def refuse(amount: float = 0):
        """Refuse everything."""
        return ToolResult(output=f"amount {amount} is not allowed", is_error=True)

    extra_tools(define_tool(refuse, name="refuse"))
    done = await finished(await runner.start_run(tool="refuse", args={"amount": 5}))
    assert done.status == RunStatus.FAILED
    assert done.result_output == "amount 5 is not allowed"
    assert done.result_is_error is True


async def test_unknown_tool_is_refused_before_a_run_is_created():
    with pytest.raises(runs.RunInputError, match="Unknown tool 'nope'"):
        await runner.start_run(tool="nope", args={})
    assert await Run.objects.acount() == 0


# -- the cancel token --------------------------------------------------------------------


async def test_cancel_run_trips_the_token_an_async_tool_awaits(extra_tools, make_user):
    started = asyncio.Event()
    seen = {}

    async def patient(ctx=None):
        """Wait until cancelled."""
        started.set()
        await ctx.signal.wait()
        seen["reason"] = ctx.signal.reason
        return f"stopped: {ctx.signal.reason}"

    extra_tools(define_tool(patient, name="patient"))
    user = await sync_to_async(make_user)(password=None)
    run = await runner.start_run(tool="patient", args={}, user=user)  # its starter may cancel it
    await asyncio.wait_for(started.wait(), 5)
    cancelled = await runner.cancel_run(run.pk, user=user)
    assert cancelled.cancel_requested is True
    done = await finished(run)

    assert seen == {"reason": "cancelled"}
    assert done.status == RunStatus.CANCELLED
    assert done.result_output == "stopped: cancelled"
    assert done.cancel_requested_by_id == user.pk


async def test_cancel_run_trips_the_token_a_sync_tool_blocks_on(extra_tools):
    started = threading.Event()
    seen = {}

    def patient_sync(ctx=None):
        """Block in a worker thread until cancelled."""
        seen["thread"] = threading.current_thread() is not threading.main_thread()
        started.set()
        seen["woke"] = ctx.signal.wait_blocking(10)
        seen["reason"] = ctx.signal.reason
        return f"stopped: {ctx.signal.reason}"

    extra_tools(define_tool(patient_sync, name="patient_sync"))
    run = await runner.start_run(tool="patient_sync", args={})
    assert await asyncio.to_thread(started.wait, 5)
    await runner.cancel_run(run.pk)
    done = await finished(run)

    assert seen == {"thread": True, "woke": True, "reason": "cancelled"}
    assert done.status == RunStatus.CANCELLED
    assert done.result_output == "stopped: cancelled"


async def test_cancel_recorded_as_the_task_starts_reaches_the_tool_through_its_signal(extra_tools):
    async def look(ctx=None):
        await ctx.signal.wait()  # a tool that stops when told
        return "stopped"

    extra_tools(define_tool(look, name="look"))
    run = await runner.start_run(tool="look", args={})
    # Record the cancel in the database, as another console process would: its notice trips the token.
    await runs.arequest_cancel_run(run.pk)
    done = await finished(run)
    assert (done.status, done.result_output) == (RunStatus.CANCELLED, "stopped")


async def test_cancel_of_a_finished_run_is_refused(extra_tools):
    async def quick(ctx=None):
        return "done"

    extra_tools(define_tool(quick, name="quick"))
    run = await finished(await runner.start_run(tool="quick", args={}))
    with pytest.raises(decisions.DecisionError) as refused:
        await runner.cancel_run(run.pk)
    assert refused.value.code == "not_open"
    assert "already finished (succeeded)" in refused.value.message


# -- the deadline ----------------------------------------------------------------------


async def test_timeout_reaches_the_tool_and_trips_the_token_at_the_deadline(extra_tools):
    seen = {}

    async def timed(ctx=None):
        seen["timeout"] = ctx.timeout
        await ctx.signal.wait()
        seen["reason"] = ctx.signal.reason
        return "gave up"

    extra_tools(define_tool(timed, name="timed"))
    done = await finished(await runner.start_run(tool="timed", args={}, timeout=0.5))

    assert 0.25 < seen["timeout"] <= 0.5  # what is left of the run's timeout when the tool starts
    assert seen["reason"] == "timeout"
    assert done.status == RunStatus.TIMED_OUT
    assert done.result_output == "gave up"


async def test_no_timeout_means_ctx_timeout_is_none(extra_tools):
    seen = {}

    async def timed(ctx=None):
        seen["timeout"] = ctx.timeout
        return "ok"

    extra_tools(define_tool(timed, name="timed"))
    done = await finished(await runner.start_run(tool="timed", args={}))
    assert seen == {"timeout": None}
    assert done.status == RunStatus.SUCCEEDED


async def test_async_tool_ignoring_the_token_is_cancelled_after_the_grace(extra_tools):
    got_cancelled = asyncio.Event()

    async def stubborn(ctx=None):
        """Never looks at its token."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            got_cancelled.set()
            raise
        return "never"

    extra_tools(define_tool(stubborn, name="stubborn"))
    run = await runner.start_run(tool="stubborn", args={}, timeout=0.2)
    done = await finished(run)
    await asyncio.wait_for(got_cancelled.wait(), 2)

    assert done.status == RunStatus.TIMED_OUT
    assert done.result_output == "timed out after 0.2s"
    assert done.result_is_error is True


async def test_sync_tool_ignoring_the_token_is_abandoned_and_its_late_result_discarded(extra_tools):
    release = threading.Event()
    returned = threading.Event()

    def stuck(ctx=None):
        """Blocks its worker thread and never looks at its token."""
        release.wait(30)
        returned.set()
        return "late result"

    extra_tools(define_tool(stuck, name="stuck"))
    try:
        run = await runner.start_run(tool="stuck", args={}, timeout=0.2)
        done = await finished(run)
        assert done.status == RunStatus.TIMED_OUT
        assert done.result_output == "timed out after 0.2s"
        assert not returned.is_set()  # the thread is still blocked: the run did not wait for it
    finally:
        release.set()
    assert await asyncio.to_thread(returned.wait, 5)
    # The tool has returned its late result; give the loop a turn to process the worker's completion.
    await asyncio.to_thread(lambda: None)
    again = await Run.objects.aget(pk=run.pk)
    assert (again.status, again.result_output, again.result_is_error, again.finished_at) == (
        done.status,
        done.result_output,
        done.result_is_error,
        done.finished_at,
    )
    finishes = AuditEvent.objects.filter(run_id=run.pk, action=AuditEvent.Action.RUN_FINISHED)
    assert await finishes.acount() == 1


async def test_cancelled_tool_ignoring_the_token_is_stopped_after_the_grace(extra_tools):
    started = asyncio.Event()

    async def stubborn(ctx=None):
        started.set()
        await asyncio.Event().wait()

    extra_tools(define_tool(stubborn, name="stubborn"))
    run = await runner.start_run(tool="stubborn", args={})
    await asyncio.wait_for(started.wait(), 5)
    await runner.cancel_run(run.pk)
    done = await finished(run)
    assert done.status == RunStatus.CANCELLED
    assert done.result_output == "cancelled: the tool did not stop within the grace period"


# -- waiting for a human, under the token and the deadline ---------------------------------


async def test_cancel_while_waiting_withdraws_the_request(extra_tools, console_events):
    tool, calls = suspending_tool()
    extra_tools(tool)
    run = await runner.start_run(tool="ask", args={})
    opened = await console_events.next("request.opened", run_id=run.pk)
    await runner.cancel_run(run.pk)
    done = await finished(run)

    request = await Request.objects.aget(pk=opened["request_id"])
    assert request.status == RequestStatus.CANCELLED
    assert request.answer_ok is False
    assert request.answer_reason == "cancelled"
    assert done.status == RunStatus.CANCELLED
    assert done.result_output == "declined/expired: Pick a colour"
    assert len(calls) == 1
    with pytest.raises(decisions.DecisionError) as late:
        await decisions.aresolve_request(request.pk, ok=True, data={"colour": "red"})
    assert late.value.code == "not_open"


async def test_a_wall_clock_timeout_while_waiting_expires_the_request(extra_tools, console_events):
    """The old behaviour, asked for with ``timeout_counts_waiting``: the wait for a person counts."""
    tool, calls = suspending_tool()
    extra_tools(tool)
    run = await runner.start_run(tool="ask", args={}, timeout=0.4, timeout_counts_waiting=True)
    opened = await console_events.next("request.opened", run_id=run.pk)
    expired = await console_events.next("request.expired", request_id=opened["request_id"])
    done = await finished(run)

    assert expired["actor"] == "system"
    request = await Request.objects.aget(pk=opened["request_id"])
    assert request.status == RequestStatus.EXPIRED
    assert request.answer_reason == "expired"
    assert done.status == RunStatus.TIMED_OUT
    expired_at = moments.readable_time(request.answered_at)
    assert done.result_output == f"declined/expired: Pick a colour (expired at {expired_at}, nobody answered)"
    assert len(calls) == 1


# -- the demo tools ------------------------------------------------------------------------


async def test_demo_deploy_asks_for_the_environment_and_deploys(make_user, console_events):
    user = await sync_to_async(make_user)(password=None)
    run = await runner.start_run(tool="deploy", args={}, user=user)
    opened = await console_events.next("request.opened", run_id=run.pk)
    assert opened["request"]["kind"] == "input"
    assert opened["request"]["prompt"] == "Which environment should web be deployed to?"
    await decisions.aresolve_request(opened["request_id"], ok=True, data={"env": "staging"}, user=user)
    done = await finished(run)
    assert done.status == RunStatus.SUCCEEDED
    assert done.result_output == "deployed to staging"


async def test_demo_refund_approved(console_events):
    run = await runner.start_run(tool="refund", args={"order": "B-7", "amount": 12.5})
    opened = await console_events.next("request.opened", run_id=run.pk)
    assert opened["request"]["kind"] == "approval"
    assert opened["request"]["data"] == {"order": "B-7", "amount": 12.5, "currency": "EUR", "editable": ["amount"]}
    await decisions.aresolve_request(opened["request_id"], ok=True)
    done = await finished(run)
    assert done.status == RunStatus.SUCCEEDED
    assert done.result_output == "refunded 12.5 EUR on order B-7"


async def test_demo_refund_declined(console_events):
    run = await runner.start_run(tool="refund", args={})
    opened = await console_events.next("request.opened", run_id=run.pk)
    await decisions.aresolve_request(opened["request_id"], ok=False, reason="declined", comment="too much")
    done = await finished(run)
    assert done.status == RunStatus.FAILED
    assert done.result_output == (
        'declined/expired: Refund 25.0 EUR on order A-1001? (declined by the console: "too much") '
        "Do not make the same call again; follow the reviewer's reason, or ask the user how to go on."
    )


async def test_demo_refund_own_decline_branch():
    result = await demo_tools.refund.execute({}, ToolContext(answer=Answer(id="r", ok=False, reason="declined")))
    assert result == ToolResult(output="refund of 25.0 EUR not made", is_error=True)


async def test_demo_crunch_cancelled_reports_its_steps():
    run = await runner.start_run(tool="crunch", args={"steps": 50, "pause": 0.05})
    await runner.cancel_run(run.pk)
    done = await finished(run)
    assert done.status == RunStatus.CANCELLED
    match = re.fullmatch(r"cancelled after (\d+) of 50 steps", done.result_output)
    assert match and int(match.group(1)) < 50


class TripOnWait(CancelToken):
    """A token that trips itself on the n-th ``wait()``: a deterministic "cancel during step n"."""

    def __init__(self, n):
        super().__init__()
        self.n = n
        self.waits = 0

    async def wait(self):
        self.waits += 1
        if self.waits == self.n:
            self.trip("cancelled")
        return await super().wait()


async def test_demo_crunch_counts_the_steps_done_before_the_cancel():
    result = await demo_tools.crunch.execute({"steps": 10, "pause": 0.001}, ToolContext(signal=TripOnWait(3)))
    assert result == ToolResult(output="cancelled after 2 of 10 steps", is_error=True)


async def test_demo_crunch_without_ctx_runs_to_the_end():
    result = await demo_tools.crunch.execute({"steps": 2, "pause": 0.001}, None)
    assert result == ToolResult(output="crunched 2 of 2 steps", is_error=False)


async def test_demo_fetchish_uses_its_own_default_without_a_timeout():
    for ctx in (None, ToolContext(), ToolContext(timeout=None)):
        result = await demo_tools.fetchish.execute({"url": "https://x.invalid/", "work": 0.01}, ctx)
        assert result.is_error is False, ctx
        assert result.output.startswith("fetched https://x.invalid/ within 30s"), ctx


async def test_demo_fetchish_respects_the_callers_timeout():
    slow = await demo_tools.fetchish.execute({"url": "u", "work": 5}, ToolContext(timeout=0.1))
    assert slow == ToolResult(output="could not fetch u within 0.1s", is_error=True)
    tiny = await demo_tools.fetchish.execute({"url": "u"}, ToolContext(timeout=0.05))
    assert tiny == ToolResult(output="budget 0.050s is too small to try", is_error=True)
    fast = await demo_tools.fetchish.execute({"url": "u", "work": 0.01}, ToolContext(timeout=2))
    assert fast.is_error is False and fast.output.startswith("fetched u within 2s")


async def test_demo_fetchish_gives_up_when_its_token_is_tripped():
    token = CancelToken()
    token.trip("cancelled")
    result = await demo_tools.fetchish.execute({"url": "u", "work": 5}, ToolContext(signal=token, timeout=10))
    assert result == ToolResult(output="gave up on u: cancelled", is_error=True)


async def test_demo_fetchish_run_gets_the_run_timeout():
    done = await finished(await runner.start_run(tool="fetchish", args={"url": "u", "work": 0.01}, timeout=5))
    assert done.status == RunStatus.SUCCEEDED
    # The budget the tool reports is what is left of the run's 5 s, not its own 30 s default.
    budget = float(re.match(r"fetched u within ([\d.]+)s", done.result_output).group(1))
    assert 4 < budget <= 5


async def test_demo_balance_reports_the_balance_after_authorization(console_events):
    run = await runner.start_run(tool="balance", args={"account": "globex"})
    opened = await console_events.next("request.opened", run_id=run.pk)
    assert opened["request"]["kind"] == "authorization"
    assert opened["request"]["url"] == "https://bank.example.com/oauth/authorize?account=globex"
    await decisions.aresolve_request(opened["request_id"], ok=True)
    done = await finished(run)
    assert done.status == RunStatus.SUCCEEDED
    assert done.result_output == "balance of globex: 87.00 EUR"


# -- recovery ------------------------------------------------------------------------------


def test_recovery_interrupts_other_owners_runs_that_were_executing():
    running = Run.objects.create(tool="crunch", status=RunStatus.RUNNING, owner="other")
    waiting = Run.objects.create(tool="deploy", status=RunStatus.WAITING, owner="other")
    queued = Run.objects.create(tool="deploy", status=RunStatus.QUEUED, owner="other")
    mine = Run.objects.create(tool="crunch", status=RunStatus.RUNNING, owner="me")
    finished_runs = {
        status: Run.objects.create(tool="deploy", status=status, owner="other", result_output="kept")
        for status in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.TIMED_OUT)
    }
    # Asked from inside a running call (not a §10 suspension the tool returned): it cannot survive a restart.
    request = Request.objects.create(id="orphan-1", run=waiting, kind="input", prompt="env?", resumable=False)

    recovery = runs.recover_orphaned_runs("me")
    assert sorted(recovery.interrupted) == sorted([running.pk, waiting.pk, queued.pk])
    assert recovery.adopted == []

    for run in (running, waiting, queued):
        run.refresh_from_db()
        assert run.status == RunStatus.INTERRUPTED
        assert run.finished_at is not None
    mine.refresh_from_db()
    assert mine.status == RunStatus.RUNNING
    for status, run in finished_runs.items():
        run.refresh_from_db()
        assert (run.status, run.result_output, run.finished_at) == (status, "kept", None)
    request.refresh_from_db()
    assert (request.status, request.answer_reason) == (RequestStatus.CANCELLED, "cancelled")
    interrupted = AuditEvent.objects.filter(action=AuditEvent.Action.RUN_INTERRUPTED)
    assert sorted(interrupted.values_list("run_id", flat=True)) == sorted([running.pk, waiting.pk, queued.pk])
    assert {e.payload["previous_owner"] for e in interrupted} == {"other"}
    assert interrupted.get(run=waiting).payload["previous_status"] == "waiting"
    assert runs.recover_orphaned_runs("me").interrupted == []
