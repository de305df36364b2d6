"""A run taken over while its owner, declared dead, is in fact still going on (frozen, or starved of CPU
past the heartbeat timeout): whatever the owner does next, exactly one process acts on each answer, and
no answer is accepted that nobody would act on (docs/operations.md, "When a console dies").

The soak (tests/cluster/soak.py) found both: on a loaded machine a live console was taken for dead; an
answer was claimed by it as the other adopted the run (each then let the run go), and a suspension it
opened after its run was interrupted was answered, accepted, and never acted on.

The races between two database connections need PostgreSQL (each statement of a READ COMMITTED
transaction sees its own moment; a SQLite write takes the whole database): those are skipped on SQLite
and run by tests/cluster/test_modules_on_postgresql.py. The other process's step is started from inside
this one's transaction, at a chosen statement, with a statement wrapper on this connection.
"""

import pytest
import toolnexus
from django.db import connection

from approvals.models import THIS_PROCESS_ID, Request, RequestStatus, Run, RunStatus
from approvals.review import decisions
from approvals.runs import processes
from approvals.runs import services as runs
from tests.support.other_connections import BLOCKED_SECONDS, in_another_connection, waiting_on_a_lock

pytestmark = pytest.mark.django_db(transaction=True)


def needs_postgresql():
    if connection.vendor != "postgresql":
        pytest.skip("a race between two connections; SQLite takes the whole database for each write")


def starting_before(other, statement):
    """A statement wrapper that starts ``other`` just before the first statement ``statement(sql)`` accepts,
    and lets that statement go once ``other`` finished or waits on a lock this transaction holds."""

    def wrapper(execute, sql, params, many, context):
        if other.ident is None and statement(sql, params):
            other.start()
            waiting_on_a_lock(other, context["connection"].connection.cursor())
        return execute(sql, params, many, context)

    return wrapper


def answered_run(owner, request_id):
    """A run whose answer the door accepted (it lets the run go on) and nobody has resumed yet."""
    run = Run.objects.create(tool="deploy", status=RunStatus.RUNNING, owner=owner)
    Request.objects.create(
        id=request_id,
        run=run,
        kind="approval",
        prompt="go?",
        resumable=True,
        status=RequestStatus.ANSWERED,
        answer_ok=True,
    )
    return run


def suspension(request_id):
    return toolnexus.Request(id=request_id, kind="approval", prompt="Go ahead?")


def test_an_owner_claiming_its_resume_while_another_process_adopts_the_run_leaves_exactly_one_going_on():
    needs_postgresql()
    run = answered_run("sleeper", "race-1")  # "sleeper" has no heartbeat row: dead to the others
    adopted = []
    adopter = in_another_connection(lambda: adopted.extend(runs.recover_orphaned_runs("adopter").adopted))
    statements = []

    def second_statement(sql, params):
        statements.append(sql)
        return len(statements) == 2  # between the claim's two statements (whichever order they come in)

    with connection.execute_wrapper(starting_before(adopter, second_statement)):
        claimed = processes.claim_resume(run.pk, "race-1", "sleeper")
    adopter.join(BLOCKED_SECONDS)
    assert not adopter.is_alive()

    run.refresh_from_db()
    resumed_by = Request.objects.get(pk="race-1").resumed_by
    # Either the sleeper claimed it and keeps it, or the adopter owns it with the answer still unclaimed
    # (it resumes it itself). Before: the sleeper claimed it and the adopter owned it, so each let it go.
    assert (claimed, run.owner, resumed_by, adopted) in (
        (True, "sleeper", "sleeper", []),
        (False, "adopter", "", [run.pk]),
    )


