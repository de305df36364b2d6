"""Console processes and their runs: who is alive, who takes over, and that a run resumes once.

The rules in approvals/runs/processes.py are checked on rows; the supervisor's heartbeat,
safety poll and resume claim are checked in this process with other processes played
by rows (a process that stopped beating, one that took a run over). The same story
with real daphne processes on PostgreSQL and Redis is in tests/cluster/.
"""

import asyncio
import os
import subprocess
import sys
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals import selectors
from approvals.models import AuditEvent, ConsoleProcess, Request, RequestStatus, Run, RunKind, RunStatus
from approvals.review import decisions
from approvals.runs import processes, runner
from approvals.runs import services as runs
from approvals.runs.cancel import CancelToken
from approvals.runs.loop_rule import execute_run
from approvals.signing import keys
from tests.support.changes import recorded_without_notice
from tests.support.statements import counting_statements

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _stop_leftover_runs(stop_leftover_runs):
    """Every test here cancels what it left running (the fixture is in tests/conftest.py)."""


def a_process(process_id, *, silent_for=0.0, pid=None, hostname=None):
    return ConsoleProcess.objects.create(
        pk=process_id,
        hostname=hostname or processes.HOSTNAME,
        pid=pid if pid is not None else os.getpid(),
        last_beat=timezone.now() - timedelta(seconds=silent_for),
    )


def a_pid_that_has_exited():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# -- who is alive ---------------------------------------------------------------------------------


def test_an_owner_is_dead_without_a_row_when_silent_or_when_its_pid_is_gone(settings):
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "HEARTBEAT_TIMEOUT_SECONDS": 10}
    a_process("beating", silent_for=1)
    a_process("silent", silent_for=11)
    a_process("exited", pid=a_pid_that_has_exited())
    a_process("elsewhere", hostname="another-host", pid=a_pid_that_has_exited())  # its pid means nothing here
    for owner in ("beating", "silent", "exited", "elsewhere", "never-registered", "me"):
        Run.objects.create(tool="deploy", status=RunStatus.WAITING, owner=owner)

    assert processes.dead_owners("me") == {"silent", "exited", "never-registered"}
    assert sorted(processes.forget_dead_processes("me")) == ["exited", "silent"]
    assert set(ConsoleProcess.objects.values_list("pk", flat=True)) == {"beating", "elsewhere"}


def test_a_beat_after_being_declared_dead_says_so_and_registers_again():
    assert processes.beat("vm:123:abc") is False  # a first beat: there was no row
    assert processes.beat("vm:123:abc") is True
    ConsoleProcess.objects.filter(pk="vm:123:abc").delete()  # another process declared it dead
    assert processes.beat("vm:123:abc") is False
    assert ConsoleProcess.objects.get(pk="vm:123:abc").pid == 123


def test_recovery_leaves_the_runs_of_a_live_process_alone():
    a_process("live-member")
    live_running = Run.objects.create(tool="crunch", status=RunStatus.RUNNING, owner="live-member")
    live_waiting = Run.objects.create(tool="deploy", status=RunStatus.WAITING, owner="live-member")
    Request.objects.create(id="live-1", run=live_waiting, kind="input", prompt="env?", resumable=True)
    dead_running = Run.objects.create(tool="crunch", status=RunStatus.RUNNING, owner="dead-member")

    recovery = runs.recover_orphaned_runs("me")
    assert (recovery.interrupted, recovery.adopted) == ([dead_running.pk], [])
    for run in (live_running, live_waiting):
        run.refresh_from_db()
        assert run.owner == "live-member" and run.status in (RunStatus.RUNNING, RunStatus.WAITING)


def test_exactly_one_process_claims_the_resume_of_an_answer():
    run = Run.objects.create(tool="deploy", status=RunStatus.RUNNING, owner="a")
    Request.objects.create(id="claim-1", run=run, kind="approval", prompt="go?", resumable=True)
    assert processes.claim_resume(run.pk, "claim-1", "b") is False  # not the owner
    assert processes.claim_resume(run.pk, "claim-1", "a") is True
    assert processes.claim_resume(run.pk, "claim-1", "a") is False  # a second resume of the same answer
    assert Request.objects.get(pk="claim-1").resumed_by == "a"


