"""Sealing an audit event as it is inserted: its id, ``prev_hash``, ``key_version`` and ``hash``.

The model layer's half of the hash chain (``approvals.audit.chain`` verifies and backfills):
the audit model's ``save`` and ``bulk_create`` call ``seal`` inside the insert's transaction, so
no event is ever stored unsealed. On SQLite that transaction is BEGIN IMMEDIATE, so reading the
newest hash and inserting after it cannot interleave with another writer; PostgreSQL takes a
table lock.
"""

from __future__ import annotations  # Options takes a type argument only in django-stubs

import hashlib
import hmac
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar, Protocol, overload

from django.conf import settings
from django.db import IntegrityError, connections
from django.db.models.options import Options

from approvals.models.requests import Request
from approvals.models.runs import Run

GENESIS = ""


class SealedEvent(Protocol):
    """What sealing reads and writes of an audit event (``approvals.models.audit.AuditEvent``, which
    imports this module): the fields its hash covers, and the ones sealing fills in."""

    _meta: ClassVar[Options[Any]]
    pk: Any
    key_version: int
    action: str
    actor: str
    actor_user_id: int | None
    run_id: int | None
    request_id: str | None
    run: Run | None
    request: Request | None
    tool: str
    kind: str
    payload: Any
    created_at: datetime
    prev_hash: str
    hash: str


@overload
def canonical_time(moment: datetime) -> str: ...
@overload
def canonical_time(moment: None) -> None: ...
def canonical_time(moment: datetime | None) -> str | None:
    """A moment as the hash covers it: UTC, always six digits of microseconds (``+00:00``, never ``Z``)."""
    if moment is None:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.isoformat(timespec="microseconds")


def canonical_fields(event: SealedEvent) -> dict[str, Any]:
    """The fields an event's hash covers, as plain JSON values (what the database gives back)."""
    return {
        "id": event.pk,
        "key_version": event.key_version,
        "action": str(event.action),
        "actor": event.actor,
        "actor_user": event.actor_user_id,
        "run": event.run_id,
        "request": event.request_id,
        "tool": event.tool or "",
        "kind": event.kind or "",
        # Round-tripped, so tuples, int keys and the like hash as the database will return them.
        "payload": json.loads(json.dumps(event.payload if event.payload is not None else {})),
        "created_at": canonical_time(event.created_at),
    }


def canonical_json(fields: dict[str, Any]) -> str:
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sealing_key() -> tuple[int, bytes]:
    """(version, key) that seals new events: the highest version in ``settings.CONSOLE_AUDIT_KEYS``."""
    keys = settings.CONSOLE_AUDIT_KEYS
    version = max(keys)
    return version, keys[version]


def compute_hash(prev_hash: str, fields: dict[str, Any], key: bytes) -> str:
    """HMAC-SHA256 of the previous hash and an event's canonical fields, hex."""
    return hmac.new(key, (prev_hash + canonical_json(fields)).encode("utf-8"), hashlib.sha256).hexdigest()


def _lock_for_append(table: str, using: str) -> None:
    """SQLite: the surrounding BEGIN IMMEDIATE already holds the write lock. PostgreSQL: take a table lock."""
    connection = connections[using]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"LOCK TABLE {connection.ops.quote_name(table)} IN EXCLUSIVE MODE")


def _newest(table: str, using: str) -> tuple[int | None, str]:
    """(id, hash) of the newest event, or (None, GENESIS). Plain SQL: every event written reads it, and the
    ORM's compiling of this one query cost more than running it."""
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id, hash FROM {connection.ops.quote_name(table)} ORDER BY id DESC LIMIT 1")
        row = cursor.fetchone()
    return (row[0], row[1]) if row else (None, GENESIS)


def issued_up_to(table: str, using: str) -> int | None:
    """The highest id SQLite has ever handed out for the table (ids of deleted rows included), or None."""
    connection = connections[using]
    if connection.vendor != "sqlite":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT seq FROM sqlite_sequence WHERE name = %s", [table])
        row = cursor.fetchone()
    return row[0] if row else None


def _fill_subject_columns(event: SealedEvent) -> None:
    """Copy the tool and kind from the run or request, so filters need no joins."""
    request = event.request if event.request_id else None
    run = event.run if event.run_id else None
    if not event.tool:
        event.tool = (request.tool if request is not None else "") or (run.tool if run is not None else "") or ""
    if not event.kind and request is not None:
        event.kind = request.kind or ""


def seal_after(
    event: SealedEvent, last_id: int | None, last_hash: str, issued: int | None, version: int, key: bytes
) -> None:
    """Seal ``event`` as the link after event ``last_id`` (hash ``last_hash``): its id, subject columns,
    previous hash, key version and hash. ``issued``: :func:`issued_up_to`, so an id is never reused."""
    if event.pk is None:
        event.pk = max(last_id or 0, issued or 0) + 1
    elif last_id is not None and event.pk <= last_id:
        raise IntegrityError(
            f"Audit events are appended in order: id {event.pk} is not after the newest event #{last_id}."
        )
    _fill_subject_columns(event)
    event.prev_hash = last_hash or GENESIS
    event.key_version = version
    event.hash = compute_hash(event.prev_hash, canonical_fields(event), key)


def seal(event: SealedEvent, using: str = "default") -> None:
    """Give a new event its id, prev_hash and hash. Call inside the insert's transaction."""
    table = event._meta.db_table
    _lock_for_append(table, using)
    last_id, last_hash = _newest(table, using)
    seal_after(event, last_id, last_hash, issued_up_to(table, using), *sealing_key())


def seal_many(events: Sequence[SealedEvent], using: str = "default") -> None:
    """Seal a batch in list order, each chained to the one before (``bulk_create``)."""
    if not events:
        return
    table = events[0]._meta.db_table
    _lock_for_append(table, using)
    last_id, last_hash = _newest(table, using)
    issued = issued_up_to(table, using)
    version, key = sealing_key()
    for event in events:
        seal_after(event, last_id, last_hash, issued, version, key)
        last_id, last_hash, issued = event.pk, event.hash, None
