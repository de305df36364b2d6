"""Keep SQLite's write-ahead log between database calls.

Connections persist per thread (``CONN_MAX_AGE = None``), but some still close: a
worker thread's when it ends, every one when a test or command closes them. When the
closing connection is the last one open on the file, SQLite checkpoints the WAL into the
database and deletes it inside ``close()``, and the next call queued on the one database
thread waits for that. One idle connection held for the life of the process (no
transaction, so no lock and no snapshot) makes every close cheap; SQLite still
checkpoints the WAL as it grows (every 1,000 pages by default).
"""
import sqlite3
import threading

from django.db import connections

_held = {}  # database file -> the idle sqlite3 connection kept on it
_lock = threading.Lock()


def hold_wal_open(alias="default"):
    """Keep one idle connection on the SQLite file behind ``alias``; returns the file, or None (not a file)."""
    settings_dict = connections[alias].settings_dict
    name = str(settings_dict["NAME"])
    if settings_dict["ENGINE"] != "django.db.backends.sqlite3" or name == ":memory:" or "mode=memory" in name:
        return None
    with _lock:
        if name not in _held:
            held = sqlite3.connect(name, check_same_thread=False)
            held.execute("SELECT count(*) FROM sqlite_master").fetchall()  # maps the WAL index: a reader
            _held[name] = held
    return name


def held_files():
    with _lock:
        return sorted(_held)


def release_all():
    """Close the held connections (a test session ending); the last close checkpoints each WAL."""
    with _lock:
        held = list(_held.items())
        _held.clear()
    for _, connection in held:
        connection.close()
    return [name for name, _ in held]
