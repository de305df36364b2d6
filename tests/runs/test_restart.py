"""Durable runs: the console stops and starts while runs wait, and the waiting goes on.

The first half is a real process test: daphne on a free loopback port with its own
SQLite file (tests/support/live_console.py), stopped with SIGTERM while runs wait and while
runs execute, then started again on the same database; everything is driven and
observed through the HTTP API with API tokens. The second half plays the same story
inside one process (the old process's tasks vanish without a word; a fresh
supervisor recovers the database) to cover the resume paths in detail and quickly.
"""

import asyncio
import signal
from pathlib import Path

import pytest
from toolnexus import Answer, ToolResult, define_tool, pending

from approvals.models import AuditEvent, Request, RequestStatus, Run, RunStatus, TranscriptEntry
from approvals.review import decisions
from approvals.runs import runner, waiting
from approvals.runs.runner import start_agent_run
from approvals.runs.supervisor import supervisors_by_loop
from tests.support.kill_points import KillPoints
from tests.support.live_console import (
    CREATE_USERS,
    LiveConsole,
    console_env,
    daphne_process,
    manage,
    open_requests_of,
    poll,
    running_daphne,
    start,
)

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


# -- a real process, stopped and started again ------------------------------------------------------


class Restartable:
    """One console database served by successive daphne processes."""

    def __init__(self, workdir):
        self.db_path = Path(workdir) / "restart.sqlite3"
        self.env = console_env(self.db_path)
        manage(self.env, "migrate", "--noinput")
        manage(self.env, "shell", "-c", CREATE_USERS, "--no-imports")
        self.tokens = {
            username: manage(self.env, "issue_token", username, "--name", "restart-tests").strip()
            for username in ("reviewer", "host-svc")
        }
        ARTIFACTS.mkdir(exist_ok=True)
        self.lives = 0

    def serve(self):
        """A context manager: daphne on a new free port until the block ends (then SIGTERM)."""
        self.lives += 1
        return running_daphne(self.env, ARTIFACTS / f"restart-daphne-{self.lives}.log")

    def console(self, port):
        return LiveConsole(
            base_url=f"http://127.0.0.1:{port}",
            port=port,
            db_path=self.db_path,
            log_path=ARTIFACTS / f"restart-daphne-{self.lives}.log",
            env=self.env,
            tokens=self.tokens,
        )


