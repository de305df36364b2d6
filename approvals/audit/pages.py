"""The audit page's reads: its filters, keyset pages by id and the CSV / JSON Lines export.

Pages go by id (keyset: ``id < cursor ORDER BY id DESC``, with the helpers of ``keyset.py``),
never by OFFSET, so page 2,000 costs what page 1 does. An agent's transcript entries
(``run.transcript``) are left out unless asked for: they would bury the decisions.
"""

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, cast

from channels.db import database_sync_to_async
from django import forms
from django.db import connections
from django.db.models import Field, QuerySet

from approvals import keyset
from approvals.models import AuditCheckpoint, AuditEvent
from approvals.models.sealing import canonical_time
from approvals.review import outcomes

PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
EXPORT_CHUNK = 2000


ACTION_GROUPS = {"run.*": "run.", "request.*": "request."}
MAX_RECORD_ID = 2**63 - 1  # the largest id SQLite's INTEGER and PostgreSQL's bigint hold
DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


@dataclass
class AuditFilters:
    """What the audit page was asked to show. Empty strings and None mean "any"."""

    user: str = ""
    tool: str = ""
    kind: str = ""
    action: str = ""
    since: date | None = None
    until: date | None = None  # inclusive: the whole day
    run: int | None = None
    request: str = ""
    transcript: bool = False  # show run.transcript events too (hidden by default)
    errors: dict[str, str] = field(default_factory=dict)

    def as_query(self) -> dict[str, str]:
        """The filters as GET parameters (for paging and export links)."""
        query = {
            "user": self.user,
            "tool": self.tool,
            "kind": self.kind,
            "action": self.action,
            "since": self.since.isoformat() if self.since else "",
            "until": self.until.isoformat() if self.until else "",
            "run": str(self.run) if self.run is not None else "",
            "request": self.request,
            "transcript": "1" if self.transcript else "",
        }
        return {key: value for key, value in query.items() if value}

    @property
    def hides_transcript(self) -> bool:
        """Whether run.transcript events are left out: unless shown, or the very action asked for."""
        return not self.transcript and self.action != AuditEvent.Action.RUN_TRANSCRIPT


class RecordIdField(forms.Field):
    """A row id typed as ASCII digits, within what the database holds.

    Not ``int(text)`` alone: it takes '١٢' and '1_000', and fails on '²' although ``'²'.isdigit()`` is true.
    """

    def __init__(self, *, noun: str, **kwargs: Any) -> None:
        super().__init__(required=False, **kwargs)
        self.noun = noun

    def to_python(self, value: str | None) -> int | None:
        text = (value or "").strip()
        if not text:
            return None
        number = int(text) if text.isascii() and text.isdigit() else 0
        if not 1 <= number <= MAX_RECORD_ID:
            raise forms.ValidationError(
                f"{text[:40]!r} is not a {self.noun} number; enter a {self.noun} number, like 42.",
                code="invalid",
            )
        return number


class DayField(forms.DateField):
    """A day typed as YYYY-MM-DD."""

    def to_python(self, value: str | None) -> date | None:  # type: ignore[override]  # GET parameters are text
        text = (value or "").strip()
        if not text:
            return None
        if DAY.fullmatch(text):
            try:
                return date.fromisoformat(text)
            except ValueError:  # e.g. 2030-02-30
                pass
        raise forms.ValidationError(f"{text[:40]!r} is not a date; use YYYY-MM-DD.", code="invalid")


class AuditFilterForm(forms.Form):
    """The audit page's and export's GET parameters, each checked before any query runs or any byte is sent."""

    user = forms.CharField(required=False, max_length=150)
    tool = forms.CharField(required=False, max_length=200)
    kind = forms.CharField(required=False, max_length=100)
    action = forms.ChoiceField(
        required=False,
        choices=[("", "any")] + [(name, name) for name in [*ACTION_GROUPS, *AuditEvent.Action.values]],
        error_messages={"invalid_choice": "Unknown action %(value)r."},
    )
    since = DayField(required=False)
    until = DayField(required=False)
    run = RecordIdField(noun="run")
    request = forms.CharField(required=False, max_length=200)
    transcript = forms.BooleanField(required=False)

    def clean_until(self) -> date | None:
        until = self.cleaned_data["until"]
        if until == date.max:  # the filter ends at the next midnight, and there is no day after it
            raise forms.ValidationError(
                f"{until.isoformat()} is the last day a date can name; leave 'To' empty for no end.", code="max_value"
            )
        return until

    def clean(self) -> dict[str, Any]:
        since, until = self.cleaned_data.get("since"), self.cleaned_data.get("until")
        if since and until and until < since:
            self.add_error("until", "The end date is before the start date.")
        return self.cleaned_data

    def filters(self) -> AuditFilters:
        """The filters that passed (a refused one means "any"), with each refusal's message in ``errors``."""
        self.is_valid()
        clean = self.cleaned_data
        return AuditFilters(
            user=clean.get("user", ""),
            tool=clean.get("tool", ""),
            kind=clean.get("kind", ""),
            action=clean.get("action", ""),
            since=clean.get("since"),
            until=clean.get("until"),
            run=clean.get("run"),
            request=clean.get("request", ""),
            transcript=bool(clean.get("transcript")),
            errors={name: str(messages[0]) for name, messages in self.errors.items()},
        )


