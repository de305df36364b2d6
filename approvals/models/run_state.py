"""Every change of a run's status once it exists, each a conditional UPDATE from the statuses it may leave.

The runs' services call these inside their transactions and record the audit events; so does a
request's one door (review/decisions.py): a suspension makes its run wait, an answer lets it go on.
Nothing else writes ``Run.status`` (tests/test_layout.py checks); a run is created running
(services.create_run). None of these reads the run: callers that publish read it after, in their
transaction (``resume_unless_blocked`` hands it back from its UPDATE).
"""

from django.contrib.auth import get_user_model
from django.db.models import Exists, OuterRef, Subquery
from django.utils import timezone

from approvals.hotpath import rows
from approvals.hotpath.returning import Update, UpdateReturning
from approvals.models import ACTIVE_RUN_STATUSES, Request, RequestStatus, Run, RunStatus

# Set on the run wait_on_suspension hands back: its starter's username, and whether a request of it other
# than the one just opened is open (what the suspension's frame needs besides the run's own columns).
STARTER_NAME, OTHERS_OPEN = "starter_name", "others_open"
# Samples standing where each call's run and request go in the statements below (UpdateReturning).
_RUN, _REQUEST = -7_340_033, "sample:request-id:7340033"


def _waiting(run_id: int, request_id: str) -> Update:
    user = get_user_model()
    return (
        Run.objects.filter(pk=run_id, status__in=ACTIVE_RUN_STATUSES),
        {"status": RunStatus.WAITING},
        {
            STARTER_NAME: Subquery(user.objects.filter(pk=OuterRef("started_by_id")).values(user.USERNAME_FIELD)[:1]),
            OTHERS_OPEN: Exists(
                Request.objects.filter(run_id=OuterRef("pk"), status=RequestStatus.OPEN).exclude(pk=request_id)
            ),
        },
    )


def _resumed(run_id: int) -> Update:
    still_blocked = Request.objects.filter(run_id=OuterRef("pk"), status=RequestStatus.OPEN)
    return (
        Run.objects.filter(~Exists(still_blocked), pk=run_id, status=RunStatus.WAITING),
        {"status": RunStatus.RUNNING},
        {},
    )


_wait = UpdateReturning(Run, _waiting, (_RUN, _REQUEST))
_resume = UpdateReturning(Run, _resumed, (_RUN,))


def wait_on_suspension(run_id: int, request_id: str) -> Run | None:
    """An active run waits on the request ``request_id`` its tool just opened (§10: a suspension persists the
    Request and waits).

    Returns the run as this update left it, with STARTER_NAME and OTHERS_OPEN set on it, or None when it had
    already ended: one statement, no read back (hotpath/returning.py)."""
    waiting = _wait(run_id, request_id)
    return waiting[0] if waiting else None


def resume_unless_blocked(run_id: int) -> Run | None:
    """A waiting run leaves its wait once no request of it is still open: it resumes (ok) or finishes with
    the refusal. An agent run with another suspension still open stays blocked on a reviewer.

    Returns the run as this update left it (its own columns; no open request, by the condition), or None
    when it stayed as it was: one statement, no read back (hotpath/returning.py)."""
    resumed = _resume(run_id)
    return resumed[0] if resumed else None


def block_on_reviewer(run_id: int) -> int:
    """A running agent run's loop blocks on a reviewer: running -> waiting."""
    return Run.objects.filter(pk=run_id, status=RunStatus.RUNNING).update(status=RunStatus.WAITING)


def resume(run_id: int) -> int:
    """A waiting run goes on: waiting -> running (a no-op if an answer already resumed it)."""
    return Run.objects.filter(pk=run_id, status=RunStatus.WAITING).update(status=RunStatus.RUNNING)


def finish(run_id: int, status: str, output: str, is_error: bool) -> int:
    """An active run ends with ``status`` and its result; returns 0 when it had already ended."""
    finished = {
        "status": status,
        "result_output": output,
        "result_is_error": is_error,
        "finished_at": timezone.now(),
    }
    return rows.update(Run, run_id, finished, only_if=("status", ACTIVE_RUN_STATUSES))


def interrupt(run_id: int) -> int:
    """An active run a stopped process left executing ends interrupted; returns 0 when it had already ended."""
    return Run.objects.filter(pk=run_id, status__in=ACTIVE_RUN_STATUSES).update(
        status=RunStatus.INTERRUPTED, finished_at=timezone.now()
    )
