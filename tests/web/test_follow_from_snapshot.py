"""A new dashboard follows on from its snapshot without missing a change committed while it was read.

On PostgreSQL ids are not the commit order (docs/design.md, "The audit trail"): a transaction holding
id i can commit after i + 1 did. A dashboard whose snapshot was read before i committed must take i
when its notice comes, even though i is below the snapshot's ``seq``; so the ids it still waits for are
those its snapshot did not see, read in the snapshot's own view, not a moment later.

The race needs two database connections and PostgreSQL: skipped on SQLite (whose ids are the commit
order) and run by tests/cluster/test_modules_on_postgresql.py. The other transaction is committed from
inside the snapshot's, right after its first read, with a statement wrapper on the sockets' connection.
"""

import threading

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.db import connection, transaction

from approvals import events
from approvals.events import CONSOLE_GROUP
from approvals.models import AuditEvent
from tests.support.dashboard import dashboard_for

pytestmark = pytest.mark.django_db(transaction=True)

WAIT_SECONDS = 10.0


def needs_postgresql():
    if connection.vendor != "postgresql":
        pytest.skip("ids are the commit order on SQLite: no transaction commits below an id already read")


def note(label):
    return AuditEvent.objects.create(action="console.note", actor="system", payload={"note": label})


class HeldEvent:
    """An event recorded in a transaction of another connection, held open until ``commit`` is called."""

    def __init__(self):
        self.recorded, self.release, self.committed = threading.Event(), threading.Event(), threading.Event()
        self.event = None
        self.thread = threading.Thread(target=self._run)

    def _run(self):
        try:
            with transaction.atomic():
                self.event = note("held")
                self.recorded.set()
                self.release.wait(WAIT_SECONDS)
        finally:
            self.committed.set()
            connection.close()

    def start(self):
        self.thread.start()
        assert self.recorded.wait(WAIT_SECONDS)
        return self

    def commit(self):
        self.release.set()
        assert self.committed.wait(WAIT_SECONDS)


def commit_after_the_views_first_read(held):
    """A statement wrapper: once a REPEATABLE READ transaction made its first read, ``held`` commits."""
    armed = []

    def wrapper(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if "REPEATABLE READ" in sql:
            armed.append(sql)
        elif armed and not held.release.is_set():
            held.commit()
        return result

    return wrapper


@database_sync_to_async
def wrap_the_sockets_statements(wrapper):
    connection.execute_wrappers.append(wrapper)


@database_sync_to_async
def unwrap_the_sockets_statements(wrapper):
    connection.execute_wrappers.remove(wrapper)


async def test_a_change_committed_below_the_snapshots_seq_while_it_was_read_still_comes(alice, settings):
    needs_postgresql()
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "SAFETY_TICK_SECONDS": 3600}  # only the notices deliver here
    held = HeldEvent().start()
    after = await database_sync_to_async(note)("committed first")
    assert held.event.pk < after.pk
    wrapper = commit_after_the_views_first_read(held)
    await wrap_the_sockets_statements(wrapper)
    try:
        async with dashboard_for(alice) as dashboard:
            assert held.committed.is_set(), "the held transaction was not committed during the snapshot"
            assert dashboard.snapshot["seq"] == after.pk  # read before the held event committed
            # Its notice comes now, below the seq the dashboard started from: it must still be passed on.
            await get_channel_layer().group_send(CONSOLE_GROUP, events.change_message(held.event))
            late = await dashboard.expect_event("console.note", seq=held.event.pk)
            assert late["payload"] == {"note": "held"}
            await get_channel_layer().group_send(CONSOLE_GROUP, events.change_message(after))  # in the snapshot
            newer = await database_sync_to_async(note)("after the snapshot")
            await get_channel_layer().group_send(CONSOLE_GROUP, events.change_message(newer))
            await dashboard.expect_event("console.note", seq=newer.pk, prev=after.pk)
    finally:
        await unwrap_the_sockets_statements(wrapper)
        held.release.set()
        held.thread.join(WAIT_SECONDS)
