"""The audit trail as evidence: a keyed hash chain over every event, and its verification.

Each event stores ``prev_hash`` (the previous event's ``hash``, "" for the first),
``key_version`` and ``hash`` = HMAC-SHA256(key, prev_hash + canonical JSON of its own
fields, id and key version included). The keys (``settings.CONSOLE_AUDIT_KEYS``) live in
the deployment's secrets, never in the database: an edited row no longer matches its hash,
a deleted row leaves a gap in the ids, and re-hashing the chain after either needs the key.
Removing events from the end leaves no gap; ``verify_chain(head=...)`` checks the trail
against a head recorded earlier, outside the database.

An event is chained after its commit (``models.sealing``, ``approvals.audit.sealer``): its
``position`` is its place in the one order of the trail, and "#N" in what verification says is
that position (the id too, on SQLite and for every event written before migration 0017). Until
it is chained, an event is checked against its own MAC (``nonce``, ``mac``): an edit is found,
a deletion is not (on SQLite the ids still show it). docs/design.md, "The audit trail".
After ``archive_audit`` the trail starts after the newest checkpoint, whose ``last_event`` is a
position too (``approvals.audit.archive``).
"""

import hashlib
import hmac
from dataclasses import dataclass, field
from typing import Any

from django.apps.registry import Apps
from django.conf import settings
from django.db import connections
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.models import F

from approvals.audit.archive import verify_checkpoints
from approvals.models import AuditCheckpoint, AuditEvent
from approvals.models.sealing import (  # noqa: F401  (verify and backfill re-hash with these)
    GENESIS,
    SEALING_LOCK,
    canonical_fields,
    canonical_json,
    canonical_time,
    compute_hash,
    issued_up_to,
    mac_matches,
    sealing_key,
)


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
    head: str | None = None  # "#<position>:<hash>" of the newest chained event, to keep outside the database
    # Of ``verified``: events committed but not chained yet, each checked against its own MAC.
    unchained: int = 0
    # Events up to this position were archived (manage.py archive_audit): the trail starts after it.
    archived_up_to: int | None = None
    checkpoints: int = 0

    @property
    def ok(self) -> bool:
        return self.problem is None


def parse_head(text: str) -> tuple[int, str]:
    """``"#120:ab12…"`` (or ``"120:ab12…"``) -> (120, "ab12…"); ValueError with a message otherwise."""
    number, separator, digest = text.strip().lstrip("#").partition(":")
    if not separator or not number.isascii() or not number.isdigit() or len(digest) != 64:
        raise ValueError(f"A head looks like #120:<64 hex characters>, as verify_audit prints it (got {text!r}).")
    return int(number), digest.lower()


