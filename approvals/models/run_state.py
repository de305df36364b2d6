"""Every change of a run's status once it exists, each a conditional UPDATE from the statuses it may leave.

The runs' services call these inside their transactions and record the audit events; so does a
request's one door (review/decisions.py): a suspension makes its run wait, an answer lets it go on.
Nothing else writes ``Run.status`` (tests/test_layout.py checks); a run is created running
(services.create_run). None of these reads the run: callers that publish read it after, in their
transaction.
"""

from django.db.models import Exists, OuterRef
from django.utils import timezone

from approvals.hotpath import rows
from approvals.models import ACTIVE_RUN_STATUSES, Request, RequestStatus, Run, RunStatus


def wait_on_suspension(run_id: int) -> int:
    """An active run waits on the request its tool just opened (§10: a suspension persists the Request and waits)."""
    return rows.update(Run, run_id, {"status": RunStatus.WAITING}, only_if=("status", ACTIVE_RUN_STATUSES))


def resume_unless_blocked(run_id: int) -> int:
    """A waiting run leaves its wait once no request of it is still open: it resumes (ok) or finishes with
    the refusal. An agent run with another suspension still open stays blocked on a reviewer."""
    still_blocked = Request.objects.filter(run_id=OuterRef("pk"), status=RequestStatus.OPEN)
    return Run.objects.filter(~Exists(still_blocked), pk=run_id, status=RunStatus.WAITING).update(
        status=RunStatus.RUNNING
    )


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