def test_waiting_runs_survive_a_restart_and_executing_runs_are_interrupted(tmp_path):
    console_db = Restartable(tmp_path)
    long_crunch = {"steps": 100000, "pause": 0.05}

    with console_db.serve() as port:
        first = console_db.console(port)
        deploy = start(first, {"tool": "deploy", "args": {"service": "api"}})
        agent = start(
            first,
            {
                "agent": {
                    "prompt": 'call refund with {"amount": 5} and call deploy then call crunch with {"steps": 2, "pause": 0}'
                }
            },
        )
        crunch = start(first, {"tool": "crunch", "args": long_crunch})
        busy_agent = start(first, {"agent": {"prompt": 'call crunch with {"steps": 100000, "pause": 0.05}'}})

        poll(first, f"/api/v1/runs/{deploy}", lambda r: r["status"] == "waiting", what="the deploy run waiting")
        poll(
            first,
            f"/api/v1/runs/{agent}/transcript",
            lambda t: any(e["kind"] == "waiting" for e in t["entries"]),
            what="the agent loop blocking",
        )
        poll(
            first,
            f"/api/v1/runs/{busy_agent}/transcript",
            lambda t: any(e["kind"] == "assistant" for e in t["entries"]),
            what="the busy agent calling crunch",
        )
        assert first.call("GET", f"/api/v1/runs/{crunch}")[1]["status"] == "running"
        refund_request, deploy_in_agent = sorted(open_requests_of(first, agent), key=lambda r: r["tool"], reverse=True)
        assert (refund_request["tool"], deploy_in_agent["tool"]) == ("refund", "deploy")
        # Answered before the stop, while the loop is blocked on the refund: kept, and used after the restart.
        status, _ = first.call(
            "POST", f"/api/v1/requests/{deploy_in_agent['id']}/answer", {"ok": True, "data": {"env": "staging"}}
        )
        assert status == 200
    # daphne got SIGTERM here: nothing withdrew the open requests.

    with console_db.serve() as port:
        second = console_db.console(port)
        # The first request starts the new supervisor, which recovers what the old process left.
        assert poll(second, f"/api/v1/runs/{crunch}", lambda r: r["status"] != "running")["status"] == "interrupted"
        assert second.call("GET", f"/api/v1/runs/{busy_agent}")[1]["status"] == "interrupted"
        assert second.call("GET", f"/api/v1/runs/{deploy}")[1]["status"] == "waiting"
        assert second.call("GET", f"/api/v1/runs/{agent}")[1]["status"] == "waiting"

        [deploy_request] = open_requests_of(second, deploy)
        status, answer = second.call(
            "POST", f"/api/v1/requests/{deploy_request['id']}/answer", {"ok": True, "data": {"env": "production"}}
        )
        assert status == 200, answer
        done = poll(
            second, f"/api/v1/runs/{deploy}", lambda r: r["status"] == "succeeded", what="the deploy run finishing"
        )
        assert done["result"] == {"output": "deployed to production", "is_error": False}

        [still_open] = open_requests_of(second, agent)
        assert still_open["id"] == refund_request["id"]
        status, _ = second.call("POST", f"/api/v1/requests/{still_open['id']}/answer", {"ok": True})
        assert status == 200
        done = poll(
            second, f"/api/v1/runs/{agent}", lambda r: r["status"] == "succeeded", what="the agent run finishing"
        )
        assert done["result"]["output"] == (
            "Done. 3 tool calls:\n- refund: refunded 5 EUR on order A-1001\n- deploy: deployed to staging\n"
            "- crunch: crunched 2 of 2 steps"
        )
        kinds = [e["kind"] for e in second.call("GET", f"/api/v1/runs/{agent}/transcript")[1]["entries"]]
        assert "resumed" in kinds and kinds[-1] == "finished"
        assert kinds.count("prompt") == 1  # resumed without a new user turn

        # One click on Retry: a new run with the same input, linked to the interrupted one.
        status, again = second.call("POST", f"/api/v1/runs/{crunch}/retry", token=second.host_token)
        assert status == 201, again
        assert (again["tool"], again["args"], again["retry_of"], again["status"]) == (
            "crunch",
            long_crunch,
            crunch,
            "running",
        )
        status, agent_again = second.call("POST", f"/api/v1/runs/{busy_agent}/retry", token=second.host_token)
        assert status == 201 and agent_again["kind"] == "agent" and agent_again["retry_of"] == busy_agent
        for run_id in (again["id"], agent_again["id"]):
            assert second.call("POST", f"/api/v1/runs/{run_id}/cancel", token=second.host_token)[0] == 202
            poll(second, f"/api/v1/runs/{run_id}", lambda r: r["status"] == "cancelled", what=f"run {run_id} cancelled")


ANSWER_AT_THE_DOOR = """
from django.contrib.auth.models import User
from approvals.models import Run
from approvals.review.decisions import resolve_request
answer = resolve_request({request_id!r}, ok=True, user=User.objects.get(username="reviewer"))
print(answer.ok, Run.objects.get(requests__id={request_id!r}).status)
"""


def test_a_console_killed_at_each_point_of_a_run_is_restarted_with_each_documented_outcome(tmp_path):
    """SIGKILL at each point of docs/operations.md's table, then a restart on the same SQLite file.

    "after_answer": the console is frozen (SIGSTOP), the answer is accepted at the door by another
    process on the same database (manage.py, as a second console would), then the console is killed:
    it never got to resume the run.
    """
    executions_log = tmp_path / "executions.jsonl"
    executions_log.touch()
    console_db = Restartable(tmp_path)
    console_db.env.update(
        TOOLNEXUS_TOOL_MODULES="tests.cluster.cluster_tools", CLUSTER_EXECUTIONS_LOG=str(executions_log)
    )
    points = KillPoints("restart", executions_log)

    console_db.lives += 1
    with daphne_process(console_db.env, ARTIFACTS / f"restart-daphne-{console_db.lives}.log") as first:
        points.set_up(console_db.console(first.port))
        first.send_signal(signal.SIGSTOP)
        try:
            answer = ANSWER_AT_THE_DOOR.format(request_id=points.requests["after_answer"])
            said = manage(console_db.env, "shell", "-c", answer, "--no-imports")
            assert said.split() == ["True", "running"]  # accepted; the door let the run go on, nobody did
        finally:
            first.kill()
            first.wait()
        died = first.pid

    console_db.lives += 1
    with daphne_process(console_db.env, ARTIFACTS / f"restart-daphne-{console_db.lives}.log") as second:
        points.check(console_db.console(second.port), died=died, carried_on=second.pid)


# -- the same story inside one process --------------------------------------------------------------


pytestmark = pytest.mark.django_db(transaction=True)
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


async def finished(run_id, timeout=15):
    await asyncio.wait_for(runner.wait_for_run(run_id), timeout)
    return await Run.objects.aget(pk=run_id)


