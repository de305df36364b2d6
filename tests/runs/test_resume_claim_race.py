"""An owner taken for dead that wakes up and claims its answer's resume at the very moment another process
adopts the run: exactly one of them may go on (docs/operations.md, "When a console dies").

A race between two database connections, so it needs PostgreSQL (each statement of a READ COMMITTED
transaction sees its own moment; a SQLite write takes the whole database): skipped on SQLite, run by
tests/cluster/test_modules_on_postgresql.py. The adoption is started from inside the claim, between its
check of the owner and its update of the request, with a statement wrapper on the claim's own connection.
"""

import threading
import time

import pytest
from django.db import connection

from approvals.models import Request, RequestStatus, Run, RunStatus
from approvals.runs import processes
from approvals.runs import services as runs

pytestmark = pytest.mark.django_db(transaction=True)

BLOCKED_SECONDS = 10.0  # at most, for the adopting connection to finish or wait on a lock


def adopting_in_another_connection(adopted):
    def adopt():
        try:
            adopted.extend(runs.recover_orphaned_runs("adopter").adopted)
        finally:
            connection.close()

    return threading.Thread(target=adopt)


def finished_or_waiting_on_a_lock(adopter, cursor):
    """Until the adopting thread finished or its connection waits on a row lock (pg_stat_activity says so)."""
    deadline = time.monotonic() + BLOCKED_SECONDS
    while adopter.is_alive() and time.monotonic() < deadline:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        if cursor.fetchone()[0]:
            return
        time.sleep(0.01)  # another connection's progress, which no event announces


def test_an_owner_claiming_its_resume_while_another_process_adopts_the_run_leaves_exactly_one_going_on():
    if connection.vendor != "postgresql":
        pytest.skip("a race between two connections; SQLite takes the whole database for each write")
    # The door let the run go on after its answer; its owner ("sleeper", no heartbeat row: dead to the
    # others) wakes up and claims the resume.
    run = Run.objects.create(tool="deploy", status=RunStatus.RUNNING, owner="sleeper")
    Request.objects.create(
        id="race-1",
        run=run,
        kind="approval",
        prompt="go?",
        resumable=True,
        status=RequestStatus.ANSWERED,
        answer_ok=True,
    )
    adopted = []
    adopter = adopting_in_another_connection(adopted)

    def adopt_between_check_and_claim(execute, sql, params, many, context):
        if not adopter.is_alive() and adopter.ident is None and sql.startswith('UPDATE "approvals_request"'):
            adopter.start()
            finished_or_waiting_on_a_lock(adopter, context["connection"].connection.cursor())
        return execute(sql, params, many, context)

    with connection.execute_wrapper(adopt_between_check_and_claim):
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
