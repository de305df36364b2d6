"""Retention: move the oldest audit events to a compressed JSON Lines file, and verify such a file.

``archive_events`` takes the longest run of oldest chained events created before a moment (a prefix
of the chain's positions, so the trail left stays one unbroken chain; events not chained yet stay),
writes them to a gzip-compressed JSON Lines file (one event a line, in position order: its
``position``, the fields its hash covers, id included, ``prev_hash`` and ``hash``), and only then,
in one transaction, deletes them, adds an :class:`AuditCheckpoint` carrying the chain head (the last
archived event's position, hash and key version) and records an ``audit.archived`` event naming the
range of positions, the file's sha256 and who ran it. On PostgreSQL that transaction holds the
sealers' lock (``models.sealing.SEALING_LOCK``), so no event is chained or re-sealed meanwhile. It
chains the events pending then (before the checkpoint, whose ``archived_created_at`` makes the sealers
refuse any older pending event as an archived row put back) and its own ``audit.archived`` event.

Nothing is lost if it dies half way. The file is written under a temporary name, flushed to disk
(fsync), then linked to its final name (which fails rather than overwrite) and the directory is
flushed; the rows go only after that, in one transaction with the checkpoint. Dying before the
link leaves a ``.tmp`` file and the database untouched; dying after it leaves a complete file and
the database untouched (running again finds the identical file and carries on); dying inside the
transaction rolls it back. Checkpoints are sealed like events: an HMAC under the newest key of
``CONSOLE_AUDIT_KEYS`` over their fields and the previous checkpoint's hash.
"""

import getpass
import gzip
import hashlib
import hmac
import json
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connections, transaction
from django.db.models import Max, Min

from approvals import events
from approvals.models import AuditCheckpoint, AuditEvent
from approvals.models.sealing import (
    GENESIS,
    Unsealable,
    canonical_fields,
    canonical_time,
    compute_hash,
    issued_up_to,
    lock_for_sealing,
    sealing_key,
)

logger = logging.getLogger(__name__)

# Told each step as it is done ("written", "linked", "recorded", "deleted", "committed"): the command prints them.
Progress = Callable[[str], None]


class ArchiveError(Exception):
    """Archiving refused or failed; the message says why and what to do. Nothing was deleted."""


@dataclass(frozen=True)
class Archived:
    """What one ``archive_events`` did."""

    first: int
    last: int
    path: Path
    sha256: str
    checkpoint: AuditCheckpoint
    reused_file: bool  # the file was left complete by an earlier run that died before deleting


def default_archive_dir() -> Path:
    return Path(settings.BASE_DIR) / "var" / "archive"


def archive_name(first: int, last: int) -> str:
    return f"audit-{first:09d}-{last:09d}.jsonl.gz"


