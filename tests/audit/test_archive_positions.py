"""Retention after the one-statement append (issue 34): archive_audit takes chained events only, by their chain
position, its checkpoint and file speak of positions, and the sealers chain on from the newest checkpoint.

Runs on SQLite here, where a position is its event's id, and on PostgreSQL in
tests/cluster/test_modules_on_postgresql.py, where ids have gaps and are not the commit order."""

import gzip
import hashlib
import io
import json
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.db.models import F

from approvals.audit import archive
from approvals.audit.chain import verify_chain
from approvals.models import AuditCheckpoint, AuditEvent
from tests.support.other_connections import BLOCKED_SECONDS, in_another_connection, waiting_on_a_lock

pytestmark = pytest.mark.django_db(transaction=True, reset_sequences=True)

A = AuditEvent.Action
CUTOFF = datetime(2026, 6, 1, tzinfo=UTC)
OLD = CUTOFF - timedelta(days=30)
NEW = CUTOFF + timedelta(days=1)


def append(count, when=OLD):
    """``count`` events as the console writes them: committed, each with its own MAC, not chained yet."""
    return [
        AuditEvent.objects.create(action=A.RUN_STARTED, actor="alice", payload={"i": i}, created_at=when)
        for i in range(count)
    ]


def chain():
    """What a console's sealer does after a commit: chain every pending event; how many."""
    return AuditEvent.objects.seal_pending()


def trail():
    """(position, id, action) of every event left, in the chain's order, the unchained last."""
    ordered = AuditEvent.objects.order_by(F("position").asc(nulls_last=True), "id")
    return list(ordered.values_list("position", "id", "action"))


def lines_of(path):
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def verify_audit(*args):
    out = io.StringIO()
    call_command("verify_audit", *args, stdout=out)
    return out.getvalue()


def needs_postgresql():
    if connection.vendor != "postgresql":
        pytest.skip("ids are the commit order on SQLite, and a write there takes the whole database")


def test_only_chained_events_are_archived_and_those_waiting_are_chained_after_it(tmp_path):
    append(3)
    chain()
    waiting = append(2)  # old too, but committed after the last sealing: not in the chain yet
    done = archive.archive_events(before=CUTOFF, actor="ops", out=tmp_path / "a.jsonl.gz")

    assert (done.first, done.last) == (1, 3)
    assert [line["position"] for line in lines_of(tmp_path / "a.jsonl.gz")] == [1, 2, 3]
    # The waiting two are not archived: the archive chains them (and its audit.archived) before it commits,
    # after the chain's head, so none is left unchained with an older created_at than the events archived.
    assert [(position, pk) for position, pk, _ in trail()][:2] == [(4, waiting[0].pk), (5, waiting[1].pk)]
    assert trail()[2][0] == 6 and trail()[2][2] == A.AUDIT_ARCHIVED
    assert AuditEvent.objects.get(position=4).prev_hash == done.checkpoint.head_hash
    report = verify_chain()
    assert report.ok and (report.verified, report.unchained, report.archived_up_to) == (3, 0, 3), report
    assert chain() == 0
    assert verify_audit().splitlines()[0] == "3 events verified."


def test_the_sealer_chains_on_from_the_checkpoint_when_every_chained_event_was_archived(tmp_path):
    append(3)
    chain()
    first = archive.archive_events(before=NEW + timedelta(days=365), actor="ops", out=tmp_path / "1.jsonl.gz")
    assert (first.first, first.last) == (1, 3)
    assert chain() == 0  # audit.archived, the only event left, chained by the archive after its head, not from #1
    recorded = AuditEvent.objects.get()
    assert (recorded.action, recorded.position, recorded.prev_hash) == (A.AUDIT_ARCHIVED, 4, first.checkpoint.head_hash)
    report = verify_chain()
    assert report.ok and report.head == f"#4:{recorded.hash}", report

    second = archive.archive_events(before=NEW + timedelta(days=365), actor="ops", out=tmp_path / "2.jsonl.gz")
    assert (second.first, second.last) == (4, 4)
    assert chain() == 0 and AuditEvent.objects.get().position == 5
    assert verify_chain().ok
    out = verify_audit("--archive", str(tmp_path / "1.jsonl.gz"), "--archive", str(tmp_path / "2.jsonl.gz"))
    assert "#1–#3, against checkpoint #1" in out and "#4–#4, against checkpoint #2" in out