@pytest.fixture(autouse=True)
def _stop_leftover_runs(stop_leftover_runs):
    """Every test here cancels what it left running (the fixture is in tests/conftest.py)."""


async def blocked(console_events, run_id):
    """The next time the agent loop blocks on a reviewer (its ``waiting`` transcript entry)."""
    while True:
        frame = await console_events.next(AuditEvent.Action.RUN_TRANSCRIPT, run_id=run_id)
        if frame["payload"]["kind"] == "waiting":
            return frame["payload"]


async def test_a_waiting_tool_run_is_adopted_and_its_answer_re_executes_the_tool(console_events):
    run = await runner.start_run(tool="deploy", args={"service": "web"})
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk)
    await stop_the_process(pytest.MonkeyPatch(), run.pk)

    await runner.ensure_started()  # the next process starts
    adopted = await Run.objects.aget(pk=run.pk)
    assert (adopted.status, adopted.owner) == (RunStatus.WAITING, runner.PROCESS_ID)
    assert await AuditEvent.objects.filter(run=run, action=AuditEvent.Action.RUN_ADOPTED).aexists()
    await decisions.aresolve_request(opened["request_id"], ok=True, data={"env": "staging"})
    done = await finished(run.pk)
    assert (done.status, done.result_output) == (RunStatus.SUCCEEDED, "deployed to staging")


async def test_an_agent_run_resumes_its_halted_turn_across_two_restarts(extra_tools, console_events):
    calls = []

    async def ask(hint: str = "", ctx=None):
        calls.append((hint, getattr(ctx.answer, "data", None)))
        if ctx.answer is not None:
            return f"{hint} -> {ctx.answer.data['pick']}"
        return pending(
            kind="input",
            prompt=f"Pick for {hint}",
            data={"schema": {"type": "object", "properties": {"pick": {"type": "string"}}}},
        )

    extra_tools(define_tool(ask, name="ask"))
    run = await start_agent_run(
        agent={
            "prompt": 'call ask with {"hint": "a"} and call ask with {"hint": "b"} then call crunch with {"steps": 1, "pause": 0}'
        }
    )
    await blocked(console_events, run.pk)
    requests = {r.args["hint"]: r.pk async for r in Request.objects.filter(run=run)}
    await decisions.aresolve_request(requests["b"], ok=True, data={"pick": "blue"})  # the loop still waits on "a"

    await stop_the_process(pytest.MonkeyPatch(), run.pk)
    await runner.ensure_started()
    assert (await blocked(console_events, run.pk))["request"] == requests["a"]  # resumed, blocked on "a" again
    await stop_the_process(pytest.MonkeyPatch(), run.pk)
    await runner.ensure_started()
    assert (await blocked(console_events, run.pk))["request"] == requests["a"]

    await decisions.aresolve_request(requests["a"], ok=True, data={"pick": "red"})
    done = await finished(run.pk)
    assert done.status == RunStatus.SUCCEEDED, done.result_output
    assert (
        done.result_output == "Done. 3 tool calls:\n- ask: a -> red\n- ask: b -> blue\n- crunch: crunched 1 of 1 steps"
    )
    assert calls == [("a", None), ("b", None), ("a", {"pick": "red"}), ("b", {"pick": "blue"})]  # each retried once
    kinds = [e.kind async for e in TranscriptEntry.objects.filter(run=run).order_by("seq")]
    assert kinds.count(TranscriptEntry.Kind.RESUMED) == 2 and kinds.count(TranscriptEntry.Kind.PROMPT) == 1


async def test_runs_that_were_executing_are_interrupted_and_their_requests_withdrawn(console_events):
    crunch = await runner.start_run(tool="crunch", args={"steps": 100000, "pause": 0.05})
    agent = await start_agent_run(agent={"prompt": 'call crunch with {"steps": 100000, "pause": 0.05}'})
    await console_events.next(AuditEvent.Action.RUN_TRANSCRIPT, run_id=agent.pk)
    await stop_the_process(pytest.MonkeyPatch(), crunch.pk, agent.pk)
    await runner.ensure_started()
    for run in (crunch, agent):
        stopped = await Run.objects.aget(pk=run.pk)
        assert stopped.status == RunStatus.INTERRUPTED
        assert await AuditEvent.objects.filter(run=run, action=AuditEvent.Action.RUN_INTERRUPTED).aexists()


