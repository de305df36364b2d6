"""The supervisor's safety net (``processes.changes_after``) never loses a change that commits as it looks.

On PostgreSQL ids are not the commit order (docs/design.md, "The audit trail"): a transaction holding id i
can commit after i + 1 did. A look that read the changes without i must keep i among the ids it still
waits for; read a moment later, in a statement of its own, i would look present and be lost.

Needs two database connections and PostgreSQL: skipped on SQLite (whose ids are the commit order) and run
by tests/cluster/test_modules_on_postgresql.py. The other transaction commits right after the look read
the changes, from a statement wrapper on this connection.
"""

import threading

import pytest
from django.db import connection, transaction

from approvals.models import AuditEvent
from approvals.runs import processes

pytestmark = pytest.mark.django_db(transaction=True)

WAIT_SECONDS = 10.0
CANCEL = AuditEvent.Action.RUN_CANCEL_REQUESTED


def test_a_change_committed_below_the_newest_while_the_changes_were_read_is_kept_for_the_next_look():
    if connection.vendor != "postgresql":
        pytest.skip("ids are the commit order on SQLite: no transaction commits below an id already read")
    seq = AuditEvent.objects.create(action="console.note", actor="system").pk
    recorded, release, committed = threading.Event(), threading.Event(), threading.Event()
    held = []

    def hold_a_change_open():
        try:
            with transaction.atomic():
                held.append(AuditEvent.objects.create(action=CANCEL, actor="system"))
                recorded.set()
                release.wait(WAIT_SECONDS)
        finally:
            committed.set()
            connection.close()

    other = threading.Thread(target=hold_a_change_open)
    other.start()
    assert recorded.wait(WAIT_SECONDS)
    newer = AuditEvent.objects.create(action=CANCEL, actor="system").pk
    assert held[0].pk < newer

    def commit_once_the_changes_are_read(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if '"approvals_auditevent"."action" IN' in sql and not release.is_set():
            release.set()
            assert committed.wait(WAIT_SECONDS)
        return result

    try:
        with connection.execute_wrapper(commit_once_the_changes_are_read):
            upto, changes, missing = processes.changes_after(seq)
    finally:
        release.set()
        other.join(WAIT_SECONDS)
    assert committed.is_set() and upto == newer
    assert [change.seq for change in changes] == [newer]  # read before the held change committed...
    assert missing == [held[0].pk]  # ... so it is still waited for
    upto, changes, missing = processes.changes_after(upto, missing)
    assert ([change.seq for change in changes], missing) == ([held[0].pk], [])