def test_a_file_archived_before_positions_verifies_by_its_ids(tmp_path):
    """An archive written before migration 0017 has no ``position``: its ids were the chain's order."""
    append(3)
    chain()
    append(1, NEW)
    chain()
    path = tmp_path / "a.jsonl.gz"
    archive.archive_events(before=CUTOFF, actor="ops", out=path)
    then = [{k: v for k, v in line.items() if k != "position"} for line in lines_of(path)]
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.writelines(json.dumps(line) + "\n" for line in then)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with connection.cursor() as cursor:  # as it was written then: the checkpoint holds that file's sha256
        cursor.execute(f"UPDATE {AuditCheckpoint._meta.db_table} SET archive_sha256 = %s", [digest])
    archive.reseal_checkpoints()

    assert "position" not in lines_of(path)[0]
    assert "3 events verified, #1–#3, against checkpoint #1" in verify_audit("--archive", str(path))
    assert verify_chain().ok


def test_archive_and_verify_speak_of_positions_where_ids_are_not_the_commit_order(tmp_path):
    needs_postgresql()
    append(2)
    with pytest.raises(RuntimeError), transaction.atomic():
        append(1)  # id 3, lost to the rollback
        raise RuntimeError("rolled back")
    inserted, commit = threading.Event(), threading.Event()

    def late_writer():
        with transaction.atomic():
            append(1)  # id 4: it commits after id 5
            inserted.set()
            assert commit.wait(BLOCKED_SECONDS)

    writer = in_another_connection(late_writer)
    writer.start()
    assert inserted.wait(BLOCKED_SECONDS)
    append(1)  # id 5
    chain()
    commit.set()
    writer.join(BLOCKED_SECONDS)
    chain()
    append(2, NEW)
    chain()
    assert [(position, pk) for position, pk, _ in trail()] == [(1, 1), (2, 2), (3, 5), (4, 4), (5, 6), (6, 7)]
    kept_head = (3, AuditEvent.objects.get(position=3).hash)  # a head verify_audit printed before the archive

    done = archive.archive_events(before=CUTOFF, actor="ops", out=tmp_path / "a.jsonl.gz")
    assert (done.first, done.last) == (1, 4)
    assert [(line["position"], line["id"]) for line in lines_of(tmp_path / "a.jsonl.gz")] == [
        (1, 1),
        (2, 2),
        (3, 5),
        (4, 4),
    ]
    checkpoint = AuditCheckpoint.objects.get()
    assert (checkpoint.first_event, checkpoint.last_event) == (1, 4)
    assert [(position, pk) for position, pk, _ in trail()][:2] == [(5, 6), (6, 7)]  # id 4 went, at position 4
    assert verify_chain().ok
    chain()
    report = verify_chain()
    assert report.ok and report.head.startswith("#7:") and report.archived_up_to == 4, report
    assert verify_chain(head=(4, checkpoint.head_hash)).ok  # the checkpoint's head, by position
    assert "was archived to a.jsonl.gz" in verify_chain(head=kept_head).problem
    out = verify_audit("--archive", str(tmp_path / "a.jsonl.gz"), "--head", f"#3:{kept_head[1]}")
    assert "4 events verified, #1–#4, against checkpoint #1" in out


def test_archiving_holds_the_sealers_lock_while_writers_go_on_appending(tmp_path):
    """On PostgreSQL the archive's transaction takes the sealers' advisory lock, not a table lock: an event
    written meanwhile commits at once, a sealer waits, then chains it after the checkpoint's head."""
    needs_postgresql()
    append(3)
    chain()
    seen = {}

    def meanwhile(step):
        if step != "recorded":  # inside the transaction, the lock held and the rows not deleted yet
            return
        writer = in_another_connection(lambda: append(1, NEW))
        writer.start()
        writer.join(BLOCKED_SECONDS)
        seen["writer blocked"] = writer.is_alive()
        sealer = in_another_connection(lambda: seen.setdefault("chained", chain()))
        sealer.start()
        with connection.cursor() as cursor:
            seen["sealer waited"] = waiting_on_a_lock(sealer, cursor)
        seen["sealer"] = sealer

    done = archive.archive_events(before=CUTOFF, actor="ops", out=tmp_path / "a.jsonl.gz", progress=meanwhile)
    seen["sealer"].join(BLOCKED_SECONDS)

    assert seen["writer blocked"] is False and seen["sealer waited"] is True
    assert seen["chained"] == 0  # the archive chained its own audit.archived event and the one written meanwhile
    assert (done.first, done.last) == (1, 3)
    chained = list(AuditEvent.objects.order_by("position").values_list("position", "action", "prev_hash"))
    assert [(position, action) for position, action, _ in chained] == [(4, A.AUDIT_ARCHIVED), (5, A.RUN_STARTED)]
    assert chained[0][2] == done.checkpoint.head_hash
    assert verify_chain().ok