def test_recovery_adopts_only_runs_that_wait_on_suspensions():
    from approvals.runs import services as runs

    waiting = Run.objects.create(tool="deploy", status=RunStatus.WAITING, owner="other")
    Request.objects.create(id="kept-1", run=waiting, kind="input", prompt="env?", resumable=True)
    asking = Run.objects.create(tool="trips_book_trip", status=RunStatus.WAITING, owner="other")
    Request.objects.create(id="elicited-1", run=asking, kind="input", prompt="city?", resumable=False)

    recovery = runs.recover_orphaned_runs("me")

    assert (recovery.adopted, recovery.interrupted) == ([waiting.pk], [asking.pk])
    waiting.refresh_from_db()
    assert (waiting.status, waiting.owner) == (RunStatus.WAITING, "me")
    assert Request.objects.get(pk="kept-1").status == RequestStatus.OPEN
    elicited = Request.objects.get(pk="elicited-1")
    assert (elicited.status, elicited.answer_reason) == (RequestStatus.CANCELLED, "cancelled")
    assert runs.recover_orphaned_runs("me").adopted == []  # already ours


# -- the points at which a process can die during a run (docs/operations.md, "When a console dies") ------


PICK_SCHEMA = {"type": "object", "properties": {"pick": {"type": "string"}}}


def recording_tool(name, calls, *, hold_on_retry=None):
    """A tool that records each execution with its answer; ``hold_on_retry`` (an Event) is set as its retry
    starts, and the retry then works until the run's token trips."""

    async def execute(label: str = "", ctx=None):
        answer = getattr(ctx, "answer", None)
        calls.append((label, None if answer is None else answer.data))
        if answer is None:
            return pending(kind="input", prompt=f"Pick for {label}", data={"schema": PICK_SCHEMA})
        if hold_on_retry is not None:
            hold_on_retry.set()
            await ctx.signal.wait()
            return ToolResult(output=f"{label} stopped", is_error=True)
        return f"{label} -> {answer.data['pick']}"

    return define_tool(execute, name=name)


async def test_an_answer_accepted_after_the_process_stopped_resumes_the_tool_run_once(extra_tools, console_events):
    calls = []
    extra_tools(recording_tool("record", calls))
    run = await runner.start_run(tool="record", args={"label": "r"})
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk)
    await stop_the_process(pytest.MonkeyPatch(), run.pk)
    # Accepted at the door while nobody owns the run: the door lets the run go on (waiting -> running).
    await decisions.aresolve_request(opened["request_id"], ok=True, data={"pick": "red"})
    assert (await Run.objects.aget(pk=run.pk)).status == RunStatus.RUNNING

    await runner.ensure_started()
    done = await finished(run.pk)
    assert (done.status, done.result_output) == (RunStatus.SUCCEEDED, "r -> red")
    assert calls == [("r", None), ("r", {"pick": "red"})]
    assert (await Request.objects.aget(pk=opened["request_id"])).resumed_by == runner.PROCESS_ID
    adopted = await AuditEvent.objects.aget(run=run, action=AuditEvent.Action.RUN_ADOPTED)
    assert adopted.payload == {"previous_owner": STOPPED_OWNER, "requests": [opened["request_id"]]}


async def test_an_answer_accepted_after_the_process_stopped_resumes_the_agent_run_once(extra_tools, console_events):
    calls = []
    extra_tools(recording_tool("record", calls))
    run = await start_agent_run(agent={"prompt": 'call record with {"label": "a"}'})
    waited = await blocked(console_events, run.pk)
    await stop_the_process(pytest.MonkeyPatch(), run.pk)
    await decisions.aresolve_request(waited["request"], ok=True, data={"pick": "green"})

    await runner.ensure_started()
    done = await finished(run.pk)
    assert (done.status, done.result_output) == (RunStatus.SUCCEEDED, "Done. 1 tool call:\n- record: a -> green")
    assert calls == [("a", None), ("a", {"pick": "green"})]


async def test_an_agent_run_that_used_an_answer_in_an_earlier_turn_is_adopted_after_a_restart(
    extra_tools, console_events
):
    """Turn 1's answer was resumed (claimed) long before the process stopped; turn 2 only waits: adopted."""
    calls = []
    extra_tools(recording_tool("record", calls))
    run = await start_agent_run(
        agent={"prompt": 'call record with {"label": "a"} then call record with {"label": "b"}'}
    )
    first = await blocked(console_events, run.pk)
    await decisions.aresolve_request(first["request"], ok=True, data={"pick": "red"})
    second = await blocked(console_events, run.pk)
    await stop_the_process(pytest.MonkeyPatch(), run.pk)

    await runner.ensure_started()
    adopted = await Run.objects.aget(pk=run.pk)
    assert (adopted.status, adopted.owner) == (RunStatus.WAITING, runner.PROCESS_ID)
    await decisions.aresolve_request(second["request"], ok=True, data={"pick": "blue"})
    done = await finished(run.pk)
    assert (done.status, done.result_output) == (
        RunStatus.SUCCEEDED,
        "Done. 2 tool calls:\n- record: a -> red\n- record: b -> blue",
    )
    assert calls == [("a", None), ("a", {"pick": "red"}), ("b", None), ("b", {"pick": "blue"})]


