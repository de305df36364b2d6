"""A run's transcript, written as it happens.

Each entry is a row (the run page and a resumed run read them back) and a
``run.transcript`` audit event in the same transaction, so dashboards and the run
page hear of it through the same numbered, gap-checked stream as every other change.
"""

from typing import Any

from channels.db import database_sync_to_async
from django.db import transaction
from django.db.models import Max

from approvals import events
from approvals.models import AuditEvent, Run, TranscriptEntry
from approvals.moments import iso_time
from approvals.shapes import decision_view
from approvals.team import policies


def entry_view(entry: TranscriptEntry) -> dict[str, Any]:
    """An entry as the API and the run page see it; an answer entry carries its request's "decision"
    (who decided, when, in words) beside the wire Answer in ``data``."""
    return {
        "seq": entry.seq,
        "kind": entry.kind,
        "turn": entry.turn,
        "text": entry.text,
        "call_id": entry.call_id or None,
        "tool": entry.tool or None,
        "args": entry.args,
        "is_error": entry.is_error,
        "request": entry.request_id,
        "data": entry.data,
        "at": iso_time(entry.created_at),
        "decision": _decision_of(entry),
    }


def _decision_of(entry: TranscriptEntry) -> dict[str, Any] | None:
    request = entry.request if entry.kind == TranscriptEntry.Kind.ANSWER and entry.request_id is not None else None
    return decision_view(request, policies.approvals_of(request)) if request is not None else None


def record(
    run_id: int,
    kind: str,
    *,
    turn: int | None = None,
    text: str | None = "",
    call_id: str | None = "",
    tool: str | None = "",
    args: dict[str, Any] | None = None,
    is_error: bool | None = None,
    request_id: str | None = None,
    data: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Append one entry to the run's transcript and announce it; returns its view."""
    with transaction.atomic():
        last = TranscriptEntry.objects.filter(run_id=run_id).aggregate(last=Max("seq"))["last"] or 0
        entry = TranscriptEntry.objects.create(
            run_id=run_id,
            seq=last + 1,
            kind=kind,
            turn=turn,
            text=text or "",
            call_id=call_id or "",
            tool=tool or "",
            args=args,
            is_error=is_error,
            request_id=request_id,
            data=data,
        )
        view = entry_view(entry)
        events.record(
            AuditEvent.Action.RUN_TRANSCRIPT,
            actor=f"tool:{tool}" if tool else "system",
            run=Run(pk=run_id),
            payload=view,
        )
    return view


arecord = database_sync_to_async(record)


def entries(run_id: int) -> list[dict[str, Any]]:
    rows = TranscriptEntry.objects.filter(run_id=run_id).order_by("seq")
    # The answer entries' requests, their deciders and approvers, in three reads for the whole transcript.
    rows = rows.select_related("request__answered_by").prefetch_related("request__approvals__user")
    return [entry_view(e) for e in rows]


aentries = database_sync_to_async(entries)


def entries_for_resume(run_id: int) -> list[TranscriptEntry]:
    """The rows a resumed agent run rebuilds its halted turn from (oldest first)."""
    return list(TranscriptEntry.objects.filter(run_id=run_id).order_by("seq"))


aentries_for_resume = database_sync_to_async(entries_for_resume)