# Every column but the id and the chain's: what someone with write access but no key can put back.
COPIED = (
    "action, actor, actor_user_id, run_id, request_id, payload, created_at, tool, kind, key_version, nonce, mac, "
    "prev_hash, hash"
)


def test_an_archived_event_put_back_is_never_chained_and_verify_finds_it(tmp_path, caplog):
    """Its nonce is unique only among the rows left and its MAC is genuine: its created_at gives it away."""
    append(3)
    chain()
    table = AuditEvent._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMPORARY TABLE kept AS SELECT * FROM {table} WHERE position = 2")
    archive.archive_events(before=CUTOFF, actor="ops", out=tmp_path / "a.jsonl.gz")
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} ({COPIED}) SELECT {COPIED} FROM kept")
        cursor.execute("DROP TABLE kept")
    put_back = AuditEvent.objects.get(position__isnull=True, action=A.RUN_STARTED)
    [genuine] = append(1, NEW)  # committed after the archive too, and chained as usual

    with caplog.at_level("ERROR", logger="approvals.models.audit"):
        chain()
    assert AuditEvent.objects.get(pk=put_back.pk).position is None
    assert AuditEvent.objects.get(pk=genuine.pk).position == 5  # after audit.archived at #4
    assert f"audit event(s) id {put_back.pk} not chained" in caplog.text
    report = verify_chain()
    assert not report.ok and report.event_id == put_back.pk, report
    assert report.problem.startswith(f"Event id {put_back.pk} (not chained yet) was created at 2026-05-02"), report
    assert "an archived event put back" in report.problem


def test_an_event_committed_after_an_archive_with_an_id_below_the_archived_ones_is_chained(tmp_path):
    """PostgreSQL: an event inserted before the archive and committed after it is genuine, id and all."""
    needs_postgresql()
    append(2)
    chain()
    inserted, commit = threading.Event(), threading.Event()

    def late_writer():
        with transaction.atomic():
            append(1, NEW)  # id 3: it commits after the archive took ids 4 and 5
            inserted.set()
            assert commit.wait(BLOCKED_SECONDS)

    writer = in_another_connection(late_writer)
    writer.start()
    assert inserted.wait(BLOCKED_SECONDS)
    append(2)  # ids 4, 5
    chain()
    done = archive.archive_events(before=CUTOFF, actor="ops", out=tmp_path / "a.jsonl.gz")
    assert (done.first, done.last) == (1, 4)
    commit.set()
    writer.join(BLOCKED_SECONDS)

    assert chain() == 1
    assert AuditEvent.objects.get(pk=3).position == 6  # after audit.archived at #5
    report = verify_chain()
    assert report.ok and report.unchained == 0, report


def test_archive_audit_says_which_old_events_it_left_because_they_are_not_chained_yet(tmp_path):
    append(2)  # no console ran since: nothing chained them
    out = io.StringIO()
    call_command("archive_audit", "--before", "2026-06-01", "--out", str(tmp_path / "a.jsonl.gz"), stdout=out)
    assert "Nothing to archive: no chained event left was created before 2026-06-01" in out.getvalue()
    assert "2 older events were left: not chained yet, so not archived." in out.getvalue()
    assert not (tmp_path / "a.jsonl.gz").exists()

    chain()
    out = io.StringIO()
    call_command("archive_audit", "--before", "2999-01-01", "--out", str(tmp_path / "a.jsonl.gz"), stdout=out)
    assert "Archived 2 events, #1–#2" in out.getvalue() and "not chained yet" not in out.getvalue()
