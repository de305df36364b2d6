"""The audit trail as evidence: a keyed hash chain over every event, its verification, and the audit page's reads.

Each event stores ``prev_hash`` (the previous event's ``hash``, "" for the first),
``key_version`` and ``hash`` = HMAC-SHA256(key, prev_hash + canonical JSON of its own
fields, id and key version included). The keys (``settings.CONSOLE_AUDIT_KEYS``) live in
the deployment's secrets, never in the database: an edited row no longer matches its hash,
a deleted row leaves a gap in the ids, and re-hashing the chain after either needs the key.
Removing events from the end leaves no gap; ``verify_chain(head=...)`` checks the trail
against a head recorded earlier, outside the database. Sealing happens in
``AuditEvent.save`` (and ``bulk_create``) inside the insert's transaction: on SQLite that
transaction is BEGIN IMMEDIATE, so reading the newest hash and inserting after it cannot
interleave with another writer.

The audit page pages by id (keyset: ``id < cursor ORDER BY id DESC``, with the
helpers of ``keyset.py``), never by OFFSET, so page 2,000 costs what page 1 does.
"""
import hmac
import json
import re
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from datetime import timezone as dt_timezone

from django import forms
from django.conf import settings
from django.db import connections

from channels.db import database_sync_to_async

from approvals import keyset
from approvals.models import AuditEvent
from approvals.models.sealing import (  # noqa: F401  (verify and backfill re-hash with these)
    GENESIS,
    _issued_up_to,
    canonical_time,
    _seal_after,
    canonical_fields,
    canonical_json,
    compute_hash,
    seal,
    seal_many,
    sealing_key,
)

PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
EXPORT_CHUNK = 2000


@dataclass
class KeyRange:
    """Consecutive events sealed with one key version: #first–#last."""

    version: int
    first: int
    last: int


@dataclass
class ChainReport:
    verified: int
    problem: str | None = None
    event_id: int | None = None
    key_ranges: list[KeyRange] = field(default_factory=list)
    head: str | None = None  # "#<id>:<hash>" of the newest event verified, to keep outside the database

    @property
    def ok(self):
        return self.problem is None


def parse_head(text):
    """``"#120:ab12…"`` (or ``"120:ab12…"``) -> (120, "ab12…"); ValueError with a message otherwise."""
    number, separator, digest = text.strip().lstrip("#").partition(":")
    if not separator or not number.isascii() or not number.isdigit() or len(digest) != 64:
        raise ValueError(f"A head looks like #120:<64 hex characters>, as verify_audit prints it (got {text!r}).")
    return int(number), digest.lower()


def verify_chain(using="default", chunk_size=5000, head=None):
    """Walk every event in id order; the first altered or missing event, or how many verified.

    Each event is checked with the key of its own ``key_version`` from ``settings.CONSOLE_AUDIT_KEYS``.
    ``head``, an ``(id, hash)`` recorded by an earlier verification, must still be in the chain:
    that finds events removed from the end, which leave no gap behind.
    """
    keys = settings.CONSOLE_AUDIT_KEYS
    prev_id, prev_hash, count, ranges = None, GENESIS, 0, []

    def failed(problem, event_id):
        return ChainReport(count, problem, event_id, ranges)

    for event in AuditEvent.objects.using(using).order_by("id").iterator(chunk_size=chunk_size):
        if prev_id is not None and event.pk != prev_id + 1:
            missing = f"#{prev_id + 1}" if event.pk == prev_id + 2 else f"#{prev_id + 1}–#{event.pk - 1}"
            return failed(f"Event {missing} is missing: the trail jumps from #{prev_id} to #{event.pk}.", prev_id + 1)
        if event.prev_hash != prev_hash:
            if prev_id is None:
                problem = (f"Events before #{event.pk} are missing: #{event.pk} is the oldest event left, "
                           "but its prev_hash says others came before it.")
            else:
                problem = (f"Event #{event.pk} does not follow #{prev_id}: its prev_hash is not #{prev_id}'s hash "
                           f"(#{prev_id} was altered and re-hashed, or an event between them was removed).")
            return failed(problem, event.pk)
        key = keys.get(event.key_version)
        if key is None:
            return failed(f"Event #{event.pk} was sealed with key version {event.key_version}, which "
                          "CONSOLE_AUDIT_KEYS does not hold: add that key back to verify it.", event.pk)
        if not hmac.compare_digest(event.hash, compute_hash(event.prev_hash, canonical_fields(event), key)):
            return failed(f"Event #{event.pk} was altered: its contents no longer match its hash. Checked with key "
                          f"version {event.key_version}; an event re-sealed with a key this console does not hold "
                          "reads the same.", event.pk)
        if ranges and ranges[-1].version == event.key_version:
            ranges[-1].last = event.pk
        else:
            ranges.append(KeyRange(event.key_version, event.pk, event.pk))
        prev_id, prev_hash, count = event.pk, event.hash, count + 1
    issued = _issued_up_to(AuditEvent._meta.db_table, using)
    if issued is not None and issued > (prev_id or 0):
        first_missing = (prev_id or 0) + 1
        missing = f"#{first_missing}" if issued == first_missing else f"#{first_missing}–#{issued}"
        newest = f"the newest event left is #{prev_id}" if prev_id is not None else "no event is left"
        return failed(f"Event {missing} is missing: {newest}, but ids up to #{issued} were issued.", first_missing)
    if head is not None:
        head_id, head_hash = head
        kept = AuditEvent.objects.using(using).filter(pk=head_id).values_list("hash", flat=True).first()
        if kept is None:
            return failed(f"Event #{head_id}, the head recorded earlier, is missing: the trail now ends at "
                          f"#{prev_id or 0}, so events were removed from its end.", head_id)
        if kept != head_hash:
            return failed(f"Event #{head_id} is not the head recorded earlier: its hash changed, so the trail "
                          "was rewritten up to it.", head_id)
    return ChainReport(count, None, None, ranges, f"#{prev_id}:{prev_hash}" if prev_id is not None else None)


