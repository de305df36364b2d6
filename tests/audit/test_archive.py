"""Retention: archive_audit moves the oldest events to a gzip JSON Lines file and leaves a sealed checkpoint;
verify_audit goes on verifying the trail from it, and verify_audit --archive verifies a file on its own."""

import gzip
import hashlib
import io
import json
import shutil
import sqlite3
import subprocess
from contextlib import closing
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client

from approvals.audit import archive
from approvals.audit.chain import verify_chain
from approvals.models import AuditCheckpoint, AuditEvent
from tests.support.live_console import REPO, console_env, manage, venv_bin

pytestmark = pytest.mark.django_db(transaction=True, reset_sequences=True)

A = AuditEvent.Action
CUTOFF = datetime(2026, 6, 1, tzinfo=UTC)
OLD = CUTOFF - timedelta(days=30)
NEW = CUTOFF + timedelta(days=1)


def add_events(count, when, **fields):
    """``count`` events, then chained with every event pending before them, as a console's sealer does."""
    added = [
        AuditEvent.objects.create(
            action=fields.get("action", A.RUN_STARTED),
            actor=fields.get("actor", "alice"),
            payload={"i": i, "note": "ünïcode ✓"},
            created_at=when + timedelta(seconds=i),
        )
        for i in range(count)
    ]
    AuditEvent.objects.seal_pending()
    return [AuditEvent.objects.get(pk=event.pk) for event in added]


def run(*args):
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def lines_of(path):
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def raw_sql(sql, params=()):
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def test_archiving_moves_the_old_events_to_a_file_and_the_trail_still_verifies(tmp_path, alice):
    add_events(5, OLD)
    add_events(3, NEW)
    out = run("archive_audit", "--before", "2026-06-01", "--out", str(tmp_path / "a.jsonl.gz"), "--actor", "ops")

    assert "Archived 5 events, #1–#5" in out
    archived = lines_of(tmp_path / "a.jsonl.gz")
    assert [(line["position"], line["id"]) for line in archived] == [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)]
    assert archived[0]["prev_hash"] == "" and archived[0]["payload"] == {"i": 0, "note": "ünïcode ✓"}
    assert list(AuditEvent.objects.values_list("id", flat=True)) == [6, 7, 8, 9]
    [checkpoint] = AuditCheckpoint.objects.all()
    assert (checkpoint.first_event, checkpoint.last_event, checkpoint.head_hash) == (1, 5, archived[-1]["hash"])
    digest = hashlib.sha256((tmp_path / "a.jsonl.gz").read_bytes()).hexdigest()
    recorded = AuditEvent.objects.get(action=A.AUDIT_ARCHIVED)
    assert recorded.actor == "ops"
    assert recorded.payload == {
        "first": 1,
        "last": 5,
        "events": 5,
        "file": "a.jsonl.gz",
        "sha256": digest,
        "checkpoint": checkpoint.pk,
    }
    report = verify_chain()
    assert report.ok, report.problem
    assert (report.verified, report.unchained, report.archived_up_to) == (4, 0, 5)
    # archive_audit chains its own audit.archived event before it commits: no sealer need be woken for it.
    assert "4 events verified." in run("verify_audit")
    client = Client()
    client.force_login(alice)
    page = client.get("/audit/", {"action": "audit.archived"}).content.decode()
    assert "events #1–#5 to a.jsonl.gz (sha256 " + digest[:12] in page
    assert "Events up to #5 were archived to files" in page
    assert "5 events verified, #1–#5, against checkpoint #1" in run(
        "verify_audit", "--archive", str(tmp_path / "a.jsonl.gz")
    )


def test_the_default_file_is_named_by_its_id_range_and_the_actor_is_the_os_user(settings, tmp_path):
    settings.BASE_DIR = tmp_path
    add_events(2, OLD)
    run("archive_audit", "--before", "2026-06-01T00:00:00Z")
    assert (tmp_path / "var" / "archive" / "audit-000000001-000000002.jsonl.gz").is_file()
    assert AuditEvent.objects.get(action=A.AUDIT_ARCHIVED).actor == archive.default_actor() != ""


