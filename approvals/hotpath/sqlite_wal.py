"""Replaces SQLite's checkpointing inside ``close()`` and inside the COMMIT that crosses the WAL's
size limit: one idle connection per file keeps the WAL open for the life of the process, and
checkpoints it from a thread of its own twice a second. Measurements: docs/performance.md.
"""

import logging
import sqlite3
import threading
from dataclasses import dataclass, field

from django.db import connections

logger = logging.getLogger(__name__)

CHECKPOINT_SECONDS = 0.5


@dataclass
class HeldFile:
    """One database file's idle connection and the thread that checkpoints through it."""

    connection: sqlite3.Connection
    stop: threading.Event = field(default_factory=threading.Event)
    done: threading.Condition = field(default_factory=threading.Condition)
    checkpoints: int = 0  # passive checkpoints finished, for tests and the curious
    thread: threading.Thread | None = None

    def checkpoint_forever(self) -> None:
        while not self.stop.wait(CHECKPOINT_SECONDS):
            self.checkpoint()

    def checkpoint(self) -> None:
        """Copy what the WAL holds into the database file without waiting for any reader or writer."""
        try:
            self.connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as exc:  # busy, or the file went away with a test: the next turn tries again
            logger.debug("checkpoint skipped: %s", exc)
        with self.done:
            self.checkpoints += 1
            self.done.notify_all()

    def wait_for_checkpoints(self, count: int, timeout: float | None) -> bool:
        """Block until ``count`` more checkpoints have finished; False if ``timeout`` passed first."""
        with self.done:
            target = self.checkpoints + count
            return self.done.wait_for(lambda: self.checkpoints >= target, timeout)


_held: dict[str, HeldFile] = {}  # database file -> HeldFile
_lock = threading.Lock()


def hold_wal_open(alias: str = "default") -> str | None:
    """Keep one idle connection on the SQLite file behind ``alias``; returns the file, or None (not a file)."""
    settings_dict = connections[alias].settings_dict
    name = str(settings_dict["NAME"])
    if settings_dict["ENGINE"] != "django.db.backends.sqlite3" or name == ":memory:" or "mode=memory" in name:
        return None
    with _lock:
        if name not in _held:
            connection = sqlite3.connect(name, check_same_thread=False)
            connection.execute("SELECT count(*) FROM sqlite_master").fetchall()  # maps the WAL index: a reader
            held = _held[name] = HeldFile(connection)
            held.thread = threading.Thread(target=held.checkpoint_forever, name="sqlite-checkpoint", daemon=True)
            held.thread.start()
    return name


def held_file(name: str) -> HeldFile | None:
    with _lock:
        return _held.get(name)


def held_files() -> list[str]:
    with _lock:
        return sorted(_held)


def release(name: str) -> bool:
    """Stop checkpointing ``name`` and close its idle connection; False if it was not held."""
    with _lock:
        file = _held.pop(name, None)
    if file is None:
        return False
    file.stop.set()
    if file.thread is not None:  # set as the file was held
        file.thread.join()
    file.connection.close()
    return True


def release_all() -> list[str]:
    """Close the held connections (a test session ending); the last close checkpoints each WAL."""
    names = held_files()
    for name in names:
        release(name)
    return names
