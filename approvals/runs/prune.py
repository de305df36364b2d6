"""Retention for runs: delete finished runs, their transcripts and closed requests once their audit events
are archived.

An audit event protects its run and request (``on_delete=PROTECT``: the trail never points at
nothing), so a run goes only when no event about it or its requests is left in the database, that
is after ``manage.py archive_audit`` moved them to a file. Queued, running and waiting runs are never
pruned, nor a run with a request still open. Each run goes in its own transaction, with its requests,
their approvals and its transcript.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.db.models import ProtectedError, Q
from django.db.models.functions import Coalesce

from approvals.models import (
    ACTIVE_RUN_STATUSES,
    AuditEvent,
    Request,
    RequestApproval,
    RequestStatus,
    Run,
    TranscriptEntry,
)


@dataclass
class PruneReport:
    """What ``prune_runs`` deleted, and which old runs it kept and why (ids)."""

    pruned: list[int] = field(default_factory=list)
    requests: int = 0
    transcript_entries: int = 0
    kept_active: list[int] = field(default_factory=list)  # queued, running or waiting
    kept_open_request: list[int] = field(default_factory=list)  # a request of theirs is still open
    kept_unarchived: list[int] = field(default_factory=list)  # audit events about them are still in the database


def _runs_with_events(run_ids: Iterable[int], using: str) -> set[int]:
    ids = list(run_ids)
    about_run = AuditEvent.objects.using(using).filter(run_id__in=ids).values_list("run_id", flat=True)
    about_request = (
        AuditEvent.objects.using(using).filter(request__run_id__in=ids).values_list("request__run_id", flat=True)
    )
    return {run_id for run_id in [*about_run.distinct(), *about_request.distinct()] if run_id is not None}


def prune_runs(*, older_than: datetime, dry_run: bool = False, using: str = "default") -> PruneReport:
    """Delete the finished runs that ended before ``older_than`` and whose audit events are all archived."""
    report = PruneReport()
    old = (
        Run.objects.using(using)
        .annotate(ended=Coalesce("finished_at", "created_at"))
        .filter(ended__lt=older_than)
        .order_by("id")
    )
    report.kept_active = list(old.filter(status__in=ACTIVE_RUN_STATUSES).values_list("id", flat=True))
    candidates = list(old.exclude(status__in=ACTIVE_RUN_STATUSES).values_list("id", flat=True))
    with_open = set(
        Request.objects.using(using)
        .filter(run_id__in=candidates, status=RequestStatus.OPEN)
        .values_list("run_id", flat=True)
    )
    with_events = _runs_with_events(candidates, using)
    for run_id in candidates:
        if run_id in with_open:
            report.kept_open_request.append(run_id)
        elif run_id in with_events:
            report.kept_unarchived.append(run_id)
        elif dry_run:
            report.pruned.append(run_id)
        else:
            _prune_one(run_id, report, using)
    return report


def _prune_one(run_id: int, report: PruneReport, using: str) -> None:
    """One run with its requests (and their approvals) and its transcript, in one transaction."""
    try:
        with transaction.atomic(using=using):
            requests = Request.objects.using(using).filter(run_id=run_id)
            # Checked again inside the transaction: an event or an open request written since keeps the run.
            if requests.filter(status=RequestStatus.OPEN).exists():
                report.kept_open_request.append(run_id)
                return
            if AuditEvent.objects.using(using).filter(Q(run_id=run_id) | Q(request__run_id=run_id)).exists():
                report.kept_unarchived.append(run_id)
                return
            RequestApproval.objects.using(using).filter(request__run_id=run_id).delete()
            entries, _ = TranscriptEntry.objects.using(using).filter(run_id=run_id).delete()
            _, deleted = requests.delete()
            request_count = deleted.get(Request._meta.label, 0)
            Run.objects.using(using).filter(pk=run_id).delete()
    except ProtectedError:  # an event written between the check and the delete
        report.kept_unarchived.append(run_id)
        return
    report.pruned.append(run_id)
    report.requests += request_count
    report.transcript_entries += entries