def test_only_the_oldest_run_of_events_goes_so_the_trail_left_is_unbroken(tmp_path):
    add_events(2, OLD)
    add_events(1, NEW)
    add_events(2, OLD)  # written late with an old time: they stay, behind #3
    run("archive_audit", "--before", "2026-06-01", "--out", str(tmp_path / "a.jsonl.gz"))
    assert [line["id"] for line in lines_of(tmp_path / "a.jsonl.gz")] == [1, 2]
    assert verify_chain().ok


def test_nothing_to_archive_says_so_and_writes_nothing(tmp_path):
    add_events(2, NEW)
    out = run("archive_audit", "--before", "2026-06-01", "--out", str(tmp_path / "a.jsonl.gz"))
    assert "Nothing to archive" in out
    assert not (tmp_path / "a.jsonl.gz").exists() and AuditCheckpoint.objects.count() == 0


def test_an_existing_file_is_never_overwritten_and_nothing_is_deleted(tmp_path):
    add_events(3, OLD)
    (tmp_path / "a.jsonl.gz").write_bytes(b"precious")
    with pytest.raises(CommandError, match="refusing to overwrite"):
        run("archive_audit", "--before", "2026-06-01", "--out", str(tmp_path / "a.jsonl.gz"))
    assert (tmp_path / "a.jsonl.gz").read_bytes() == b"precious"
    assert AuditEvent.objects.count() == 3 and AuditCheckpoint.objects.count() == 0
    assert list(tmp_path.iterdir()) == [tmp_path / "a.jsonl.gz"]  # the temporary file went too
    with pytest.raises(CommandError, match="is a directory; --out takes a file name"):
        run("archive_audit", "--before", "2026-06-01", "--out", str(tmp_path))


def test_a_second_archive_follows_the_first_and_each_file_verifies(tmp_path):
    add_events(3, OLD)
    run("archive_audit", "--before", "2026-06-01", "--out", str(tmp_path / "1.jsonl.gz"))
    add_events(2, NEW)  # #5, #6 after the archiving event #4
    run("archive_audit", "--before", "2999-01-01", "--out", str(tmp_path / "2.jsonl.gz"))  # everything

    assert [line["id"] for line in lines_of(tmp_path / "2.jsonl.gz")] == [4, 5, 6]
    assert [line["action"] for line in lines_of(tmp_path / "2.jsonl.gz")][0] == A.AUDIT_ARCHIVED
    assert list(AuditEvent.objects.values_list("id", "action")) == [(7, A.AUDIT_ARCHIVED)]
    assert lines_of(tmp_path / "2.jsonl.gz")[0]["prev_hash"] == lines_of(tmp_path / "1.jsonl.gz")[-1]["hash"]
    assert verify_chain().ok
    out = run("verify_audit", "--archive", str(tmp_path / "1.jsonl.gz"), "--archive", str(tmp_path / "2.jsonl.gz"))
    assert "against checkpoint #1" in out and "against checkpoint #2" in out


def test_verify_still_finds_an_edit_a_gap_and_a_deleted_checkpoint(tmp_path):
    add_events(3, OLD)
    add_events(3, NEW)
    run("archive_audit", "--before", "2026-06-01", "--out", str(tmp_path / "a.jsonl.gz"))
    table = AuditEvent._meta.db_table

    raw_sql(f"UPDATE {table} SET actor = 'mallory' WHERE id = 5")
    assert verify_chain().problem.startswith("Event #5 was altered")
    raw_sql(f"UPDATE {table} SET actor = 'alice' WHERE id = 5")
    assert verify_chain().ok

    raw_sql(f"DELETE FROM {table} WHERE id = 4")  # the first event after the checkpoint
    assert verify_chain().problem.startswith("Event #4 is missing")


