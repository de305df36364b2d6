"""Two changes the realtime benchmarks suggest, applied from outside for ``bench/realtime.py --proposed-fixes``.

Loaded into the console like a tool module (``TOOLNEXUS_TOOL_MODULES=...,bench.proposed_fixes``),
so the benchmark can measure them without editing approvals/. Neither is part of the console.

1. The dashboard consumer dispatches a message straight to its handler. Channels 4.2+
   (``AsyncConsumer.dispatch``) first awaits ``aclose_old_connections()``, a hop to the
   one thread-sensitive database thread, for every message to every socket: one event to
   100 dashboards queues 100 hops behind the runs' queries. Every database call in the
   consumers already goes through ``database_sync_to_async``, which closes old
   connections itself, so the hop buys nothing there.
2. One SQLite connection stays open for the life of the process. With ``CONN_MAX_AGE = 0``
   every database call opens and closes its connection on the one database thread; when it
   is the last one open, SQLite checkpoints the WAL and deletes it inside ``close()``, and
   the next queued call waits for that. An idle extra connection (no transaction, no lock)
   makes every close cheap; the WAL is still checkpointed every 1,000 pages.
"""
import sqlite3

from channels.consumer import get_handler_name
from django.conf import settings
from toolnexus import define_tool

from approvals import consumers


async def _dispatch_without_closing_connections(self, message):
    handler = getattr(self, get_handler_name(message), None)
    if handler is None:
        raise ValueError(f"No handler for message type {message['type']}")
    await handler(message)


consumers.ConsoleConsumer.dispatch = _dispatch_without_closing_connections

_database = settings.DATABASES["default"]
_held_connection = None
if _database["ENGINE"] == "django.db.backends.sqlite3":
    _held_connection = sqlite3.connect(_database["NAME"], check_same_thread=False)
    _held_connection.execute("SELECT count(*) FROM sqlite_master").fetchall()


def proposed_fixes_loaded():
    """Says the benchmark's proposed fixes are applied in this process."""
    return "dispatch without per-message close; " + ("one SQLite connection held" if _held_connection else "PostgreSQL")


TOOLS = [define_tool(proposed_fixes_loaded, name="proposed_fixes_loaded")]