def test_a_waiting_run_reads_its_answer_and_claims_its_resume_in_one_call():
    from toolnexus import Answer

    run = Run.objects.create(tool="deploy", status=RunStatus.WAITING, owner="a")
    Request.objects.create(id="claim-2", run=run, kind="approval", prompt="go?", resumable=True)
    assert processes.stored_answer_and_claim("claim-2", run.pk, "a") == (None, None)  # open: nothing claimed
    assert Request.objects.get(pk="claim-2").resumed_by == ""
    Request.objects.filter(pk="claim-2").update(status="answered", answer_ok=True, answer_data={"go": 1})
    answered = Answer(id="claim-2", ok=True, data={"go": 1}, reason=None)
    assert processes.stored_answer_and_claim("claim-2", run.pk, "b") == (answered, False)  # not the owner
    assert processes.stored_answer_and_claim("claim-2", run.pk, "a") == (answered, True)
    assert processes.stored_answer_and_claim("claim-2", run.pk, "b") == (answered, False)  # the resume is a's
    assert Request.objects.get(pk="claim-2").resumed_by == "a"


def test_an_answer_in_the_runs_own_process_claims_its_resume_in_the_answers_transaction():
    from toolnexus import Answer

    run = Run.objects.create(tool="deploy", status=RunStatus.WAITING, owner=runner.PROCESS_ID)
    Request.objects.create(id="here-1", run=run, kind="approval", prompt="go?", resumable=True)
    keys.register_current_key_once()  # as a process's first answer (or its supervisor's start) has done
    with counting_statements() as answering:
        decisions.resolve_request("here-1", ok=True)
    assert Request.objects.get(pk="here-1").resumed_by == runner.PROCESS_ID
    assert len(answering.write_transactions()) == 1  # the answer's own

    with counting_statements() as waking:  # the run's task, woken in this process
        read = processes.stored_answer_and_claim("here-1", run.pk, runner.PROCESS_ID)
    assert read == (Answer(id="here-1", ok=True, data=None, reason=None), True)
    assert (len(waking.taken()), waking.write_transactions()) == (1, [])  # one SELECT, no write
    assert processes.stored_answer_and_claim("here-1", run.pk, "another") == (read[0], False)


def test_an_answer_leaves_the_resume_to_the_owners_task_when_the_run_is_another_processs_or_an_agents():
    theirs = Run.objects.create(tool="deploy", status=RunStatus.WAITING, owner="another")
    agent = Run.objects.create(kind=RunKind.AGENT, status=RunStatus.WAITING, owner=runner.PROCESS_ID)
    for run, request_id in ((theirs, "theirs-1"), (agent, "agent-1")):
        Request.objects.create(id=request_id, run=run, kind="approval", prompt="go?", resumable=True)
        decisions.resolve_request(request_id, ok=True)
        assert Request.objects.get(pk=request_id).resumed_by == ""
    # Its owner's task claims it then, as before the answer could (or its adopter, had it died).
    assert processes.stored_answer_and_claim("theirs-1", theirs.pk, "another")[1] is True
    assert Request.objects.get(pk="theirs-1").resumed_by == "another"


async def test_a_cancel_heard_before_a_new_runs_token_is_here_trips_it_when_it_is(console_events):
    sup = await runner.ensure_started()
    run = await sync_to_async(runs.create_run)(
        tool="crunch", args={"steps": 1000, "pause": 0.05}, timeout=None, user=None, owner=runner.PROCESS_ID
    )
    # Cancelled by another process between the run's commit and its token (its notice caught by the safety
    # net), so the token is not there to trip yet.
    await recorded_without_notice(
        Run.objects.filter(pk=run.pk).update,
        {"cancel_requested": True},
        action=AuditEvent.Action.RUN_CANCEL_REQUESTED,
        run=run,
    )
    await runner.apply_recorded_changes(sup, "the test")
    assert run.pk not in sup.tokens

    token = CancelToken()
    runner.supervise(sup, run.pk, token, execute_run(run.pk, "crunch", {"steps": 1000, "pause": 0.05}, None, token))
    assert token.reason == "cancelled"
    assert (await finished(run.pk)).status == RunStatus.CANCELLED


# -- the supervisor: heartbeat, takeover, safety poll ------------------------------------------------


async def opened_request(console_events, run):
    return (await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk))["request_id"]


async def finished(run_id, timeout=10):
    await asyncio.wait_for(runner.wait_for_run(run_id), timeout)
    return await Run.objects.aget(pk=run_id)