def parse_filters(params: Mapping[str, Any]) -> AuditFilters:
    """AuditFilters from GET parameters; anything unusable is named in ``errors`` and ignored."""
    return AuditFilterForm(params).filters()


def record_id(text: str | None) -> int | None:
    """A paging cursor (``?before=`` / ``?after=``) as an id, or None when it is not one."""
    try:
        return RecordIdField(noun="record").clean(text)
    except forms.ValidationError:
        return None


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


def filtered_events(filters: AuditFilters) -> QuerySet[AuditEvent]:
    """The events matching ``filters``; every condition has an index ending in id."""
    events = AuditEvent.objects.all()
    if filters.user:
        events = events.filter(actor=filters.user)
    if filters.tool:
        events = events.filter(tool=filters.tool)
    if filters.kind:
        events = events.filter(kind=filters.kind)
    if filters.action in ACTION_GROUPS:
        events = events.filter(action__startswith=ACTION_GROUPS[filters.action])
    elif filters.action:
        events = events.filter(action=filters.action)
    if filters.since:
        events = events.filter(created_at__gte=_midnight(filters.since))
    if filters.until:
        events = events.filter(created_at__lt=_midnight(filters.until + timedelta(days=1)))
    if filters.run is not None:
        events = events.filter(run_id=filters.run)
    if filters.request:
        events = events.filter(request_id=filters.request)
    if filters.hides_transcript:
        events = events.exclude(action=AuditEvent.Action.RUN_TRANSCRIPT)
    return events


def event_what(event: AuditEvent) -> str:
    """What an event is about, in words: "refund: approval request r-7 in run 12", "deploy: run 3"."""
    if event.action == AuditEvent.Action.AUDIT_ARCHIVED and isinstance(event.payload, dict):
        facts = event.payload
        return f"events #{facts.get('first')}–#{facts.get('last')} to {facts.get('file')} (sha256 {str(facts.get('sha256'))[:12]}…)"
    if event.request_id:
        subject = f"{event.kind or 'a'} request {event.request_id}" + (
            f" in run {event.run_id}" if event.run_id else ""
        )
    elif event.run_id:
        subject = f"run {event.run_id}"
    else:
        subject = ""
    return f"{event.tool}: {subject}" if event.tool and subject else subject or event.tool


def _is_a_person(actor: str) -> bool:
    """An actor that names a user: not the console ("system") nor a tool ("tool:<name>")."""
    return bool(actor) and actor != "system" and not actor.startswith("tool:")


def event_decision(event: AuditEvent, at: str | None) -> dict[str, Any] | None:
    """The decision an event records (outcomes.decision), or None for an event that resolves no request.

    Credited to the person who acted, or, for a request the console withdrew with its run, to who
    cancelled the run; an expiry and the console's own acts to nobody. An approval's edits are the
    payload's ``changes``, as the one door recorded them (answers.edited_args).
    """
    outcome = outcomes.outcome_of_action(event.action, event.kind)
    if outcome is None:
        return None
    payload = event.payload if isinstance(event.payload, dict) else {}
    by = payload.get("cancelled_with_run_by") or (event.actor if _is_a_person(event.actor) else None)
    approvals = payload.get("approvals")
    approvers = [str(name) for name in approvals] if isinstance(approvals, list) else []
    comment = payload.get("comment") if isinstance(payload.get("comment"), str) else ""
    # Recorded by the door since approvals' edits are worded; an older event's edit stays in its payload's data.
    changes = payload.get("changes")
    edits = [change for change in changes if isinstance(change, dict)] if isinstance(changes, list) else []
    return outcomes.decision(
        outcome,
        by=None if outcome == outcomes.EXPIRED else by,
        at=event.created_at,
        at_wire=at,
        comment=comment,
        approvers=approvers,
        changes=edits,
        decided_by=payload.get("decided_by") if isinstance(payload.get("decided_by"), str) else None,
        # A decline's response, message and reject option, as the one door recorded them (issue 36).
        said=outcomes.said_of(payload),
    )


def event_row(event: AuditEvent) -> dict[str, Any]:
    """One event as the audit page, CSV and JSON Lines show it: who (``actor``), what, and the decision."""
    at = canonical_time(event.created_at).replace("+00:00", "Z") if event.created_at else None
    return {
        "seq": event.pk,
        "at": at,
        "actor": event.actor,
        "action": event.action,
        "what": event_what(event),
        "decision": event_decision(event, at),
        "tool": event.tool,
        "kind": event.kind,
        "run": event.run_id,
        "request": event.request_id,
        "payload": event.payload,
        "prev_hash": event.prev_hash,
        "hash": event.hash,
    }


