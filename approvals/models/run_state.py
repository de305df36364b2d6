"""Every change of a run's status once it exists, each a conditional UPDATE from the statuses it may leave.

The runs' services call these inside their transactions and record the audit events; so does a
request's one door (review/decisions.py): a suspension makes its run wait, an answer lets it go on.
Nothing else writes ``Run.status`` (tests/test_layout.py checks); a run is created running
(services.create_run). None of these reads the run after its UPDATE: ``wait_on_suspension``,
``resume_unless_blocked`` and ``finish`` hand it back from the UPDATE itself (hotpath/returning.py).
"""

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Case, Exists, F, OuterRef, QuerySet, Subquery, Value, When
from django.utils import timezone

from approvals.hotpath.returning import CompiledUpdate, Update, UpdateReturning, update_returning
from approvals.models import (
    ACTIVE_RUN_STATUSES,
    THIS_PROCESS_ID,
    ExecutionState,
    Request,
    RequestStatus,
    Run,
    RunKind,
    RunStatus,
)

# Set on the run wait_on_suspension hands back: its starter's username, and whether a request of it other
# than the one just opened is open (what the suspension's frame needs besides the run's own columns).
STARTER_NAME, OTHERS_OPEN = "starter_name", "others_open"
# Set on the run resume_unless_blocked hands back: whether its resume was claimed for this process (claim_resume_here).
CLAIMED_HERE = "resume_claimed_here"
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


def claim_resume_here(run_id: int) -> int:
    """Claim, for this process, the resume of its tool run ``run_id`` whose §10 suspension was just answered
    (``Request.resumed_by``, the claim ``runs/processes.claim_resume`` takes otherwise); 0 when the run is
    another process's, an agent's, or its suspension was claimed already.

    Called in the answer's transaction, after it locked the request's row, then the run's (the order every
    door and the takeover take them in): the owner read here stays the owner until the commit, and a tool run
    has one resumable request, so no other row is locked. The owner is alive (it is answering), and its waiter
    is in this process: claiming for it now is what that waiter would do next, one transaction earlier.
    """
    return _claim(run_id)


def _claiming(run_id: int) -> tuple[QuerySet[Request], dict[str, Any]]:
    owned_here = Run.objects.filter(pk=run_id, kind=RunKind.TOOL, owner=THIS_PROCESS_ID)
    unclaimed = Request.objects.filter(Exists(owned_here), run_id=run_id, resumable=True, resumed_by="")
    # An ok answer's tool runs next: the claim marks it executing too (review/execution.py), in the same statement.
    return unclaimed.exclude(status=RequestStatus.OPEN), {"resumed_by": THIS_PROCESS_ID, **_EXECUTING_IF_OK}


def _resumed(run_id: int) -> Update:
    still_blocked = Request.objects.filter(run_id=OuterRef("pk"), status=RequestStatus.OPEN)
    return (
        Run.objects.filter(~Exists(still_blocked), pk=run_id, status=RunStatus.WAITING),
        {"status": RunStatus.RUNNING},
        {},
    )


def executing_if_ok(at: Any) -> dict[str, Case]:
    """What a resume claim writes besides ``resumed_by``: an ok answer's tool runs next, so its request is marked
    ``executing`` from ``at`` on (review/execution.py); a refusal's stays as it was, and so does one already marked,
    and one asked from inside a running call (not resumable: its answer resumes no tool, the call is running)
    (never back from an outcome). Part of the claim's own UPDATE.
    """
    return {
        "execution_state": Case(
            When(answer_ok=True, resumable=True, execution_state__isnull=True, then=Value(ExecutionState.EXECUTING)),
            default=F("execution_state"),
        ),
        "execution_at": Case(
            When(answer_ok=True, resumable=True, execution_state__isnull=True, then=at), default=F("execution_at")
        ),
    }


# Claimed in the answer's own transaction: the tool runs from the answer on (its ``answered_at``).
_EXECUTING_IF_OK = executing_if_ok(F("answered_at"))

_wait = UpdateReturning(Run, _waiting, (_RUN, _REQUEST))
_claim = CompiledUpdate(_claiming, (_RUN,))
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

    A tool run of this very process also gets its resume claimed here (``claim_resume_here``), in the
    answer's own transaction: its task, woken in this process, goes on without a write of its own.

    Returns the run as this update left it (its own columns; no open request, by the condition), with
    CLAIMED_HERE set on it, or None when it stayed as it was: one statement, no read back
    (hotpath/returning.py), and the claim's."""
    resumed = _resume(run_id)
    if not resumed:
        return None
    setattr(resumed[0], CLAIMED_HERE, bool(claim_resume_here(run_id)))
    return resumed[0]


def block_on_reviewer(run_id: int) -> int:
    """A running agent run's loop blocks on a reviewer: running -> waiting."""
    return Run.objects.filter(pk=run_id, status=RunStatus.RUNNING).update(status=RunStatus.WAITING)


def resume(run_id: int) -> int:
    """A waiting run goes on: waiting -> running (a no-op if an answer already resumed it)."""
    return Run.objects.filter(pk=run_id, status=RunStatus.WAITING).update(status=RunStatus.RUNNING)


def finish(run_id: int, status: str, output: str, is_error: bool) -> Run | None:
    """An active run ends with ``status`` and its result: the run as the update left it (its starter's
    username loaded, as its frame shows it), or None when it had already ended."""
    finished = {
        "status": status,
        "result_output": output,
        "result_is_error": is_error,
        "finished_at": timezone.now(),
    }
    return update_returning(
        Run, run_id, finished, only_if=("status", ACTIVE_RUN_STATUSES), related={"started_by": ("username",)}
    )


def interrupt(run_id: int) -> int:
    """An active run a stopped process left executing ends interrupted; returns 0 when it had already ended."""
    return Run.objects.filter(pk=run_id, status__in=ACTIVE_RUN_STATUSES).update(
        status=RunStatus.INTERRUPTED, finished_at=timezone.now()
    )
