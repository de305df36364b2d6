"""Races between two database connections in one test: a step on a thread (its own connection), and a way to
see, from the test's connection, that the other one waits on a lock (PostgreSQL's pg_stat_activity)."""

import threading
import time

from django.db import connection

BLOCKED_SECONDS = 10.0  # at most, for the other connection to finish or to wait on a lock


def in_another_connection(step):
    """A thread (not started) running ``step`` on a connection of its own, closed when the step ends."""

    def run():
        try:
            step()
        finally:
            connection.close()

    return threading.Thread(target=run)


def waiting_on_a_lock(other, cursor, seconds=BLOCKED_SECONDS):
    """True once the other thread's connection waits on a lock (pg_stat_activity says so); False if it finished
    or ``seconds`` passed first."""
    deadline = time.monotonic() + seconds
    while other.is_alive() and time.monotonic() < deadline:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        if cursor.fetchone()[0]:
            return True
        time.sleep(0.01)  # another connection's progress, which no event announces
    return False
