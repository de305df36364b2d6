"""Backing up and restoring the console's SQLite database while the console runs.

``backup_database`` copies the live database with SQLite's online backup API in one step: it reads
one consistent snapshot (in WAL mode writers go on meanwhile), writes a self-contained file (journal
mode DELETE, no ``-wal`` beside it), checks it (``PRAGMA integrity_check``), fsyncs it and links it
to its name, never over an existing file. ``restore_database`` copies such a file into the configured
database file, which must not exist yet. PostgreSQL is backed up with ``pg_dump`` instead
(docs/operations.md, "Backup and restore"): both functions refuse it.
"""

import os
import sqlite3
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from django.db import connections

PG_RECIPE = (
    "This console runs on PostgreSQL: back it up with pg_dump and restore with pg_restore, as "
    'docs/operations.md shows ("Backup and restore"): pg_dump --format=custom --file console.dump "$DATABASE_URL".'
)
# The tables a report counts, to say what a backup or a restore holds.
COUNTED = {"runs": "approvals_run", "requests": "approvals_request", "audit events": "approvals_auditevent"}


class BackupError(Exception):
    """A backup or restore refused or failed; the message says why and what to do."""


@dataclass(frozen=True)
class Copied:
    path: Path
    size: int
    counts: dict[str, int]


def sqlite_path(using: str = "default") -> Path:
    """The database file of ``using``; BackupError on PostgreSQL (or an in-memory database)."""
    connection = connections[using]
    if connection.vendor == "postgresql":
        raise BackupError(PG_RECIPE)
    if connection.vendor != "sqlite":
        raise BackupError(f"Backing up a {connection.vendor} database is not supported.")
    name = str(connection.settings_dict["NAME"])
    if name == ":memory:" or name.startswith("file::memory:"):
        raise BackupError("The database is in memory: there is nothing on disk to back up.")
    return Path(name)


def _counts(database: sqlite3.Connection) -> dict[str, int]:
    counts = {}
    for label, table in COUNTED.items():
        try:
            counts[label] = database.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
        except sqlite3.OperationalError:  # not migrated that far
            counts[label] = 0
    return counts


def _copy(source: Path, target: Path, *, progress: Callable[[str], None]) -> Copied:
    """Copy ``source`` into a new file ``target`` with the backup API; temp file, check, fsync, link."""
    if target.exists():
        raise BackupError(f"{target} exists: refusing to overwrite it. Choose another name or move it away.")
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        # A writable connection: reading a WAL database needs its -shm; timeout waits out a checkpoint.
        with closing(sqlite3.connect(source, timeout=30)) as origin, closing(sqlite3.connect(temporary)) as copy:
            origin.backup(copy)  # pages=-1: one step, one snapshot, never restarted by the console's writes
            copy.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
            problems = [row[0] for row in copy.execute("PRAGMA integrity_check")]
            if problems != ["ok"]:
                raise BackupError(f"The copy failed its integrity check: {'; '.join(problems[:5])}")
            counts = _counts(copy)
        progress("copied")
        with open(temporary, "rb+") as handle:
            os.fsync(handle.fileno())
        try:
            os.link(temporary, target)
        except FileExistsError:
            raise BackupError(f"{target} appeared meanwhile: refusing to overwrite it.") from None
        descriptor = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
    finally:
        temporary.unlink(missing_ok=True)
    return Copied(target, target.stat().st_size, counts)


def backup_database(*, out: Path, using: str = "default", progress: Callable[[str], None] | None = None) -> Copied:
    """Back up the running console's SQLite database to ``out`` (a new file)."""
    source = sqlite_path(using)
    if not source.exists():
        raise BackupError(f"The database {source} does not exist: nothing to back up.")
    return _copy(source, Path(out), progress=progress or (lambda step: None))


def restore_database(*, backup: Path, using: str = "default", progress: Callable[[str], None] | None = None) -> Copied:
    """Restore ``backup`` as the database of ``using``, a file that must not exist yet (or be empty)."""
    target = sqlite_path(using)
    connections[using].close()  # nothing of this process may hold the file while it appears
    if target.exists() and target.stat().st_size == 0:
        target.unlink()  # an empty file left by a connection opened before the restore
    if target.exists():
        raise BackupError(
            f"{target} exists: refusing to overwrite it. Restore into a new file (CONSOLE_SQLITE_PATH) "
            "and point the console at it."
        )
    # SQLite replays a -wal (or rolls back a -journal) it finds beside a database when it opens it: one left by
    # the database this restore replaces would overwrite the restored pages with the old ones.
    leftovers = [side for side in _sidecars(target) if side.exists()]
    if leftovers:
        raise BackupError(
            f"{', '.join(map(str, leftovers))} belong to the database that was at {target}: SQLite would replay "
            "them over the restored file. Move them away with that database first."
        )
    if not Path(backup).is_file():
        raise BackupError(f"{backup}: no such file.")
    with closing(sqlite3.connect(f"file:{Path(backup).resolve()}?mode=ro", uri=True)) as probe:
        try:
            probe.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.DatabaseError as error:
            raise BackupError(f"{backup} is not an SQLite database ({error}).") from None
    copied = _copy(Path(backup), target, progress=progress or (lambda step: None))
    with closing(sqlite3.connect(f"file:{target.resolve()}?mode=ro", uri=True)) as restored:
        problems = [row[0] for row in restored.execute("PRAGMA quick_check")]
        held = _counts(restored)
    if problems != ["ok"] or held != copied.counts:
        raise BackupError(
            f"{target} does not hold what was copied into it ({held} against {copied.counts}; check: "
            f"{'; '.join(problems[:5])}). Move it away and restore again."
        )
    return copied


def _sidecars(database: Path) -> list[Path]:
    return [database.with_name(database.name + suffix) for suffix in ("-wal", "-shm", "-journal")]
