"""Every change of a run's status once it exists, each a conditional UPDATE from the statuses it may leave.

The runs' services call these inside their transactions and record the audit events; so does a
request's one door (review/decisions.py): a suspension makes its run wait, an answer lets it go on.
Nothing else writes ``Run.status`` (tests/test_layout.py checks); a run is created running
(services.create_run). None of these reads the run but ``finish``, whose update returns it: other
callers that publish read it after, in their transaction.
"""

from django.db.models import Exists, OuterRef
from django.utils import timezone

from approvals.hotpath import returning, rows
from approvals.models import ACTIVE_RUN_STATUSES, THIS_PROCESS_ID, Request, RequestStatus, Run, RunKind, RunStatus


def wait_on_suspension(run_id: int) -> int:
    """An active run waits on the request its tool just opened (§10: a suspension persists the Request and waits)."""
    return rows.update(Run, run_id, {"status": RunStatus.WAITING}, only_if=("status", ACTIVE_RUN_STATUSES))


def resume_unless_blocked(run_id: int) -> int:
    """A waiting run leaves its wait once no request of it is still open: it resumes (ok) or finishes with
    the refusal. An agent run with another suspension still open stays blocked on a reviewer.

    A tool run of this very process also gets its resume claimed here (``claim_resume_here``), in the
    answer's own transaction: its task, woken in this process, goes on without a write of its own.
    """
    still_blocked = Request.objects.filter(run_id=OuterRef("pk"), status=RequestStatus.OPEN)
    resumed = Run.objects.filter(~Exists(still_blocked), pk=run_id, status=RunStatus.WAITING).update(
        status=RunStatus.RUNNING
    )
    if resumed:
        claim_resume_here(run_id)
    return resumed


def claim_resume_here(run_id: int) -> int:
    """Claim, for this process, the resume of its tool run ``run_id`` whose §10 suspension was just answered
    (``Request.resumed_by``, the claim ``runs/processes.claim_resume`` takes otherwise); 0 when the run is
    another process's, an agent's, or its suspension was claimed already.

    Called in the answer's transaction, after it locked the request's row, then the run's (the order every
    door and the takeover take them in): the owner read here stays the owner until the commit, and a tool run
    has one resumable request, so no other row is locked. The owner is alive (it is answering), and its waiter
    is in this process: claiming for it now is what that waiter would do next, one transaction earlier.
    """
    owned_here = Run.objects.filter(pk=run_id, kind=RunKind.TOOL, owner=THIS_PROCESS_ID)
    return (
        Request.objects.filter(Exists(owned_here), run_id=run_id, resumable=True, resumed_by="")
        .exclude(status=RequestStatus.OPEN)
        .update(resumed_by=THIS_PROCESS_ID)
    )


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
    return returning.update_returning(
        Run, run_id, finished, only_if=("status", ACTIVE_RUN_STATUSES), related={"started_by": ("username",)}
    )


def interrupt(run_id: int) -> int:
    """An active run a stopped process left executing ends interrupted; returns 0 when it had already ended."""
    return Run.objects.filter(pk=run_id, status__in=ACTIVE_RUN_STATUSES).update(
        status=RunStatus.INTERRUPTED, finished_at=timezone.now()
    )
