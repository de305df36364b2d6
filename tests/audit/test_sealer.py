"""The sealer thread (approvals/audit/sealer.py) chains what no commit in its process woke it for: another
process's events, found by its poll, and those a failed sealing left, retried with backoff. Real threads and
a real database; the test waits on what the sealer says it did after each attempt, never on a clock."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction

from approvals import events
from approvals.audit import sealer as sealers
from approvals.audit.archive import archive_events
from approvals.audit.chain import verify_chain
from approvals.audit.sealer import Sealer
from approvals.models import AuditEvent, sealing
from tests.support.live_console import console_env, manage

pytestmark = pytest.mark.django_db(transaction=True, reset_sequences=True)

WAIT_SECONDS = 10.0  # at most: the sealer reports after each attempt, so a pass takes a poll or a retry
TABLE = AuditEvent._meta.db_table


@pytest.fixture
def running():
    """Start a sealer; stopped (and its thread joined) after the test."""
    started = []

    def start(**options):
        sealer = Sealer(**{"delay": 0.0, **options})
        sealer.start()
        started.append(sealer)
        assert sealer.wait_until(lambda s: s.attempts >= 1, WAIT_SECONDS)  # its first look, at start
        return sealer

    yield start
    for sealer in started:
        sealer.stop()


def written_elsewhere():
    """An event committed as a process without a sealer commits it: no sealer in this process is told."""
    with transaction.atomic():
        event = events.record(AuditEvent.Action.RUN_STARTED, actor="other-console", payload={})
    return event


def chained(event):
    return AuditEvent.objects.get(pk=event.pk).position is not None


def test_an_event_another_process_committed_is_chained_by_the_poll(running):
    sealer = running(poll=0.05)
    sealing.stop_telling(sealer.wake)  # from here on, as another console's sealer: no commit here wakes it
    event = written_elsewhere()

    assert sealer.wait_until(lambda s: s.chained >= 1, WAIT_SECONDS)
    assert chained(event) and verify_chain().ok


# What a console started with CONSOLE_AUDIT_SEAL_SECONDS=off (or a shell) does: record one event and exit.
RECORD_ONE = (
    "from django.db import transaction; from approvals import events; from approvals.models import AuditEvent\n"
    "with transaction.atomic():\n"
    "    print(events.record(AuditEvent.Action.RUN_STARTED, actor='sealer-off', payload={}).pk)\n"
)


def test_an_event_a_process_without_a_sealer_committed_is_chained_by_this_ones_poll(running):
    if connection.vendor != "sqlite":
        pytest.skip("the other process opens the test database by its file")
    sealer = running(poll=0.05)
    env = console_env(connection.settings_dict["NAME"], CONSOLE_AUDIT_SEAL_SECONDS="off")
    pk = int(manage(env, "shell", "--no-imports", "-c", RECORD_ONE).strip())

    assert sealer.wait_until(lambda s: s.chained >= 1, WAIT_SECONDS)
    assert AuditEvent.objects.get(pk=pk).position == 1 and verify_chain().ok


def test_a_poll_that_finds_only_refused_events_leaves_them_and_says_nothing_again(running, caplog):
    event = written_elsewhere()
    with connection.cursor() as cursor:  # altered before it was chained: its own MAC fails
        cursor.execute(f"UPDATE {TABLE} SET actor = 'mallory' WHERE id = %s", [event.pk])
    with caplog.at_level("ERROR", logger="approvals.audit.sealer"):
        sealer = running(poll=0.01)
        assert sealer.wait_until(lambda s: s.attempts >= 20, WAIT_SECONDS)
    assert sealer.stuck == {event.pk} and not chained(event)
    said = [record for record in caplog.records if "does not match its own MAC" in record.getMessage()]
    assert len(said) == 1, said  # reported once, not at every poll
    assert not verify_chain().ok


def test_an_archived_event_put_back_is_left_and_said_once_while_the_others_are_chained(running, tmp_path, caplog):
    old = datetime(2026, 5, 1, tzinfo=UTC)
    AuditEvent.objects.create(action=AuditEvent.Action.RUN_STARTED, actor="alice", payload={}, created_at=old)
    AuditEvent.objects.seal_pending()
    columns = "action, actor, payload, created_at, tool, kind, key_version, nonce, mac, prev_hash, hash"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMPORARY TABLE kept AS SELECT {columns} FROM {TABLE}")
    archive_events(before=old + timedelta(days=1), actor="ops", out=tmp_path / "a.jsonl.gz")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE kept SET prev_hash = '', hash = ''")  # as a pending event has them
        cursor.execute(f"INSERT INTO {TABLE} ({columns}) SELECT {columns} FROM kept")
        cursor.execute("DROP TABLE kept")
    put_back = AuditEvent.objects.get(position__isnull=True)

    with caplog.at_level("ERROR", logger="approvals.models.audit"):
        sealer = running(poll=0.01)
        for n in range(3):  # commits of its own process wake it: each is chained, the row put back is not
            written_elsewhere()
            sealer.wake()
            assert sealer.wait_until(lambda s, n=n: s.chained >= n + 1, WAIT_SECONDS)
    assert AuditEvent.objects.get(pk=put_back.pk).position is None and sealer.stuck == {put_back.pk}
    said = [record for record in caplog.records if "not chained" in record.getMessage()]
    assert len(said) == 1 and f"id {put_back.pk} not chained" in said[0].getMessage(), said


def test_a_sealing_the_database_broke_off_is_retried_with_backoff_without_a_commit_or_a_poll(running):
    sealer = running(poll=3600.0)
    sealing.stop_telling(sealer.wake)
    event = written_elsewhere()
    with connection.cursor() as cursor:  # the database fails the sealer for real: its table is away
        cursor.execute(f"ALTER TABLE {TABLE} RENAME TO {TABLE}_away")
    try:
        sealer.wake()
        assert sealer.wait_until(lambda s: s.failures >= 1, WAIT_SECONDS)
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {TABLE}_away RENAME TO {TABLE}")

    assert sealer.wait_until(lambda s: s.chained >= 1, WAIT_SECONDS)  # no wake, an hour's poll: the retry did it
    assert chained(event) and verify_chain().ok


def test_the_poll_looks_the_events_not_chained_yet_up_in_the_index_of_positions():
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:  # a tiny table: make the planner show whether the index can serve
            cursor.execute("SET enable_seqscan = off")
        plan = sealers.waiting("default")[:1].explain()
        assert 'Index Cond: ("position" IS NULL)' in plan and "Seq Scan" not in plan, plan
    else:
        plan = sealers.waiting("default")[:1].explain()
        assert "USING COVERING INDEX sqlite_autoindex_approvals_auditevent" in plan and "(position=?)" in plan, plan
