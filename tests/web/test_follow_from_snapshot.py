"""A new socket follows on from where it starts without missing a change committed as it started.

On PostgreSQL ids are not the commit order (docs/design.md, "The audit trail"): a transaction holding
id i can commit after i + 1 did. A dashboard whose snapshot was read before i committed must take i
when its notice comes, even though i is below the snapshot's ``seq``; so the ids it still waits for are
those its snapshot did not see, read in the snapshot's own view, not a moment later. A host socket
starts from the newest id and the ids below it, read in one view likewise.

The race needs two database connections and PostgreSQL: skipped on SQLite (whose ids are the commit
order) and run by tests/cluster/test_modules_on_postgresql.py. The other transaction is committed right
after the socket read the newest event's id, with a statement wrapper on the sockets' connection.
"""

import threading

import pytest
import toolnexus
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.db import connection, transaction

from approvals import events
from approvals.events import CONSOLE_GROUP
from approvals.models import AuditEvent
from approvals.review import decisions
from approvals.runs import runner
from tests.support.dashboard import RECEIVE_TIMEOUT, dashboard_for, host_socket
from tests.support.signatures import verified_frame

pytestmark = pytest.mark.django_db(transaction=True)

WAIT_SECONDS = 10.0


def needs_postgresql():
    if connection.vendor != "postgresql":
        pytest.skip("ids are the commit order on SQLite: no transaction commits below an id already read")


def note(label):
    return AuditEvent.objects.create(action="console.note", actor="system", payload={"note": label})


class Held:
    """``write()`` in a transaction of another connection, held open until ``commit`` is called."""

    def __init__(self, write):
        self.write = write
        self.recorded, self.release, self.committed = threading.Event(), threading.Event(), threading.Event()
        self.event = None
        self.thread = threading.Thread(target=self._run)

    def _run(self):
        try:
            with transaction.atomic():
                self.event = self.write()
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

    def end(self):
        self.release.set()
        self.thread.join(WAIT_SECONDS)


def commit_once_the_socket_reads_the_newest_id(held, after_reading):
    """A statement wrapper: ``held`` commits right after the first read of the newest event's id that follows a
    read of the table ``after_reading`` (the socket's login: its session, its token), so the socket's own, not
    the supervisor's (whose safety poll waits an hour here)."""
    logged_in = []

    def wrapper(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if f'FROM "{after_reading}"' in sql:
            logged_in.append(sql)
        newest_id = sql.startswith('SELECT "approvals_auditevent"."id"') and "WHERE" not in sql and "DESC" in sql
        if newest_id and logged_in and not held.release.is_set():
            held.commit()
        return result

    return wrapper


async def wrap_the_sockets_statements(wrapper):
    await runner.ensure_started()  # the supervisor reads the newest id as it starts: before, not during the test
    await database_sync_to_async(lambda: connection.execute_wrappers.append(wrapper))()


@database_sync_to_async
def unwrap_the_sockets_statements(wrapper):
    connection.execute_wrappers.remove(wrapper)


async def test_a_change_committed_below_the_snapshots_seq_while_it_was_read_still_comes(alice, settings):
    needs_postgresql()
    settings.TOOLNEXUS = {
        **settings.TOOLNEXUS,
        "SAFETY_TICK_SECONDS": 3600,
        "SAFETY_POLL_SECONDS": 3600,
    }  # only the notices deliver here
    held = Held(lambda: note("held")).start()
    after = await database_sync_to_async(note)("committed first")
    assert held.event.pk < after.pk
    wrapper = commit_once_the_socket_reads_the_newest_id(held, after_reading="django_session")
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
        held.end()


def answer_in_the_held_transaction(request_id, reviewer):
    decisions.resolve_request(request_id, ok=True, user=reviewer, via="web")
    return AuditEvent.objects.filter(request_id=request_id).latest("id")


async def test_a_hosts_answer_committed_below_where_its_socket_starts_still_comes(
    alice, make_user, issue_token, settings
):
    needs_postgresql()
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "SAFETY_TICK_SECONDS": 3600, "SAFETY_POLL_SECONDS": 3600}
    svc = await database_sync_to_async(make_user)("svc", password=None)
    secret = await database_sync_to_async(issue_token)(svc)
    wire = toolnexus.Request(id="held-answer", kind="approval", prompt="Ship it?")
    await database_sync_to_async(decisions.open_request)(wire, opened_by=svc, actor="svc")
    held = Held(lambda: answer_in_the_held_transaction("held-answer", alice)).start()
    after = await database_sync_to_async(note)("committed first")
    assert held.event.pk < after.pk
    wrapper = commit_once_the_socket_reads_the_newest_id(held, after_reading="approvals_apitoken")
    await wrap_the_sockets_statements(wrapper)
    try:
        async with host_socket(secret) as (accepted, _, socket):
            assert accepted
            assert held.committed.is_set(), "the held transaction was not committed as the socket started"
            notice = await database_sync_to_async(events.change_message)(held.event)
            await get_channel_layer().group_send(CONSOLE_GROUP, notice)
            assert verified_frame(await socket.receive_json_from(RECEIVE_TIMEOUT)) == {
                "type": "answer",
                "answer": {"id": "held-answer", "ok": True},
            }
    finally:
        await unwrap_the_sockets_statements(wrapper)
        held.end()