def default_actor() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for the uid (a container's random user)
        return f"uid:{os.getuid()}"


# -- checkpoints ---------------------------------------------------------------------------------


def checkpoint_fields(checkpoint: AuditCheckpoint) -> dict[str, Any]:
    """The fields a checkpoint's hash covers, as plain JSON values."""
    return {
        "checkpoint": checkpoint.pk,
        "key_version": checkpoint.key_version,
        "first_event": checkpoint.first_event,
        "last_event": checkpoint.last_event,
        "head_hash": checkpoint.head_hash,
        "head_key_version": checkpoint.head_key_version,
        "archive_name": checkpoint.archive_name,
        "archive_sha256": checkpoint.archive_sha256,
        "archived_by": checkpoint.archived_by,
        "created_at": canonical_time(checkpoint.created_at),
        # Covered from migration 0018 on (and so only where set: older checkpoints keep their hashes).
        **(
            {"archived_created_at": canonical_time(checkpoint.archived_created_at)}
            if checkpoint.archived_created_at is not None
            else {}
        ),
    }


def seal_checkpoint(checkpoint: AuditCheckpoint, previous: AuditCheckpoint | None, using: str = "default") -> None:
    """Give a new checkpoint its id, prev_hash, key version and hash (inside the archiving transaction)."""
    issued = issued_up_to(AuditCheckpoint._meta.db_table, using)
    checkpoint.pk = max(previous.pk if previous else 0, issued or 0) + 1
    checkpoint.prev_hash = previous.hash if previous else GENESIS
    checkpoint.key_version, key = sealing_key()
    checkpoint.hash = compute_hash(checkpoint.prev_hash, checkpoint_fields(checkpoint), key)


@dataclass(frozen=True)
class CheckpointReport:
    """The checkpoints in the database verified: the newest (where the trail starts), or the first problem."""

    newest: AuditCheckpoint | None
    problem: str | None = None
    count: int = 0


def verify_checkpoints(using: str = "default") -> CheckpointReport:
    """Each checkpoint's seal, its link to the one before, and their ranges following each other."""
    keys = settings.CONSOLE_AUDIT_KEYS
    previous: AuditCheckpoint | None = None
    count = 0
    for checkpoint in AuditCheckpoint.objects.using(using).order_by("id"):
        name = f"Checkpoint #{checkpoint.pk} (events #{checkpoint.first_event}–#{checkpoint.last_event})"
        if previous is None and checkpoint.prev_hash != GENESIS:
            return CheckpointReport(previous, f"Checkpoints before #{checkpoint.pk} are missing.", count)
        if previous is not None:
            if checkpoint.pk != previous.pk + 1:
                return CheckpointReport(previous, f"Checkpoint #{previous.pk + 1} is missing.", count)
            if checkpoint.prev_hash != previous.hash:
                return CheckpointReport(
                    previous, f"{name} does not follow checkpoint #{previous.pk}: its prev_hash differs.", count
                )
            if checkpoint.first_event != previous.last_event + 1:
                return CheckpointReport(
                    previous,
                    f"{name} does not start where checkpoint #{previous.pk} ended (#{previous.last_event}).",
                    count,
                )
        key = keys.get(checkpoint.key_version)
        if key is None:
            return CheckpointReport(
                previous,
                f"{name} was sealed with key version {checkpoint.key_version}, which CONSOLE_AUDIT_KEYS does "
                "not hold: add that key back to verify it.",
                count,
            )
        if not hmac.compare_digest(
            checkpoint.hash, compute_hash(checkpoint.prev_hash, checkpoint_fields(checkpoint), key)
        ):
            return CheckpointReport(previous, f"{name} was altered: its contents no longer match its hash.", count)
        previous, count = checkpoint, count + 1
    issued = issued_up_to(AuditCheckpoint._meta.db_table, using)
    if issued is not None and issued > (previous.pk if previous else 0):
        return CheckpointReport(
            previous,
            f"Checkpoint #{issued} is missing: ids up to #{issued} were issued, the newest left is "
            f"#{previous.pk if previous else 0}.",
            count,
        )
    return CheckpointReport(previous, None, count)


def reseal_checkpoints(using: str = "default") -> None:
    """Seal every checkpoint again with the newest key (``manage.py reseal_audit``, after a key rotation)."""
    previous: AuditCheckpoint | None = None
    version, key = sealing_key()
    table = connections[using].ops.quote_name(AuditCheckpoint._meta.db_table)
    with connections[using].cursor() as cursor:
        for checkpoint in AuditCheckpoint.objects.using(using).order_by("id"):
            checkpoint.prev_hash = previous.hash if previous else GENESIS
            checkpoint.key_version = version
            checkpoint.hash = compute_hash(checkpoint.prev_hash, checkpoint_fields(checkpoint), key)
            cursor.execute(
                f"UPDATE {table} SET prev_hash = %s, key_version = %s, hash = %s WHERE id = %s",
                [checkpoint.prev_hash, version, checkpoint.hash, checkpoint.pk],
            )
            previous = checkpoint


# -- archiving ----------------------------------------------------------------------------------


def archivable_range(before: datetime, using: str = "default") -> tuple[int, int] | None:
    """The positions to archive: from the oldest chained event up to the one before the first chained event
    created at or after ``before``. Events not chained yet are never archived: they have no place in the
    chain yet, and the sealer chains them after whatever is left."""
    chained = AuditEvent.objects.using(using).filter(position__isnull=False)
    bounds = chained.aggregate(first=Min("position"), newest=Max("position"))
    if bounds["first"] is None:
        return None
    stop = chained.filter(created_at__gte=before).order_by("position").values_list("position", flat=True).first()
    last = stop - 1 if stop is not None else bounds["newest"]
    return (bounds["first"], last) if last >= bounds["first"] else None


def unchained_before(before: datetime, using: str = "default") -> int:
    """How many events created before ``before`` are not chained yet, so no archive takes them this time."""
    return AuditEvent.objects.using(using).filter(position__isnull=True, created_at__lt=before).count()


# The keys of a line that its hash does not cover: the chain's place and links.
_NOT_HASHED = ("position", "prev_hash", "hash")


def _event_line(event: AuditEvent) -> dict[str, Any]:
    return {**canonical_fields(event), "position": event.position, "prev_hash": event.prev_hash, "hash": event.hash}


def _write_events(handle: Any, first: int, last: int, start: tuple[int, str], using: str) -> tuple[int, str, int]:
    """Write the events at positions #first–#last, checking each against the chain as it goes; (last position,
    hash, key version)."""
    keys = settings.CONSOLE_AUDIT_KEYS
    prev_position, prev_hash = start
    key_version = 0
    rows = AuditEvent.objects.using(using).filter(position__gte=first, position__lte=last).order_by("position")
    for event in rows.iterator(chunk_size=2000):
        position = event.position or 0  # the filter holds chained events only
        if position != prev_position + 1 or event.prev_hash != prev_hash:
            raise ArchiveError(
                f"Not archived: event #{position} does not follow #{prev_position} in the chain. Run verify_audit "
                "to see what is wrong; nothing was deleted."
            )
        key = keys.get(event.key_version)
        line = _event_line(event)
        if key is None or not hmac.compare_digest(
            event.hash, compute_hash(event.prev_hash, canonical_fields(event), key)
        ):
            raise ArchiveError(
                f"Not archived: event #{position} does not verify. Run verify_audit to see what is wrong; nothing "
                "was deleted."
            )
        handle.write((json.dumps(line, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n").encode())
        prev_position, prev_hash, key_version = position, event.hash, event.key_version
    if prev_position != last:
        raise ArchiveError(f"Not archived: events #{prev_position + 1}–#{last} are missing. Run verify_audit.")
    return prev_position, prev_hash, key_version


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_dir(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _start_of_trail(newest: AuditCheckpoint | None, oldest: int) -> tuple[int, str]:
    """(position, hash) the first chained event in the database must follow: the newest checkpoint's head, or
    genesis."""
    return (newest.last_event, newest.head_hash) if newest else (oldest - 1, GENESIS)


def archive_events(
    *,
    before: datetime,
    actor: str,
    out: Path | None = None,
    using: str = "default",
    progress: Progress | None = None,
) -> Archived | None:
    """Archive every chained event from the oldest up to the first created at or after ``before``, by
    position; None if none is.

    Refuses (:class:`ArchiveError`) when the checkpoints or the events to archive do not verify, or
    when ``out`` exists with other contents. See the module docstring for what a crash leaves.
    """
    told: Progress = progress or (lambda step: None)
    checkpoints = verify_checkpoints(using)
    if checkpoints.problem:
        raise ArchiveError(f"Not archived: {checkpoints.problem} Run verify_audit.")
    newest = checkpoints.newest
    span = archivable_range(before, using)
    if span is None:
        return None
    first, last = span
    start = _start_of_trail(newest, first)
    if first != start[0] + 1:
        raise ArchiveError(
            f"Not archived: the oldest chained event is #{first}, but the trail should start at #{start[0] + 1}. "
            "Run verify_audit."
        )
    path = Path(out) if out is not None else default_archive_dir() / archive_name(first, last)
    if path.is_dir():
        raise ArchiveError(f"Not archived: {path} is a directory; --out takes a file name.")
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "xb") as raw:
            # mtime=0 and no name: the same events always give the same bytes, so a rerun recognises its file.
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as compressed:
                head_id, head_hash, head_version = _write_events(compressed, first, last, start, using)
            raw.flush()
            os.fsync(raw.fileno())
        digest = sha256_of(temporary)
        told("written")
        reused = False
        try:
            os.link(temporary, path)  # never overwrites, unlike rename
        except FileExistsError:
            if sha256_of(path) != digest:
                raise ArchiveError(
                    f"Not archived: {path} exists and holds something else; refusing to overwrite it. Move it "
                    "away or pass another --out."
                ) from None
            reused = True  # a run that died after writing it: the same events, the same bytes
        temporary.unlink()
        _fsync_dir(path.parent)
        told("linked")
    finally:
        temporary.unlink(missing_ok=True)
    checkpoint = _commit(first, last, start[1], head_hash, head_version, path, digest, actor, newest, using, told)
    told("committed")
    return Archived(first, last, path, digest, checkpoint, reused)


def _commit(
    first: int,
    last: int,
    first_prev_hash: str,
    head_hash: str,
    head_version: int,
    path: Path,
    digest: str,
    actor: str,
    newest: AuditCheckpoint | None,
    using: str,
    told: Progress,
) -> AuditCheckpoint:
    """Delete the archived rows, add the checkpoint and record ``audit.archived``, all in one transaction
    that holds the sealers' lock (PostgreSQL; SQLite's write lock does it there): no event is chained and
    no ``reseal_audit`` re-hashes the trail meanwhile, while writers go on appending."""
    connection = connections[using]
    table = connection.ops.quote_name(AuditEvent._meta.db_table)
    with transaction.atomic(using=using):
        lock_for_sealing(using)
        now_newest = AuditCheckpoint.objects.using(using).order_by("-id").first()
        if (now_newest.pk if now_newest else None) != (newest.pk if newest else None):
            raise ArchiveError(
                "Not archived: another archive_audit finished meanwhile, and this one deleted nothing. "
                "Run verify_audit, then archive_audit again if events are left to archive."
            )
        # The file was written outside this transaction: the rows must still be the ones it holds (a
        # reseal_audit meanwhile re-hashes them, and deleting them would cut the chain for good).
        in_range = AuditEvent.objects.using(using).filter(position__in=(first, last))
        ends = dict(in_range.values_list("position", "hash"))
        starts = in_range.filter(position=first).values_list("prev_hash", flat=True).first()
        if ends.get(last) != head_hash or starts != first_prev_hash:
            raise ArchiveError(
                f"Not archived: events #{first}–#{last} changed after the file was written (re-sealed "
                "meanwhile?), and this run deleted nothing. Remove the file and run archive_audit again."
            )
        # Chain what is pending now, under the previous checkpoint's bound: after this commit an event not
        # chained yet and created before the newest one archived is refused as an archived row put back.
        _seal_logging_errors(using)
        newest_archived = AuditEvent.objects.using(using).filter(position__gte=first, position__lte=last)
        archived_created_at = newest_archived.aggregate(newest=Max("created_at"))["newest"]
        if newest is not None and archived_created_at is not None:
            archived_created_at = max(archived_created_at, newest.replay_bound)
        checkpoint = AuditCheckpoint(
            archived_created_at=archived_created_at,
            first_event=first,
            last_event=last,
            head_hash=head_hash,
            head_key_version=head_version,
            archive_name=path.name,
            archive_sha256=digest,
            archived_by=actor,
        )
        seal_checkpoint(checkpoint, newest, using)
        # Appended like every event, and chained before the commit (below), after the newest event left.
        events.record(
            AuditEvent.Action.AUDIT_ARCHIVED,
            actor=actor,
            payload={
                "first": first,
                "last": last,
                "events": last - first + 1,
                "file": path.name,
                "sha256": digest,
                "checkpoint": checkpoint.pk,
            },
        )
        told("recorded")
        with connection.cursor() as cursor:
            # Raw SQL: the ORM refuses to delete audit events, and only this may.
            cursor.execute(f"DELETE FROM {table} WHERE position >= %s AND position <= %s", [first, last])
            deleted = cursor.rowcount
        if deleted != last - first + 1:
            raise ArchiveError(f"Not archived: expected to delete {last - first + 1} events, found {deleted}.")
        checkpoint.save(using=using, force_insert=True)
        told("deleted")
        _seal_logging_errors(using)  # audit.archived too: no process may be about to wake a sealer for it
    return checkpoint


def _seal_logging_errors(using: str) -> None:
    """Chain every pending event inside the archiving transaction; one that fails its MAC stays, reported."""
    try:
        while AuditEvent.objects.using(using).seal_pending():
            pass
    except Unsealable:
        logger.exception("archive_audit chained the pending audit events up to one that does not match its MAC")


# -- verifying an archive file -------------------------------------------------------------------


@dataclass(frozen=True)
class ArchiveReport:
    verified: int
    first: int | None
    last: int | None
    sha256: str
    problem: str | None = None
    checkpoint: int | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for number, text in enumerate(handle, start=1):
            yield number, json.loads(text)


def events_in(path: Path) -> Iterator[dict[str, Any]]:
    """The events of an archive file, oldest first, each as its line holds it (the fields its hash covers:
    ``id``, ``action``, ``request``, ``payload`` and the rest; ``position``, ``prev_hash``, ``hash``). Read it
    with ``verify_archive`` first: this does not check it."""
    for _, line in _lines(path):
        yield line


def verify_archive(path: Path, using: str = "default", head: tuple[int, str] | None = None) -> ArchiveReport:
    """An archive file on its own chain (positions consecutive, each prev_hash the one before's hash, each
    hash under its key version), and against its checkpoint in the database: same sha256, its first event
    follows the previous checkpoint's head (or is the first ever), its last event is the checkpoint's head.
    ``head``, a head recorded earlier inside the file's range, must be there with its hash. A line without
    a ``position`` (a file archived before migration 0017) is at its id, as every event of then was."""
    keys = settings.CONSOLE_AUDIT_KEYS
    digest = sha256_of(path)
    count, first, prev_position, prev_hash = 0, None, None, None
    first_prev_hash = GENESIS

    def failed(problem: str, checkpoint: int | None = None) -> ArchiveReport:
        return ArchiveReport(count, first, prev_position, digest, problem, checkpoint)

    try:
        for number, line in _lines(path):
            fields = {k: v for k, v in line.items() if k not in _NOT_HASHED}
            position = line.get("position", fields.get("id"))
            name = f"#{position}" if position == fields.get("id") else f"#{position} (id {fields.get('id')})"
            if first is None:
                first, first_prev_hash = position, line.get("prev_hash", "")
            elif position != (prev_position or 0) + 1:
                return failed(
                    f"Line {number}: event {name} follows #{prev_position}: the positions are not consecutive."
                )
            elif line.get("prev_hash") != prev_hash:
                return failed(
                    f"Event {name} does not follow #{prev_position}: its prev_hash is not #{prev_position}'s hash."
                )
            key = keys.get(fields.get("key_version", -1))
            if key is None:
                return failed(
                    f"Event {name} was sealed with key version {fields.get('key_version')}, which "
                    "CONSOLE_AUDIT_KEYS does not hold: add that key back to verify it."
                )
            if not hmac.compare_digest(str(line.get("hash")), compute_hash(line.get("prev_hash", ""), fields, key)):
                return failed(f"Event {name} was altered: its contents no longer match its hash.")
            if head is not None and position == head[0] and not hmac.compare_digest(str(line["hash"]), head[1]):
                return failed(f"Event {name} is not the head recorded earlier: its hash changed.")
            prev_position, prev_hash, count = position, line["hash"], count + 1
    except (OSError, EOFError, ValueError) as error:  # not gzip, cut short, not JSON
        return failed(f"{path.name} cannot be read to its end ({error}): it is damaged or not an archive.")
    if first is None:
        return failed(f"{path.name} holds no events.")
    checkpoints = AuditCheckpoint.objects.using(using)
    checkpoint = checkpoints.filter(first_event=first).first()
    if checkpoint is None:
        return failed(
            f"No checkpoint in the database starts at event #{first}: this file was not archived from this "
            "console, or its checkpoint was deleted."
        )
    report = verify_checkpoints(using)
    if report.problem:
        return failed(f"The checkpoints do not verify: {report.problem}", checkpoint.pk)
    if checkpoint.last_event != prev_position or checkpoint.head_hash != prev_hash:
        return failed(
            f"The file ends at #{prev_position}, but checkpoint #{checkpoint.pk} recorded #{checkpoint.last_event} "
            "with another hash as the head.",
            checkpoint.pk,
        )
    if checkpoint.archive_sha256 != digest:
        return failed(
            f"The file's sha256 is not the one checkpoint #{checkpoint.pk} recorded: it was changed.", checkpoint.pk
        )
    before = checkpoints.filter(last_event=first - 1).first()
    expected = before.head_hash if before else GENESIS
    if first_prev_hash != expected:
        return failed(
            f"Event #{first}'s prev_hash is not the head of the archive before it"
            f"{f' (checkpoint #{before.pk})' if before else ' (it should be the first event ever)'}.",
            checkpoint.pk,
        )
    return ArchiveReport(count, first, prev_position, digest, None, checkpoint.pk)
