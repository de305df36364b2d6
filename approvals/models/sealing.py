"""The model layer's half of the audit trail's keyed hash chain (``approvals.audit.chain`` verifies and backfills).

An event is written in ONE statement, its INSERT, inside the transaction that records it: ``stamp`` gives it
its subject columns, key version, a random ``nonce`` and ``mac``, an HMAC of the nonce and its own fields
under the newest key. No lock, no read. Its place in the chain comes after its commit: ``link`` gives a
batch of committed events, oldest id first, their ``position`` (1, 2, 3, ... with no gap), ``prev_hash``
(the hash of the event before it in that order) and ``hash``, as ``AuditEventQuerySet.seal_pending`` does
under the sealing lock (PostgreSQL: an advisory lock only sealers take; SQLite: the write lock). Sealers
see only what has committed, so the positions follow commit visibility and every process shares one order.
"""

from __future__ import annotations  # Options takes a type argument only in django-stubs

import hashlib
import hmac
import json
import logging
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, Protocol, overload

from django.conf import settings
from django.db import connections
from django.db.models.options import Options

from approvals.models.requests import Request
from approvals.models.runs import Run

logger = logging.getLogger(__name__)

GENESIS = ""
# PostgreSQL advisory lock key (any constant bigint) that only sealers take: writers never wait on it.
SEALING_LOCK = 0x70_6E_65_78_75_73_61  # "tnexusa"


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
    position: int | None
    nonce: str | None
    mac: str
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


def compute_mac(nonce: str, fields: dict[str, Any], key: bytes) -> str:
    """An event's own HMAC-SHA256, written with it: its nonce and its canonical fields but the id, which the
    database assigns in the same INSERT. The nonce is unique (a column constraint), so a copy of a row
    under another id needs a new nonce, and so the key."""
    own = {name: value for name, value in fields.items() if name != "id"}
    return hmac.new(key, ("event:" + nonce + canonical_json(own)).encode("utf-8"), hashlib.sha256).hexdigest()


def mac_matches(event: SealedEvent, key: bytes) -> bool:
    """True when ``event`` carries a MAC and its nonce and fields still match it."""
    if not event.nonce or not event.mac:
        return False
    return hmac.compare_digest(event.mac, compute_mac(event.nonce, canonical_fields(event), key))


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


def stamp(event: SealedEvent) -> None:
    """Ready a new event for its INSERT: subject columns, the newest key version, a fresh nonce and the MAC
    over them. Reads nothing from the database; the chain links come after the commit (``link``)."""
    _fill_subject_columns(event)
    event.key_version, key = sealing_key()
    event.nonce = secrets.token_hex(16)
    event.position = None
    event.prev_hash = event.hash = ""
    event.mac = compute_mac(event.nonce, canonical_fields(event), key)


class Unsealable(Exception):
    """A pending event whose own MAC does not verify: sealing stops before it, so it stays visible to
    ``verify_audit`` instead of being chained as if it were genuine."""


@dataclass(frozen=True)
class Link:
    """The chain columns ``link`` computed for one event."""

    id: int
    position: int
    prev_hash: str
    hash: str


def link(events: Sequence[SealedEvent], head_position: int, head_hash: str) -> tuple[list[Link], str | None]:
    """Chain ``events`` (committed, unsealed, oldest id first) after the head (``head_position``, 0 with
    ``GENESIS`` for an empty trail). Returns the links for every event up to the first whose own MAC fails
    or whose key version is not held, and the problem with that one (None when all linked)."""
    keys = settings.CONSOLE_AUDIT_KEYS
    links: list[Link] = []
    position, prev_hash = head_position, head_hash
    for event in events:
        key = keys.get(event.key_version)
        if key is None:
            return links, f"event id {event.pk} was written with key version {event.key_version}, which is not held"
        if not mac_matches(event, key):
            return links, f"event id {event.pk} does not match its own MAC: it was altered before it was chained"
        position += 1
        event.position, event.prev_hash = position, prev_hash
        event.hash = compute_hash(prev_hash, canonical_fields(event), key)
        links.append(Link(event.pk, position, prev_hash, event.hash))
        prev_hash = event.hash
    return links, None


def write_links(table: str, links: Sequence[Link], using: str) -> None:
    """Store ``links`` in one UPDATE ... FROM (VALUES ...) (SQLite 3.33+, PostgreSQL); only rows still unsealed."""
    if not links:
        return
    connection = connections[using]
    quote = connection.ops.quote_name
    values = ", ".join(["(CAST(%s AS BIGINT), CAST(%s AS BIGINT), %s, %s)"] * len(links))
    params: list[Any] = []
    for one in links:
        params += [one.id, one.position, one.prev_hash, one.hash]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {quote(table)} SET position = v.column2, prev_hash = v.column3, hash = v.column4 "
            f"FROM (VALUES {values}) AS v WHERE {quote(table)}.id = v.column1 AND {quote(table)}.position IS NULL",
            params,
        )
        if cursor.rowcount != len(links):
            raise RuntimeError(f"sealed {cursor.rowcount} of {len(links)} audit events: another sealer raced this one")


def lock_for_sealing(using: str) -> None:
    """Inside the sealing transaction: PostgreSQL takes the sealers' advisory lock (writers never take it);
    SQLite's BEGIN IMMEDIATE already holds the write lock."""
    connection = connections[using]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [SEALING_LOCK])


# Called (no arguments) after every commit that appended events: the sealer's wake-up (approvals.audit.sealer).
_appended_listeners: list[Callable[[], None]] = []


def on_append(listener: Callable[[], None]) -> None:
    """Call ``listener`` after each commit that appended audit events (once per listener)."""
    if listener not in _appended_listeners:
        _appended_listeners.append(listener)


def stop_telling(listener: Callable[[], None]) -> None:
    if listener in _appended_listeners:
        _appended_listeners.remove(listener)


def listening() -> bool:
    return bool(_appended_listeners)


def appended() -> None:
    """Tell the listeners that events were committed (an ``on_commit`` callback; never raises)."""
    for listener in list(_appended_listeners):
        try:
            listener()
        except Exception:
            logger.exception("an audit sealing listener failed")
