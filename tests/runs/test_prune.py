"""Retention for runs: prune_runs deletes finished runs older than N days with their transcripts and closed
requests, only once archive_audit took their audit events; active runs and open requests stay."""

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from approvals.audit import archive
from approvals.audit.chain import verify_chain
from approvals.models import (
    AuditEvent,
    Request,
    RequestApproval,
    RequestStatus,
    Run,
    RunStatus,
    TranscriptEntry,
)
from approvals.runs.prune import prune_runs

pytestmark = pytest.mark.django_db(transaction=True, reset_sequences=True)

A = AuditEvent.Action
NOW = timezone.now()
LONG_AGO = NOW - timedelta(days=90)


def a_run(status, ended, *, request_status=RequestStatus.ANSWERED, approver=None):
    """A run with one request, a transcript entry and their audit events, all from ``ended``."""
    run = Run.objects.create(tool="deploy", status=status, created_at=ended, finished_at=ended)
    request = Request.objects.create(
        id=f"req-{run.pk}", run=run, kind="approval", prompt="Deploy?", status=request_status, created_at=ended
    )
    TranscriptEntry.objects.create(run=run, seq=1, kind=TranscriptEntry.Kind.PROMPT, text="go")
    if approver is not None:
        RequestApproval.objects.create(request=request, user=approver)
    AuditEvent.objects.create(action=A.RUN_STARTED, actor="alice", run=run, created_at=ended)
    AuditEvent.objects.create(action=A.REQUEST_OPENED, actor="system", request=request, created_at=ended)
    AuditEvent.objects.seal_pending()  # chained, as a console's sealer does: only chained events are archived
    return run


def prune(*args):
    out = io.StringIO()
    call_command("prune_runs", *args, stdout=out)
    return out.getvalue()


def test_a_finished_run_goes_only_once_its_events_are_archived(tmp_path, alice):
    old = a_run(RunStatus.SUCCEEDED, LONG_AGO, approver=alice)
    recent = a_run(RunStatus.FAILED, NOW - timedelta(days=1))

    out = prune("--older-than", "30")
    assert "Nothing to prune" in out
    assert f"Kept 1 run whose audit events are still in the database (#{old.pk}): archive them first" in out
    assert Run.objects.count() == 2

    archive.archive_events(before=NOW - timedelta(days=30), actor="ops", out=tmp_path / "a.jsonl.gz")
    out = prune("--older-than", "30")
    assert f"Pruned 1 run (#{old.pk}): 1 request, 1 transcript entry." in out
    assert list(Run.objects.values_list("id", flat=True)) == [recent.pk]
    assert not Request.objects.filter(run_id=old.pk).exists()
    assert not TranscriptEntry.objects.filter(run_id=old.pk).exists()
    assert not RequestApproval.objects.exists()
    assert verify_chain().ok and archive.verify_archive(tmp_path / "a.jsonl.gz").ok  # the trail is untouched


def test_waiting_runs_and_runs_with_an_open_request_are_never_pruned(tmp_path):
    waiting = a_run(RunStatus.WAITING, LONG_AGO, request_status=RequestStatus.OPEN)
    stray = a_run(RunStatus.INTERRUPTED, LONG_AGO, request_status=RequestStatus.OPEN)
    archive.archive_events(before=NOW, actor="ops", out=tmp_path / "a.jsonl.gz")

    out = prune("--older-than", "30")
    assert f"Kept 1 run with a request still open (#{stray.pk})." in out
    assert f"Kept 1 queued, running or waiting run (#{waiting.pk}): active runs are never pruned." in out
    assert Run.objects.count() == 2 and Request.objects.count() == 2


def test_a_dry_run_says_what_would_go_and_deletes_nothing(tmp_path):
    old = a_run(RunStatus.CANCELLED, LONG_AGO)
    archive.archive_events(before=NOW, actor="ops", out=tmp_path / "a.jsonl.gz")
    assert f"Would prune 1 run (#{old.pk})." in prune("--older-than", "30", "--dry-run")
    assert Run.objects.filter(pk=old.pk).exists()


def test_an_event_written_after_the_archive_keeps_the_run(tmp_path):
    old = a_run(RunStatus.SUCCEEDED, LONG_AGO)
    archive.archive_events(before=NOW, actor="ops", out=tmp_path / "a.jsonl.gz")
    AuditEvent.objects.create(action=A.RUN_ADOPTED, actor="system", run=old)  # written after the archive
    report = prune_runs(older_than=NOW - timedelta(days=30))
    assert report.kept_unarchived == [old.pk] and report.pruned == []