def test_a_suspension_a_run_returns_after_it_was_interrupted_is_not_opened():
    # Its owner was taken for dead while the tool's first call executed: the run was interrupted.
    run = Run.objects.create(tool="deploy", status=RunStatus.RUNNING, owner="sleeper")
    assert runs.recover_orphaned_runs("me").interrupted == [run.pk]

    # The owner, alive after all, gets the tool's suspension back and opens it.
    with pytest.raises(decisions.DecisionError) as refused:
        decisions.open_request(suspension("late-1"), run_id=run.pk, tool="deploy", resumable=True)
    assert refused.value.code == "not_open"
    assert "has already ended (interrupted)" in str(refused.value)
    # Before: the request opened, a reviewer's answer was accepted (200), and no process ever acted on it.
    assert not Request.objects.filter(pk="late-1").exists()


def test_a_suspension_opening_as_its_run_is_interrupted_is_withdrawn_or_not_opened():
    needs_postgresql()
    run = Run.objects.create(tool="deploy", status=RunStatus.RUNNING, owner="sleeper")
    outcome = []

    def open_it():
        try:
            decisions.open_request(suspension("late-2"), run_id=run.pk, tool="deploy", resumable=True)
            outcome.append("opened")
        except decisions.DecisionError as exc:
            outcome.append(exc.code)

    opener = in_another_connection(open_it)

    def interrupting(sql, params):
        return sql.startswith('UPDATE "approvals_run"') and RunStatus.INTERRUPTED in (params or ())

    with connection.execute_wrapper(starting_before(opener, interrupting)):
        recovery = runs.recover_orphaned_runs("me")
    opener.join(BLOCKED_SECONDS)
    assert not opener.is_alive()

    assert recovery.interrupted == [run.pk]
    # Opened before the interruption and withdrawn with it, or refused: never open on an ended run.
    # Before: it opened between the read of the run's open requests and the interruption, and stayed open.
    statuses = list(Request.objects.filter(run=run).values_list("status", flat=True))
    assert (outcome, statuses) in ((["opened"], [RequestStatus.CANCELLED]), (["not_open"], [])), (outcome, statuses)


@pytest.mark.parametrize("adopter_starts_before", ["the answer", "the resume claim"])
def test_an_answer_in_the_owners_process_as_another_adopts_the_run_leaves_exactly_one_going_on(adopter_starts_before):
    needs_postgresql()
    # This process owns the run but has no heartbeat row: dead to the others, and answering all the same.
    run = Run.objects.create(tool="deploy", status=RunStatus.WAITING, owner=THIS_PROCESS_ID)
    Request.objects.create(id="own-1", run=run, kind="approval", prompt="go?", resumable=True)
    adopted = []
    adopter = in_another_connection(lambda: adopted.extend(runs.recover_orphaned_runs("adopter").adopted))

    def chosen_statement(sql, params):
        if adopter_starts_before == "the answer":
            return sql.startswith('UPDATE "approvals_request"') and RequestStatus.ANSWERED in (params or ())
        return sql.startswith('UPDATE "approvals_request"') and '"resumed_by"' in sql.split("WHERE")[0]

    with connection.execute_wrapper(starting_before(adopter, chosen_statement)):
        decisions.resolve_request("own-1", ok=True)
    adopter.join(BLOCKED_SECONDS)
    assert not adopter.is_alive()

    run.refresh_from_db()
    resumed_by = Request.objects.get(pk="own-1").resumed_by
    mine = processes.stored_answer_and_claim("own-1", run.pk, THIS_PROCESS_ID)[1]
    theirs = processes.stored_answer_and_claim("own-1", run.pk, "adopter")[1]
    # Adopted first: the answer claims nothing for its old owner and the adopter resumes. Claimed first in the
    # answer's transaction: the adopter finds the resume taken (the run is interrupted, as after any claim) and
    # the owner goes on. Never both, never neither.
    expected = {
        "the answer": ("adopter", "", [run.pk], False, True),
        "the resume claim": (RunStatus.INTERRUPTED, THIS_PROCESS_ID, [], True, False),
    }[adopter_starts_before]
    owner_or_status = run.owner if adopter_starts_before == "the answer" else run.status
    assert (owner_or_status, resumed_by, adopted, mine, theirs) == expected