async def test_a_retry_that_was_executing_when_the_process_stopped_is_interrupted_not_run_again(
    extra_tools, console_events
):
    calls = []
    retrying = asyncio.Event()
    extra_tools(recording_tool("record", calls, hold_on_retry=retrying))
    run = await runner.start_run(tool="record", args={"label": "t"})
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk)
    await decisions.aresolve_request(opened["request_id"], ok=True, data={"pick": "blue"})
    await asyncio.wait_for(retrying.wait(), 10)
    await stop_the_process(pytest.MonkeyPatch(), run.pk)

    await runner.ensure_started()
    stopped = await Run.objects.aget(pk=run.pk)
    assert stopped.status == RunStatus.INTERRUPTED
    assert calls == [("t", None), ("t", {"pick": "blue"})]


async def test_an_agent_retry_executing_while_another_suspension_waits_is_interrupted_not_adopted(
    extra_tools, console_events
):
    calls = []
    retrying = asyncio.Event()
    extra_tools(recording_tool("record", calls, hold_on_retry=retrying))
    run = await start_agent_run(agent={"prompt": 'call record with {"label": "a"} and call record with {"label": "b"}'})
    waited = await blocked(console_events, run.pk)
    # "a" is answered and its retry executes; "b" is still open and nobody resumed it: a tool is executing all the same.
    await decisions.aresolve_request(waited["request"], ok=True, data={"pick": "grey"})
    await asyncio.wait_for(retrying.wait(), 10)
    await stop_the_process(pytest.MonkeyPatch(), run.pk)

    await runner.ensure_started()
    stopped = await Run.objects.aget(pk=run.pk)
    assert stopped.status == RunStatus.INTERRUPTED
    assert sorted(calls, key=repr) == [("a", None), ("a", {"pick": "grey"}), ("b", None)]
    assert not await Request.objects.filter(run=run, status=RequestStatus.OPEN).aexists()  # "b" withdrawn


def test_recovery_resumes_a_stored_answer_nobody_resumed_whatever_the_run_status():
    from approvals.runs import services as runs

    answered = Run.objects.create(tool="deploy", status=RunStatus.RUNNING, owner="other")
    Request.objects.create(
        id="answered-1", run=answered, kind="approval", prompt="go?", resumable=True, status=RequestStatus.ANSWERED
    )
    retrying = Run.objects.create(tool="deploy", status=RunStatus.RUNNING, owner="other")
    Request.objects.create(
        id="claimed-1",
        run=retrying,
        kind="approval",
        prompt="go?",
        resumable=True,
        status=RequestStatus.ANSWERED,
        resumed_by="other",
    )
    executing = Run.objects.create(tool="deploy", status=RunStatus.RUNNING, owner="other")

    recovery = runs.recover_orphaned_runs("me")

    assert recovery.adopted == [answered.pk]
    assert sorted(recovery.interrupted) == sorted([retrying.pk, executing.pk])
    answered.refresh_from_db()
    assert (answered.status, answered.owner) == (RunStatus.RUNNING, "me")
    assert runs.resume_point(answered.pk)[1][0].pk == "answered-1"


async def test_an_answer_given_here_between_the_takeover_and_the_adoption_resumes_the_run(extra_tools, console_events):
    """The takeover makes a dead process's runs this one's, then adopts them one by one. Before: an answer given
    here in between claimed the run's resume for this process (its own run by then), the adoption found no
    unclaimed request, and the approved run was marked interrupted instead of going on (outside review)."""
    from approvals.runs import services as runs

    calls = []
    extra_tools(recording_tool("record", calls))
    run = await runner.start_run(tool="record", args={"label": "r"})
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk)
    await stop_the_process(pytest.MonkeyPatch(), run.pk)
    sup = runner.supervisor()  # the next process, before it adopts anything
    assert (await runs.arecover_orphaned_runs(runner.PROCESS_ID)).adopted == [run.pk]  # the takeover's first step

    await decisions.aresolve_request(opened["request_id"], ok=True, data={"pick": "red"})
    await runner.adopt_run(sup, run.pk)

    done = await finished(run.pk)
    assert (done.status, done.result_output) == (RunStatus.SUCCEEDED, "r -> red")
    assert calls == [("r", None), ("r", {"pick": "red"})]