def test_verify_finds_a_deleted_or_edited_checkpoint(tmp_path):
    add_events(3, OLD)
    add_events(1, NEW)
    run("archive_audit", "--before", "2026-06-01", "--out", str(tmp_path / "a.jsonl.gz"))
    table = AuditCheckpoint._meta.db_table

    raw_sql(f"UPDATE {table} SET archived_by = 'someone else'")
    assert "Checkpoint #1 (events #1–#3) was altered" in verify_chain().problem
    with pytest.raises(CommandError, match="altered"):
        run("verify_audit")

    raw_sql(f"DELETE FROM {table}")
    problem = verify_chain().problem
    assert "Checkpoint #1 is missing" in problem
    raw_sql("DELETE FROM sqlite_sequence WHERE name = %s", [table])  # a careful intruder hides the id too
    assert "no checkpoint says they were archived" in verify_chain().problem


def test_verify_archive_finds_an_edited_or_cut_file_and_a_foreign_one(tmp_path):
    add_events(4, OLD)
    add_events(1, NEW)
    path = tmp_path / "a.jsonl.gz"
    run("archive_audit", "--before", "2026-06-01", "--out", str(path))
    original = lines_of(path)

    def rewrite(lines):
        edited = tmp_path / "edited.jsonl.gz"
        with gzip.open(edited, "wt", encoding="utf-8") as handle:
            handle.writelines(json.dumps(line) + "\n" for line in lines)
        return archive.verify_archive(edited)

    changed = [dict(line) for line in original]
    changed[2]["actor"] = "mallory"
    assert rewrite(changed).problem == "Event #3 was altered: its contents no longer match its hash."
    assert "not consecutive" in rewrite(original[:1] + original[2:]).problem
    assert "ends at #3" in rewrite(original[:3]).problem  # cut short: still a valid chain, not the checkpoint's head
    assert "sha256 is not the one checkpoint #1 recorded" in rewrite(original).problem  # re-packed: other bytes
    (tmp_path / "cut.jsonl.gz").write_bytes(path.read_bytes()[:-20])
    assert "cannot be read to its end" in archive.verify_archive(tmp_path / "cut.jsonl.gz").problem
    assert archive.verify_archive(path).ok

    raw_sql(f"DELETE FROM {AuditCheckpoint._meta.db_table}")
    with pytest.raises(CommandError, match="No checkpoint in the database starts at event #1"):
        run("verify_audit", "--archive", str(path))


def test_reseal_after_a_key_rotation_keeps_the_trail_linked_to_its_checkpoint(settings, tmp_path):
    add_events(3, OLD)
    add_events(2, NEW)
    run("archive_audit", "--before", "2026-06-01", "--out", str(tmp_path / "a.jsonl.gz"))
    settings.CONSOLE_AUDIT_KEYS = {**settings.CONSOLE_AUDIT_KEYS, 9: b"k" * 40}
    run("reseal_audit")
    assert AuditCheckpoint.objects.get().key_version == 9
    assert verify_chain().ok
    assert archive.verify_archive(tmp_path / "a.jsonl.gz").ok  # its events keep their own key versions


def test_a_reseal_between_writing_the_file_and_deleting_the_rows_archives_nothing(settings, tmp_path):
    add_events(3, OLD)
    add_events(2, NEW)

    def reseal_meanwhile(step):
        if step == "linked":  # a key rotation's reseal_audit, run by someone else while this archive runs
            settings.CONSOLE_AUDIT_KEYS = {**settings.CONSOLE_AUDIT_KEYS, 9: b"k" * 40}
            run("reseal_audit")

    with pytest.raises(archive.ArchiveError, match="changed after the file was written"):
        archive.archive_events(before=CUTOFF, actor="cron", out=tmp_path / "a.jsonl.gz", progress=reseal_meanwhile)

    assert AuditEvent.objects.count() == 5 and not AuditCheckpoint.objects.exists()
    assert verify_chain().ok