async def test_the_heartbeat_adopts_a_silent_processs_waiting_run_and_interrupts_its_executing_one(settings):
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "HEARTBEAT_TIMEOUT_SECONDS": 5}
    sup = await runner.ensure_started()

    @sync_to_async
    def a_silent_member_with_two_runs():
        # In one transaction: the background heartbeat sees all of it or none of it.
        with transaction.atomic():
            ConsoleProcess.objects.create(
                pk="silent-member", hostname="another-host", pid=1, last_beat=timezone.now() - timedelta(seconds=6)
            )
            executing = Run.objects.create(tool="crunch", status=RunStatus.RUNNING, owner="silent-member")
            waiting = Run.objects.create(
                tool="deploy", args={"service": "api"}, status=RunStatus.WAITING, owner="silent-member"
            )
            Request.objects.create(
                id="adopt-me",
                run=waiting,
                kind="input",
                prompt="env?",
                resumable=True,
                tool="deploy",
                args={"service": "api"},
            )
        return executing, waiting

    executing, waiting = await a_silent_member_with_two_runs()
    await runner.beat_once(sup)  # if the background heartbeat got there first, this one finds nothing left

    assert (await Run.objects.aget(pk=executing.pk)).status == RunStatus.INTERRUPTED
    adopted = await Run.objects.aget(pk=waiting.pk)
    assert (adopted.status, adopted.owner) == (RunStatus.WAITING, runner.PROCESS_ID)
    assert not await ConsoleProcess.objects.filter(pk="silent-member").aexists()
    await decisions.aresolve_request("adopt-me", ok=True, data={"env": "staging"})
    done = await finished(waiting.pk)
    assert (done.status, done.result_output) == (RunStatus.SUCCEEDED, "deployed to staging")
    assert (await Request.objects.aget(pk="adopt-me")).resumed_by == runner.PROCESS_ID


async def test_a_run_taken_over_by_another_process_stops_here_and_withdraws_nothing(console_events):
    sup = await runner.ensure_started()
    run = await runner.start_run(tool="deploy", args={"service": "web"})
    request_id = await opened_request(console_events, run)
    # Another process thought this one dead and adopted the run; its notice never arrived here.
    await recorded_without_notice(
        Run.objects.filter(pk=run.pk).update,
        {"owner": "the-new-owner"},
        action=AuditEvent.Action.RUN_ADOPTED,
        run=run,
        payload={"previous_owner": runner.PROCESS_ID, "requests": [request_id]},
    )

    task = sup.tasks[run.pk]
    await runner.beat_once(sup)
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)

    request = await Request.objects.aget(pk=request_id)
    assert request.status == RequestStatus.OPEN  # still there for the new owner to resume
    assert (await Run.objects.aget(pk=run.pk)).status == RunStatus.WAITING


async def test_an_answer_the_new_owner_claimed_does_not_resume_the_run_here(console_events):
    run = await runner.start_run(tool="deploy", args={"service": "web"})
    request_id = await opened_request(console_events, run)
    # Another process adopted the run and claimed the resume before this one woke up.
    await Request.objects.filter(pk=request_id).aupdate(resumed_by="the-new-owner")
    await decisions.aresolve_request(request_id, ok=True, data={"env": "production"})

    with pytest.raises(asyncio.CancelledError):
        await finished(run.pk)
    after = await Run.objects.aget(pk=run.pk)
    assert after.result_output is None  # the tool was not executed again here
    assert not await AuditEvent.objects.filter(run=run, action=AuditEvent.Action.RUN_FINISHED).aexists()


async def test_a_cancel_whose_notification_was_lost_trips_the_token_on_the_next_beat(console_events):
    sup = await runner.ensure_started()
    run = await runner.start_run(tool="crunch", args={"steps": 1000, "pause": 0.05})
    await console_events.next(AuditEvent.Action.RUN_STARTED, run_id=run.pk)
    # Recorded in the database by another process; the notice never arrived here.
    await recorded_without_notice(
        Run.objects.filter(pk=run.pk).update,
        {"cancel_requested": True},
        action=AuditEvent.Action.RUN_CANCEL_REQUESTED,
        run=run,
    )

    await runner.beat_once(sup)

    assert sup.tokens[run.pk].reason == "cancelled"
    assert (await finished(run.pk)).status == RunStatus.CANCELLED