def verify_chain(using: str = "default", chunk_size: int = 5000, head: tuple[int, str] | None = None) -> ChainReport:
    """Walk every chained event in position order, then the unchained ones by id; the first altered or
    missing event, or how many verified.

    Each event is checked with the key of its own ``key_version`` from ``settings.CONSOLE_AUDIT_KEYS``:
    a chained one against its hash and the one before it, an unchained one against its own MAC.
    After ``archive_audit`` the trail starts at the newest checkpoint (approvals/audit/archive.py),
    whose seal and link to the checkpoints before it are verified first: the oldest chained event left
    must take the position after the checkpoint's head and link to its hash.
    ``head``, a ``(position, hash)`` recorded by an earlier verification, must still be in the chain:
    that finds events removed from the end, which leave no gap behind.
    """
    keys = settings.CONSOLE_AUDIT_KEYS
    checkpoints = verify_checkpoints(using)
    start = checkpoints.newest
    archived = start.last_event if start else None
    # SQLite hands out ids under its write lock and never loses one to a rollback: there they have no gap
    # either, and the sealer chains them in that order, so there a position is its event's id.
    ids_are_gapless = connections[using].vendor == "sqlite"
    prev_position: int | None = archived
    prev_id: int | None = archived if ids_are_gapless else None
    prev_hash, count, unchained = (start.head_hash if start else GENESIS), 0, 0
    ranges: list[KeyRange] = []

    def failed(problem: str, event_id: int | None) -> ChainReport:
        return ChainReport(
            count,
            problem,
            event_id,
            ranges,
            unchained=unchained,
            archived_up_to=archived,
            checkpoints=checkpoints.count,
        )

    if checkpoints.problem:
        return failed(checkpoints.problem, None)

    # The chained events in their order, then those not chained yet, oldest id first.
    ordered = AuditEvent.objects.using(using).order_by(F("position").asc(nulls_last=True), "id")
    for event in ordered.iterator(chunk_size=chunk_size):
        if ids_are_gapless and prev_id is not None and event.pk != prev_id + 1:
            behind = AuditEvent.objects.using(using).filter(pk=prev_id + 1, position__isnull=True).first()
            if behind is not None and start is not None and behind.created_at <= start.replay_bound:
                return failed(_put_back(behind, start), behind.pk)
            missing = f"#{prev_id + 1}" if event.pk == prev_id + 2 else f"#{prev_id + 1}–#{event.pk - 1}"
            return failed(f"Event {missing} is missing: the trail jumps from #{prev_id} to #{event.pk}.", prev_id + 1)
        key = keys.get(event.key_version)
        if key is None:
            return failed(
                f"Event {_name(event)} was sealed with key version {event.key_version}, which "
                "CONSOLE_AUDIT_KEYS does not hold: add that key back to verify it.",
                event.pk,
            )
        if event.position is None:  # committed, not chained yet: its own MAC is all it has
            if not mac_matches(event, key):
                return failed(
                    f"Event {_name(event)} was altered: it is not chained yet, and its contents no longer match "
                    f"its own MAC. Checked with key version {event.key_version}.",
                    event.pk,
                )
            if start is not None and event.created_at <= start.replay_bound:
                return failed(_put_back(event, start), event.pk)
            prev_id, count, unchained = event.pk, count + 1, unchained + 1
            continue
        if prev_position is not None and event.position != prev_position + 1:
            gap = (
                f"#{prev_position + 1}"
                if event.position == prev_position + 2
                else f"#{prev_position + 1}–#{event.position - 1}"
            )
            return failed(
                f"Event {gap} is missing: the trail jumps from #{prev_position} to #{event.position}.", event.pk
            )
        if event.prev_hash != prev_hash:
            if prev_position is None:
                problem = (
                    f"Events before {_name(event)} are missing: #{event.position} is the oldest event left, "
                    "but its prev_hash says others came before it, and no checkpoint says they were archived."
                )
            elif start is not None and prev_position == start.last_event:
                problem = (
                    f"Event {_name(event)} does not follow checkpoint #{start.pk}: its prev_hash is not the hash "
                    f"of #{prev_position}, the last archived event."
                )
            else:
                problem = (
                    f"Event {_name(event)} does not follow #{prev_position}: its prev_hash is not #{prev_position}'s "
                    f"hash (#{prev_position} was altered and re-hashed, or an event between them was removed)."
                )
            return failed(problem, event.pk)
        if not hmac.compare_digest(event.hash, compute_hash(event.prev_hash, canonical_fields(event), key)):
            return failed(
                f"Event {_name(event)} was altered: its contents no longer match its hash. Checked with key "
                f"version {event.key_version}; an event re-sealed with a key this console does not hold "
                "reads the same.",
                event.pk,
            )
        if ranges and ranges[-1].version == event.key_version:
            ranges[-1].last = event.position
        else:
            ranges.append(KeyRange(event.key_version, event.position, event.position))
        prev_id, prev_position, prev_hash, count = event.pk, event.position, event.hash, count + 1
    issued = issued_up_to(AuditEvent._meta.db_table, using)
    if issued is not None and issued > (prev_id or 0):
        first_missing = (prev_id or 0) + 1
        missing = f"#{first_missing}" if issued == first_missing else f"#{first_missing}–#{issued}"
        newest = f"the newest event left is #{prev_id}" if prev_id is not None else "no event is left"
        return failed(f"Event {missing} is missing: {newest}, but ids up to #{issued} were issued.", first_missing)
    if head is not None and start is not None and head[0] <= start.last_event:
        archived_problem = _archived_head_problem(head, using)
        if archived_problem:
            return failed(archived_problem, head[0])
    elif head is not None:
        head_id, head_hash = head
        kept = AuditEvent.objects.using(using).filter(position=head_id).values_list("hash", flat=True).first()
        if kept is None:
            return failed(
                f"Event #{head_id}, the head recorded earlier, is missing: the trail now ends at "
                f"#{prev_position or 0}, so events were removed from its end.",
                head_id,
            )
        if kept != head_hash:
            return failed(
                f"Event #{head_id} is not the head recorded earlier: its hash changed, so the trail "
                "was rewritten up to it.",
                head_id,
            )
    return ChainReport(
        count,
        None,
        None,
        ranges,
        f"#{prev_position}:{prev_hash}" if prev_position is not None else None,
        unchained=unchained,
        archived_up_to=archived,
        checkpoints=checkpoints.count,
    )


def _archived_head_problem(head: tuple[int, str], using: str) -> str | None:
    """A head recorded before its event was archived: checked against the checkpoint that ends at it, else
    it can only be checked in its file (``verify_audit --archive FILE --head``), so the trail alone fails."""
    head_id, head_hash = head
    covering = AuditCheckpoint.objects.using(using).filter(first_event__lte=head_id, last_event__gte=head_id).first()
    if covering is None:
        return f"Event #{head_id}, the head recorded earlier, is neither in the trail nor in an archive's range."
    if covering.last_event == head_id:
        if hmac.compare_digest(covering.head_hash, head_hash):
            return None
        return (
            f"Event #{head_id} is not the head recorded earlier: checkpoint #{covering.pk}, which archived it, "
            "holds another hash, so the trail was rewritten up to it."
        )
    return (
        f"Event #{head_id}, the head recorded earlier, was archived to {covering.archive_name} (events "
        f"#{covering.first_event}–#{covering.last_event}): check it there with verify_audit --archive "
        f"{covering.archive_name} --head #{head_id}:<hash>, then keep the head this trail prints."
    )