def test_a_head_kept_before_its_event_was_archived_is_checked_never_skipped(tmp_path):
    events = add_events(3, OLD)
    add_events(2, NEW)
    inside, boundary = (2, events[1].hash), (3, events[2].hash)
    run("archive_audit", "--before", "2026-06-01", "--out", str(tmp_path / "a.jsonl.gz"))

    assert verify_chain(head=boundary).ok  # the checkpoint holds the head it ends at
    assert "rewritten" in verify_chain(head=(3, "0" * 64)).problem
    report = verify_chain(head=inside)  # only the file can say: the trail alone fails, naming it
    assert not report.ok and "was archived to a.jsonl.gz" in report.problem
    assert "3 events verified, #1–#3" in run(
        "verify_audit", "--archive", str(tmp_path / "a.jsonl.gz"), "--head", f"#2:{inside[1]}"
    )
    with pytest.raises(CommandError, match="its hash changed"):
        run("verify_audit", "--archive", str(tmp_path / "a.jsonl.gz"), "--head", f"#2:{'0' * 64}")


# -- dying half way: a real process killed at each step ------------------------------------------

DIE_AT = """
import os
from datetime import datetime, UTC
from pathlib import Path
from approvals.audit.archive import archive_events

def die(step):
    if step == os.environ["DIE_AT"]:
        os._exit(9)

archive_events(before=datetime(2026, 6, 1, tzinfo=UTC), actor="cron", out=Path(os.environ["OUT"]), progress=die)
"""

MAKE_EVENTS = """
from datetime import datetime, timedelta, UTC
from approvals.models import AuditEvent
for i in range(6):
    AuditEvent.objects.create(action="run.started", actor="alice", created_at=datetime(2026, 5, 1, tzinfo=UTC) + timedelta(minutes=i))
AuditEvent.objects.create(action="run.started", actor="alice", created_at=datetime(2026, 7, 1, tzinfo=UTC))
AuditEvent.objects.seal_pending()  # as a console's sealer would
"""


@pytest.fixture(scope="module")
def seven_events(tmp_path_factory):
    """A migrated database file with six events from May 2026 and one from July, copied by each test."""
    path = tmp_path_factory.mktemp("template") / "db.sqlite3"
    env = console_env(path)
    manage(env, "migrate", "--noinput")
    manage(env, "shell", "-c", MAKE_EVENTS, "--no-imports")
    with closing(sqlite3.connect(path)) as database:
        database.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the one file copied
    return path


@pytest.mark.parametrize("step", ["written", "linked", "recorded", "deleted"])
def test_a_process_killed_half_way_loses_nothing_and_a_rerun_finishes(tmp_path, step, seven_events):
    shutil.copyfile(seven_events, tmp_path / "db.sqlite3")
    env = console_env(tmp_path / "db.sqlite3", OUT=str(tmp_path / "a.jsonl.gz"), DIE_AT=step)
    died = subprocess.run(
        [venv_bin("python"), "manage.py", "shell", "-c", DIE_AT, "--no-imports"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert died.returncode == 9, died.stderr

    # Whatever it left, all seven events are in the database (none was deleted) and the trail verifies.
    leftovers = list(tmp_path.glob(".a.jsonl.gz.*.tmp"))
    assert len(leftovers) == (1 if step == "written" else 0)  # the one thing to clean up by hand
    assert "7 events verified." in manage(env, "verify_audit")
    rerun = manage(env, "archive_audit", "--before", "2026-06-01", "--out", str(tmp_path / "a.jsonl.gz"))
    assert "Archived 6 events, #1–#6" in rerun
    assert ("the file an interrupted run had left" in rerun) == (step != "written")
    assert "2 events verified." in manage(env, "verify_audit")  # audit.archived, chained by the archive
    assert "6 events verified" in manage(env, "verify_audit", "--archive", str(tmp_path / "a.jsonl.gz"))