def backfill_chain(apps=None, schema_editor=None, using="default"):
    """(Re)seal every event in id order with the newest key; raw SQL, since the ORM refuses updates.

    A data migration's RunPython (sealing events written before the chain, or before it was
    keyed) and ``manage.py reseal_audit`` (after a key rotation) call it; it re-hashes whatever
    it finds, so verify the chain first. Fills tool and kind where they are empty.
    """
    model = apps.get_model("approvals", "AuditEvent") if apps is not None else AuditEvent
    request_model = apps.get_model("approvals", "Request") if apps is not None else None
    run_model = apps.get_model("approvals", "Run") if apps is not None else None
    if schema_editor is not None:
        using = schema_editor.connection.alias
    connection = connections[using]
    table = connection.ops.quote_name(model._meta.db_table)
    # Migrations before 0008 have no key_version column yet; 0008 seals again with it.
    keyed = any(f.name == "key_version" for f in model._meta.concrete_fields)
    version, key = sealing_key()
    prev_hash = GENESIS
    with connection.cursor() as cursor:
        for event in model.objects.using(using).order_by("id").iterator(chunk_size=2000):
            if not event.tool or not event.kind:
                request = (request_model or type(event).request.field.related_model).objects.using(using).filter(
                    pk=event.request_id).values("tool", "kind").first() if event.request_id else None
                run = (run_model or type(event).run.field.related_model).objects.using(using).filter(
                    pk=event.run_id).values("tool").first() if event.run_id else None
                event.tool = event.tool or (request or {}).get("tool") or (run or {}).get("tool") or ""
                event.kind = event.kind or (request or {}).get("kind") or ""
            event.key_version = version if keyed else 0
            event.prev_hash = prev_hash
            event.hash = compute_hash(prev_hash, canonical_fields(event), key)
            if keyed:
                cursor.execute(
                    f"UPDATE {table} SET tool = %s, kind = %s, key_version = %s, prev_hash = %s, hash = %s WHERE id = %s",
                    [event.tool, event.kind, version, event.prev_hash, event.hash, event.pk],
                )
            else:
                cursor.execute(
                    f"UPDATE {table} SET tool = %s, kind = %s, prev_hash = %s, hash = %s WHERE id = %s",
                    [event.tool, event.kind, event.prev_hash, event.hash, event.pk],
                )
            prev_hash = event.hash


# -- the audit page: filters, keyset pages, export ---------------------------------------------


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
    errors: dict = field(default_factory=dict)

    def as_query(self):
        """The filters as GET parameters (for paging and export links)."""
        query = {
            "user": self.user, "tool": self.tool, "kind": self.kind, "action": self.action,
            "since": self.since.isoformat() if self.since else "", "until": self.until.isoformat() if self.until else "",
            "run": str(self.run) if self.run is not None else "", "request": self.request,
        }
        return {key: value for key, value in query.items() if value}


