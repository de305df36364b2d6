"""A dashboard's snapshot is one view of the database: its rows and totals are what the audit trail
says at the snapshot's own sequence number, however many requests open and close meanwhile.

A dashboard applies every event after ``seq`` to the snapshot's totals, so a total that already
counts a later event is counted twice (and a dashboard's "open" total drifts, even below zero).
Run on SQLite here and on PostgreSQL by tests/cluster/test_modules_on_postgresql.py, where each
statement of a READ COMMITTED transaction sees its own moment.
"""

import threading

import pytest
import toolnexus
from django.db import connection

from approvals import frames
from approvals.models import AuditEvent
from approvals.review import decisions

pytestmark = pytest.mark.django_db(transaction=True)

OPENED = AuditEvent.Action.REQUEST_OPENED
CLOSED = (
    AuditEvent.Action.REQUEST_ANSWERED,
    AuditEvent.Action.REQUEST_DECLINED,
    AuditEvent.Action.REQUEST_CANCELLED,
    AuditEvent.Action.REQUEST_EXPIRED,
)


def open_at(seq):
    """How many requests the audit trail says were open just after event ``seq``."""
    events = AuditEvent.objects.filter(id__lte=seq)
    return events.filter(action=OPENED).count() - events.filter(action__in=CLOSED).count()


def churn(stop, rounds):
    """Opens requests and declines every other one, until ``stop`` is set or ``rounds`` are done."""
    try:
        for i in range(rounds):
            if stop.is_set():
                return
            decisions.open_request(toolnexus.Request(id=f"churn-{i}", kind="approval", prompt=f"Churn {i}?"))
            if i % 2:
                decisions.resolve_request(f"churn-{i - 1}", ok=False, reason="declined", actor="system")
    finally:
        connection.close()


def test_each_snapshot_agrees_with_the_audit_trail_at_its_own_seq():
    stop = threading.Event()
    writer = threading.Thread(target=churn, args=(stop, 400))
    writer.start()
    taken = []
    try:
        while writer.is_alive() and len(taken) < 150:
            frame = frames.snapshot()
            taken.append((frame["seq"], frame["counts"]["requests"], len(frame["requests"])))
    finally:
        stop.set()
        writer.join(timeout=60)
    assert not writer.is_alive()
    assert len(taken) > 10, "the writer finished before enough snapshots were taken"
    wrong = [(seq, counted, open_at(seq)) for seq, counted, _ in taken if counted != open_at(seq)]
    assert wrong == [], f"{len(wrong)} of {len(taken)} snapshots disagree (seq, counted, trail): {wrong[:5]}"
    rows = [(seq, shown, open_at(seq)) for seq, _, shown in taken if shown != min(open_at(seq), 50)]
    assert rows == [], f"snapshot rows disagree with the trail (seq, rows, trail): {rows[:5]}"