async def test_the_safety_poll_resumes_a_run_whose_answer_notification_was_lost(console_events):
    run = await runner.start_run(tool="deploy", args={"service": "web"})
    request_id = await opened_request(console_events, run)
    # Answered in the database with no event published (a lost notification).
    await recorded_without_notice(
        Request.objects.filter(pk=request_id).update,
        {"status": RequestStatus.ANSWERED, "answer_ok": True, "answer_data": {"env": "staging"}},
        action=AuditEvent.Action.REQUEST_ANSWERED,
        run=run,
        request_id=request_id,
    )
    done = await finished(run.pk)  # within SAFETY_POLL_SECONDS (0.5 s in tests)
    assert (done.status, done.result_output) == (RunStatus.SUCCEEDED, "deployed to staging")


def beat_statements(waiting):
    """The SQL one heartbeat sends while ``waiting`` runs wait here (each on one request)."""
    runs_waiting = [
        Run.objects.create(tool="deploy", status=RunStatus.WAITING, owner=runner.PROCESS_ID) for _ in range(waiting)
    ]
    sup = runner.Supervisor(loop=None)
    sup.tasks = {run.pk: None for run in runs_waiting}
    sup.waiters = {f"req-{run.pk}": set() for run in runs_waiting}
    sup.seen_seq = selectors.last_seq()
    with CaptureQueriesContext(connection) as captured:
        async_to_sync(runner.beat_once)(sup)
    Run.objects.filter(pk__in=[run.pk for run in runs_waiting]).delete()
    return [query["sql"] for query in captured.captured_queries]


def test_a_heartbeat_reads_what_changed_not_every_waiting_run():
    # The safety net's reads follow the changes: 500 waiting runs cost what 5 do, statement for statement.
    few, many = beat_statements(5), beat_statements(500)
    assert len(many) == len(few)
    assert sum(len(sql) for sql in many) == sum(len(sql) for sql in few)


def first_pending_id_of_a_new_process():
    code = (
        "import django; django.setup(); from toolnexus import pending; "
        "print(pending(kind='approval', prompt='go?').metadata['pending'].id)"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "toolnexus_site.settings"}
    return subprocess.run(
        [sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def test_two_console_processes_do_not_number_their_pending_requests_alike():
    # toolnexus names a request pnd-<ms>-<counter>; the console starts the counter at random per process.
    counters = {first_pending_id_of_a_new_process().rsplit("-", 1)[1] for _ in range(2)}
    assert len(counters) == 2 and "1" not in counters


def event_numbered(pk, action, run):
    """An audit event committed with id ``pk``: on PostgreSQL a transaction that took a lower id can commit later."""
    return AuditEvent.objects.create(pk=pk, action=action, actor="system", run=run)


def test_the_safety_net_comes_back_for_an_event_committed_below_one_it_read(monkeypatch):
    # PostgreSQL: an event is one INSERT with no lock, so ids are not the commit order across transactions.
    monkeypatch.setattr(selectors, "ids_follow_commits", lambda: False)
    run = Run.objects.create(tool="deploy", status=RunStatus.WAITING, owner=runner.PROCESS_ID)
    seq = event_numbered(100, AuditEvent.Action.RUN_STARTED, run).pk
    event_numbered(seq + 2, AuditEvent.Action.RUN_CANCEL_REQUESTED, run)  # committed while seq + 1 was still open

    upto, changes, missing = processes.changes_after(seq)
    assert (upto, [c.seq for c in changes], missing) == (seq + 2, [seq + 2], [seq + 1])

    event_numbered(seq + 1, AuditEvent.Action.RUN_INTERRUPTED, run)  # the open one commits, below what was read
    upto, changes, missing = processes.changes_after(upto, missing)
    assert (upto, [c.seq for c in changes], missing) == (seq + 2, [seq + 1], [])


def test_the_supervisor_keeps_an_unseen_id_until_it_comes_or_expires(monkeypatch):
    sup = runner.Supervisor(loop=None)
    clock = [1000.0]
    monkeypatch.setattr(runner.time, "monotonic", lambda: clock[0])
    sup.note_unseen([7, 9])
    clock[0] += 30
    sup.note_unseen([9, 12])  # 7 came; 9 still missing since its first look
    assert sup.unseen == {9: 1000.0, 12: 1030.0}
    clock[0] += 31
    sup.note_unseen([9, 12])  # 9 was lost to a rollback: no open transaction holds an id a minute
    assert sup.unseen == {12: 1030.0}
