"""Upgrading past migration 0017 leaves the audit trail's id sequence beyond the ids already used.

Before 0017 the console chose each event's id itself on PostgreSQL (the newest id plus one, under its table
lock), so the table's sequence never moved; from 0017 on the INSERT takes the sequence's next value. Runs on
SQLite here and on PostgreSQL from tests/cluster/test_modules_on_postgresql.py.
"""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from approvals import events
from approvals.models import AuditEvent

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE, AFTER = ("approvals", "0016_audit_checkpoints"), ("approvals", "0017_audit_sealed_after_commit")


def migrate(target):
    executor = MigrationExecutor(connection)
    executor.migrate([target])
    executor.loader.build_graph()


def restart_the_id_sequence(cursor, table):
    """As on a console that never took an id from it (earlier tests here did)."""
    if connection.vendor == "postgresql":
        cursor.execute("SELECT setval(pg_get_serial_sequence(%s, 'id'), 1, false)", [AuditEvent._meta.db_table])
    else:  # SQLite's AUTOINCREMENT counter: an explicit id moves it, as it did before 0017
        cursor.execute("DELETE FROM sqlite_sequence WHERE name = %s", [AuditEvent._meta.db_table])


def test_an_event_after_the_upgrade_takes_an_id_beyond_those_chosen_before_it():
    migrate(BEFORE)
    table = connection.ops.quote_name(AuditEvent._meta.db_table)
    with connection.cursor() as cursor:
        restart_the_id_sequence(cursor, table)
        for event_id in (1, 2, 3):  # as seal_after chose them: explicit ids, the sequence untouched
            cursor.execute(
                f"INSERT INTO {table} (id, actor, action, payload, created_at, prev_hash, hash, tool, kind,"
                " key_version) VALUES (%s, 'alice', 'run.started', '{}', CURRENT_TIMESTAMP, '', '', '', '', 1)",
                [event_id],
            )
    migrate(AFTER)
    migrate(
        (
            "approvals",
            max(n for app, n in MigrationExecutor(connection).loader.graph.leaf_nodes() if app == "approvals"),
        )
    )

    event = events.record(AuditEvent.Action.RUN_STARTED, actor="bob")

    assert event.pk == 4