def _put_back(event: AuditEvent, start: AuditCheckpoint) -> str:
    """What verification says of an event not chained yet that is older than the newest one archived."""
    return (
        f"Event {_name(event)} was created at {canonical_time(event.created_at)}, at or before the newest event "
        f"checkpoint #{start.pk} archived: it is an archived event put back (its MAC is genuine, its place in the "
        "chain is gone), and the sealers refuse to chain it."
    )


def _name(event: AuditEvent) -> str:
    """How verification names an event: ``#<position>``, with its id when that differs or it has no position."""
    if event.position is None:
        return f"id {event.pk} (not chained yet)"
    return f"#{event.position}" if event.position == event.pk else f"#{event.position} (id {event.pk})"


def backfill_chain(
    apps: Apps | None = None, schema_editor: BaseDatabaseSchemaEditor | None = None, using: str = "default"
) -> None:
    """(Re)seal every event in chain order (position, then the unchained by id) with the newest key; raw SQL,
    since the ORM refuses updates. Chains the unchained ones too, numbering positions on from the oldest
    chained event's (after ``archive_audit``: from the newest checkpoint's head, which the first event
    left links to).

    A data migration's RunPython (sealing events written before the chain, or before it was
    keyed) and ``manage.py reseal_audit`` (after a key rotation) call it; it re-hashes whatever
    it finds, so verify the chain first. Fills tool and kind where they are empty.
    """
    # In a migration, the historical models: the fields of then, which the current classes do not describe.
    model: Any = apps.get_model("approvals", "AuditEvent") if apps is not None else AuditEvent
    request_model: Any = apps.get_model("approvals", "Request") if apps is not None else None
    run_model: Any = apps.get_model("approvals", "Run") if apps is not None else None
    if schema_editor is not None:
        using = schema_editor.connection.alias
    connection = connections[using]
    table = connection.ops.quote_name(model._meta.db_table)
    # Migrations before 0008 have no key_version column yet: they write the unkeyed chain of then.
    keyed = any(f.name == "key_version" for f in model._meta.concrete_fields)
    # From migration 0017 on, events have a position: the chain's order, which is no longer the ids'.
    positioned = any(f.name == "position" for f in model._meta.concrete_fields)
    order = (F("position").asc(nulls_last=True), "id") if positioned else ("id",)
    version, key = sealing_key()
    prev_hash = GENESIS
    position: int | None = None
    if apps is None:  # after archive_audit the first event left links to the newest checkpoint's head
        start = AuditCheckpoint.objects.using(using).order_by("-id").first()
        prev_hash = start.head_hash if start else GENESIS
        position = start.last_event if start else None
    with connection.cursor() as cursor:
        if positioned and connection.vendor == "postgresql":  # no sealer may chain while the trail is re-sealed
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [SEALING_LOCK])
        for event in model.objects.using(using).order_by(*order).iterator(chunk_size=2000):
            if not event.tool or not event.kind:
                request = (
                    (request_model or type(event).request.field.related_model)
                    .objects.using(using)
                    .filter(pk=event.request_id)
                    .values("tool", "kind")
                    .first()
                    if event.request_id
                    else None
                )
                run = (
                    (run_model or type(event).run.field.related_model)
                    .objects.using(using)
                    .filter(pk=event.run_id)
                    .values("tool")
                    .first()
                    if event.run_id
                    else None
                )
                event.tool = event.tool or (request or {}).get("tool") or (run or {}).get("tool") or ""
                event.kind = event.kind or (request or {}).get("kind") or ""
            event.key_version = version if keyed else 0
            event.prev_hash = prev_hash
            if keyed:
                event.hash = compute_hash(prev_hash, canonical_fields(event), key)
            else:  # before migration 0008: the unkeyed chain of then, which 0008 verifies and seals
                fields = canonical_fields(event)
                del fields["key_version"]
                event.hash = hashlib.sha256((prev_hash + canonical_json(fields)).encode("utf-8")).hexdigest()
            if positioned:
                position = (event.position or 1) if position is None else position + 1
                cursor.execute(
                    f"UPDATE {table} SET tool = %s, kind = %s, key_version = %s, prev_hash = %s, hash = %s, "
                    "position = %s WHERE id = %s",
                    [event.tool, event.kind, version, event.prev_hash, event.hash, position, event.pk],
                )
            elif keyed:
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