@dataclass
class AuditPage:
    rows: list[dict[str, Any]]
    newer: int | None  # pass as ?after= for the page before this one (newer events), or None
    older: int | None  # pass as ?before= for the next page (older events), or None
    limit: int
    # On the oldest page: events up to this id went to archive files (manage.py archive_audit), or None.
    archived_up_to: int | None = None


def page_size(value: Any) -> int:
    return keyset.page_size(value, default=PAGE_SIZE, maximum=MAX_PAGE_SIZE)


def audit_page(
    filters: AuditFilters, *, before: int | None = None, after: int | None = None, limit: int = PAGE_SIZE
) -> AuditPage:
    """One page, newest first. ``before``: events older than that id; ``after``: the page just newer than it."""
    events = filtered_events(filters)
    if after is not None:
        # The page just newer than ``after``: read upwards, then show newest first.
        chunk, has_newer = keyset.take_page(events.filter(id__gt=after).order_by("id"), limit)
        rows = list(reversed(chunk))
        has_older = events.filter(id__lte=after).exists()
    else:
        if before is not None:
            events = events.filter(id__lt=before)
        rows, has_older = keyset.take_page(events.order_by("-id"), limit)
        has_newer = before is not None and filtered_events(filters).filter(id__gte=before).exists()
    archived_up_to = None
    if not has_older:
        archived_up_to = AuditCheckpoint.objects.order_by("-id").values_list("last_event", flat=True).first()
    return AuditPage(
        rows=[event_row(e) for e in rows],
        newer=rows[0].pk if rows and has_newer else None,
        older=rows[-1].pk if rows and has_older else None,
        limit=limit,
        archived_up_to=archived_up_to,
    )


aaudit_page = database_sync_to_async(audit_page)


def export_chunk(filters: AuditFilters, before: int | None = None, size: int | None = None) -> list[dict[str, Any]]:
    """The next ``size`` matching events older than ``before`` (newest first), as rows: export walks these."""
    size = size or EXPORT_CHUNK
    events = filtered_events(filters)
    if before is not None:
        events = events.filter(id__lt=before)
    return [event_row(e) for e in events.order_by("-id")[:size]]


aexport_chunk = database_sync_to_async(export_chunk)


# Who, what and the decision in words come first, as on the page; the raw fields follow.
CSV_COLUMNS = (
    "seq",
    "at",
    "actor",
    "action",
    "what",
    "decision",
    "tool",
    "kind",
    "run",
    "request",
    "payload",
    "prev_hash",
    "hash",
)
# Free text a spreadsheet could take for a formula.
_TEXT_COLUMNS = ("actor", "what", "decision", "tool", "kind", "request")
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cells(row: Mapping[str, Any]) -> list[str]:
    """A row's CSV cells. Free text that a spreadsheet would run as a formula gets a leading apostrophe."""
    cells = []
    for column in CSV_COLUMNS:
        value = row[column]
        if column == "payload":
            value = json.dumps(value, sort_keys=True, ensure_ascii=False)
        elif column == "decision":
            value = value["text"] if value else ""
        elif value is None:
            value = ""
        value = str(value)
        if column in _TEXT_COLUMNS and value.startswith(_FORMULA_STARTS):
            value = "'" + value
        cells.append(value)
    return cells


def distinct_values(column: str, limit: int = 200) -> list[str]:
    """The distinct non-empty values of an indexed column, in order, by hopping the index from value to value.

    A plain SELECT DISTINCT reads every index entry (100,000 of them); this reads
    one per distinct value (a "loose index scan"), so it costs the same at any size.
    """
    connection = connections["default"]
    table = connection.ops.quote_name(AuditEvent._meta.db_table)
    model_field = cast(Field, AuditEvent._meta.get_field(column))  # a column, not a relation: its name is set
    name = connection.ops.quote_name(cast(str, model_field.column))
    sql = (
        f"WITH RECURSIVE seen(value) AS ("
        f" SELECT MIN({name}) FROM {table} WHERE {name} > ''"
        f" UNION ALL"
        f" SELECT (SELECT MIN({name}) FROM {table} WHERE {name} > seen.value) FROM seen WHERE seen.value IS NOT NULL"
        f") SELECT value FROM seen WHERE value IS NOT NULL LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [limit])
        return [row[0] for row in cursor.fetchall()]


def known_values() -> dict[str, list[str]]:
    """Choices for the filter form: actors, tools and kinds seen in the trail (distinct, bounded)."""
    return {
        "users": distinct_values("actor"),
        "tools": distinct_values("tool"),
        "kinds": distinct_values("kind"),
        "actions": list(ACTION_GROUPS) + list(AuditEvent.Action.values),
    }


aknown_values = database_sync_to_async(known_values)