class RecordIdField(forms.Field):
    """A row id typed as ASCII digits, within what the database holds.

    Not ``int(text)`` alone: it takes '١٢' and '1_000', and fails on '²' although ``'²'.isdigit()`` is true.
    """

    def __init__(self, *, noun, **kwargs):
        super().__init__(required=False, **kwargs)
        self.noun = noun

    def to_python(self, value):
        text = (value or "").strip()
        if not text:
            return None
        number = int(text) if text.isascii() and text.isdigit() else 0
        if not 1 <= number <= MAX_RECORD_ID:
            raise forms.ValidationError(
                f"{text[:40]!r} is not a {self.noun} number; use a whole number from 1 to {MAX_RECORD_ID}.",
                code="invalid",
            )
        return number


class DayField(forms.DateField):
    """A day typed as YYYY-MM-DD."""

    def to_python(self, value):
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

    def clean_until(self):
        until = self.cleaned_data["until"]
        if until == date.max:  # the filter ends at the next midnight, and there is no day after it
            raise forms.ValidationError(
                f"{until.isoformat()} is the last day a date can name; leave 'To' empty for no end.", code="max_value"
            )
        return until

    def clean(self):
        since, until = self.cleaned_data.get("since"), self.cleaned_data.get("until")
        if since and until and until < since:
            self.add_error("until", "The end date is before the start date.")
        return self.cleaned_data

    def filters(self):
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
            errors={name: messages[0] for name, messages in self.errors.items()},
        )


def parse_filters(params):
    """AuditFilters from GET parameters; anything unusable is named in ``errors`` and ignored."""
    return AuditFilterForm(params).filters()


def record_id(text):
    """A paging cursor (``?before=`` / ``?after=``) as an id, or None when it is not one."""
    try:
        return RecordIdField(noun="record").clean(text)
    except forms.ValidationError:
        return None


def _midnight(day):
    return datetime.combine(day, time.min, tzinfo=dt_timezone.utc)


def filtered_events(filters):
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
    return events


def event_row(event):
    """One event as the audit page, CSV and JSON Lines show it."""
    return {
        "seq": event.pk,
        "at": canonical_time(event.created_at).replace("+00:00", "Z") if event.created_at else None,
        "actor": event.actor,
        "action": event.action,
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
    rows: list
    newer: int | None  # pass as ?after= for the page before this one (newer events), or None
    older: int | None  # pass as ?before= for the next page (older events), or None
    limit: int


def page_size(value):
    return keyset.page_size(value, default=PAGE_SIZE, maximum=MAX_PAGE_SIZE)


def audit_page(filters, *, before=None, after=None, limit=PAGE_SIZE):
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
    return AuditPage(
        rows=[event_row(e) for e in rows],
        newer=rows[0].pk if rows and has_newer else None,
        older=rows[-1].pk if rows and has_older else None,
        limit=limit,
    )


aaudit_page = database_sync_to_async(audit_page)


def export_chunk(filters, before=None, size=None):
    """The next ``size`` matching events older than ``before`` (newest first), as rows: export walks these."""
    size = size or EXPORT_CHUNK
    events = filtered_events(filters)
    if before is not None:
        events = events.filter(id__lt=before)
    return [event_row(e) for e in events.order_by("-id")[:size]]


aexport_chunk = database_sync_to_async(export_chunk)


CSV_COLUMNS = ("seq", "at", "actor", "action", "tool", "kind", "run", "request", "payload", "prev_hash", "hash")
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cells(row):
    """A row's CSV cells. Free text that a spreadsheet would run as a formula gets a leading apostrophe."""
    cells = []
    for column in CSV_COLUMNS:
        value = row[column]
        if column == "payload":
            value = json.dumps(value, sort_keys=True, ensure_ascii=False)
        elif value is None:
            value = ""
        value = str(value)
        if column in ("actor", "tool", "kind", "request") and value.startswith(_FORMULA_STARTS):
            value = "'" + value
        cells.append(value)
    return cells


def distinct_values(column, limit=200):
    """The distinct non-empty values of an indexed column, in order, by hopping the index from value to value.

    A plain SELECT DISTINCT reads every index entry (100,000 of them); this reads
    one per distinct value (a "loose index scan"), so it costs the same at any size.
    """
    connection = connections["default"]
    table = connection.ops.quote_name(AuditEvent._meta.db_table)
    name = connection.ops.quote_name(AuditEvent._meta.get_field(column).column)
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


def known_values():
    """Choices for the filter form: actors, tools and kinds seen in the trail (distinct, bounded)."""
    return {"users": distinct_values("actor"), "tools": distinct_values("tool"), "kinds": distinct_values("kind"),
            "actions": list(ACTION_GROUPS) + list(AuditEvent.Action.values)}


aknown_values = database_sync_to_async(known_values)
