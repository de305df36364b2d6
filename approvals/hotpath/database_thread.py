"""On SQLite, an API call's database work runs on the one thread the runs and sockets already share.

Django gives each async view a thread of its own for its sync calls. A thread keeps its
connection (``CONN_MAX_AGE = None``), but a new thread has none, so every API call opened a
SQLite connection (0.8 ms) and left it to the garbage collector. Eight reviewers answering
at once were eight writers taking turns through SQLite's busy handler, which sleeps
instead of waking the next one. On the shared thread the calls queue in order on a
connection that stays open. On PostgreSQL every call keeps its own thread and pooled
connection, so calls still overlap there.
"""
import asyncio
import contextvars
from functools import wraps

from asgiref.sync import SyncToAsync
from django.db import connections


def shares_the_database_thread():
    return connections["default"].vendor == "sqlite"


def on_the_shared_database_thread(view):
    """Run an async view outside its request's thread: its sync calls go to the process's one database thread."""

    @wraps(view)
    async def wrapper(request, *args, **kwargs):
        if not shares_the_database_thread():
            return await view(request, *args, **kwargs)
        context = contextvars.copy_context()
        # Without a ThreadSensitiveContext, asgiref sends thread-sensitive calls to its single thread.
        context.run(SyncToAsync.thread_sensitive_context.set, None)
        return await asyncio.get_running_loop().create_task(view(request, *args, **kwargs), context=context)

    return wrapper
