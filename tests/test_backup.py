"""Backup and restore: backup_console copies a running console's SQLite database with the online backup API,
restore_console brings it back as a new database, and the restored console carries on: its audit trail
verifies (archived range included), its runs are there and a waiting run can still be answered. On
PostgreSQL backup_console points at pg_dump, and the documented pg_dump/pg_restore recipe is run here too."""

import re
import shutil
import sqlite3
import subprocess
import sys
import threading
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from approvals.backup import backup_database
from approvals.models import AuditEvent
from tests.support.live_console import (
    CREATE_USERS,
    REPO,
    LiveConsole,
    console_env,
    manage,
    open_requests_of,
    poll,
    running_daphne,
    start,
    venv_bin,
)
from tests.support.services import PostgresServer, postgres_bin

# reset_sequences: a copy of the test database is verified, so no id may be issued before this test (a test
# before it leaves sqlite_sequence behind, which verify_audit reads as deleted events).
PG_RECIPE_MARKER = "<!-- recipe: run by tests/test_backup.py, against a PostgreSQL 15 of its own -->"
VENV_BIN = str(Path(sys.executable).parent) + "/"

pytestmark = pytest.mark.django_db(transaction=True, reset_sequences=True)


def manage_result(env, *args):
    """``manage.py`` as a process: (returncode, stdout, stderr), for the commands that must fail."""
    done = subprocess.run(
        [venv_bin("python"), "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    return done.returncode, done.stdout, done.stderr


def count_rows(path, table):
    with closing(sqlite3.connect(path)) as database:
        return database.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]


# -- the command in this process ------------------------------------------------------------------


def test_a_backup_taken_while_events_are_written_is_whole_and_verifies(tmp_path):
    """A writer thread appends events the whole time; every copy is one consistent moment of the trail."""
    stop, written = threading.Event(), []

    def write():
        try:
            while not stop.is_set():
                written.append(AuditEvent.objects.create(action=AuditEvent.Action.RUN_STARTED, actor="writer").pk)
                if len(written) % 10 == 0:  # chained in batches, as a console's sealer does
                    AuditEvent.objects.seal_pending()
        finally:
            connection.close()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        copies = []
        for number in range(3):
            while len(written) < 50 * (number + 1):  # let the writer get ahead between copies
                stop.wait(0.01)
            copies.append(backup_database(out=tmp_path / f"copy-{number}.sqlite3"))
    finally:
        stop.set()
        writer.join()

    counts = [copy.counts["audit events"] for copy in copies]
    assert counts == sorted(counts) and counts[0] >= 50 and counts[-1] < len(written) + 1
    for copy in copies:
        assert not (tmp_path / f"{copy.path.name}-wal").exists()  # a self-contained file
        env = console_env(copy.path)
        # Each copy holds its events chained up to a batch, and the rest each under its own MAC.
        assert f"{copy.counts['audit events']} events verified" in manage(env, "verify_audit")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy-0.sqlite3", "copy-1.sqlite3", "copy-2.sqlite3"]


def test_a_backup_never_overwrites_a_file(tmp_path):
    (tmp_path / "b.sqlite3").write_bytes(b"yesterday's backup")
    with pytest.raises(CommandError, match="exists: refusing to overwrite it"):
        call_command("backup_console", "--out", str(tmp_path / "b.sqlite3"))
    assert (tmp_path / "b.sqlite3").read_bytes() == b"yesterday's backup"


def test_restore_refuses_an_existing_database_and_a_file_that_is_not_a_backup(tmp_path):
    (tmp_path / "live.sqlite3").write_bytes(b"x" * 10)
    (tmp_path / "junk").write_bytes(b"not a database at all, not even close" * 200)
    env = console_env(tmp_path / "live.sqlite3")
    code, _, err = manage_result(env, "restore_console", "--from", str(tmp_path / "junk"))
    assert code == 1 and "live.sqlite3 exists: refusing to overwrite it" in err
    code, _, err = manage_result(
        console_env(tmp_path / "new.sqlite3"), "restore_console", "--from", str(tmp_path / "junk")
    )
    assert code == 1 and "is not an SQLite database" in err
    assert not (tmp_path / "new.sqlite3").exists()


def test_restore_refuses_to_appear_beside_the_old_databases_wal_which_sqlite_would_replay_over_it(tmp_path):
    backup = tmp_path / "backup.sqlite3"
    with closing(sqlite3.connect(backup)) as database:
        database.execute("CREATE TABLE kept (name TEXT)")
        database.execute("INSERT INTO kept VALUES ('from the backup')")
        database.commit()
    live = tmp_path / "live.sqlite3"
    old = sqlite3.connect(live)
    old.execute("PRAGMA journal_mode=WAL")
    old.execute("PRAGMA wal_autocheckpoint=0")  # the old rows stay in the -wal, as a crashed console leaves them
    old.execute("CREATE TABLE kept (name TEXT)")
    old.execute("INSERT INTO kept VALUES ('stale')")
    old.commit()
    shutil.copy(live.with_name("live.sqlite3-wal"), tmp_path / "wal")  # the -wal as the dead console left it
    old.close()
    live.unlink()  # the operator removes the broken database, not its -wal
    shutil.copy(tmp_path / "wal", live.with_name("live.sqlite3-wal"))

    code, _, err = manage_result(console_env(live), "restore_console", "--from", str(backup))

    assert code == 1 and "live.sqlite3-wal belong to the database that was at" in err, err
    assert not live.exists()


# -- PostgreSQL: pg_dump, documented and tried --------------------------------------------------------


def test_on_postgresql_backup_console_points_at_pg_dump(tmp_path):
    env = console_env(tmp_path / "unused.sqlite3", DATABASE_URL="postgresql://console@127.0.0.1:9/nowhere")
    code, _, err = manage_result(env, "backup_console", "--out", str(tmp_path / "b"))
    assert code == 1
    assert "back it up with pg_dump and restore with pg_restore" in err and "docs/operations.md" in err
    assert not (tmp_path / "b").exists()


@pytest.fixture(scope="module")
def postgres():
    server = PostgresServer().start()
    yield server
    server.close()


MAKE_HISTORY = """
from datetime import datetime, timedelta, UTC
from approvals.models import AuditEvent, Run, RunStatus
run = Run.objects.create(tool="deploy", status=RunStatus.SUCCEEDED)
for i in range(5):
    AuditEvent.objects.create(action="run.started", actor="alice", run=run, created_at=datetime(2026, 5, 1, tzinfo=UTC) + timedelta(minutes=i))
AuditEvent.objects.create(action="run.finished", actor="alice", run=run)
AuditEvent.objects.seal_pending()  # as a console's sealer would
"""


def pg_recipe():
    """The PostgreSQL block of docs/operations.md, "Backup and restore", as written."""
    page = (REPO / "docs" / "operations.md").read_text()
    block = re.match(r"\s*```sh\n(.*?)\n```", page.split(PG_RECIPE_MARKER, 1)[1], re.S)
    assert page.count(PG_RECIPE_MARKER) == 1 and block, "the pg_dump recipe lost its marker"
    return block.group(1)


def test_the_documented_pg_dump_recipe_restores_a_console_that_verifies(postgres, tmp_path):
    """docs/operations.md, "Backup and restore": its pg_dump/pg_restore block, run as written."""
    postgres.psql('CREATE DATABASE "before"')
    source = f"postgresql://{postgres.user}@127.0.0.1:{postgres.port}/before"
    env = console_env(tmp_path / "unused.sqlite3", DATABASE_URL=source)
    manage(env, "migrate", "--noinput")
    manage(env, "shell", "-c", MAKE_HISTORY, "--no-imports")
    archived = manage(env, "archive_audit", "--before", "2026-06-01", "--out", str(tmp_path / "a.jsonl.gz"))
    assert "Archived 5 events, #1–#5" in archived

    (tmp_path / "manage.py").symlink_to(REPO / "manage.py")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", pg_recipe().replace(".venv/bin/", VENV_BIN)],
        cwd=tmp_path,
        env={**env, "PATH": f"{Path(postgres_bin('pg_dump')).parent}:{env['PATH']}", "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "2 events verified." in done.stdout  # audit.archived too: the archive chained it

    restored = console_env(tmp_path / "unused.sqlite3", DATABASE_URL=source.rpartition("/")[0] + "/console_restored")
    assert "No migrations to apply." in manage(restored, "migrate", "--noinput")
    assert "5 events verified, #1–#5, against checkpoint #1" in manage(
        restored, "verify_audit", "--archive", str(tmp_path / "a.jsonl.gz")
    )
    # Sequences came along: the restored console appends after the newest event, not over it.
    manage(
        restored,
        "shell",
        "-c",
        "from approvals.models import AuditEvent; AuditEvent.objects.create(action='run.started', actor='bob')",
    )
    assert "3 events verified." in manage(restored, "verify_audit", "--seal")


# -- end to end: a running console backed up, restored, and carrying on -------------------------------


def test_a_console_backed_up_while_it_runs_restores_and_its_waiting_run_finishes(tmp_path):
    db_path = tmp_path / "console.sqlite3"
    env = console_env(db_path)
    manage(env, "migrate", "--noinput")
    manage(env, "shell", "-c", CREATE_USERS, "--no-imports")
    tokens = {
        name: manage(env, "issue_token", name, "--name", "backup-tests").strip() for name in ("reviewer", "host-svc")
    }

    def console_on(port, env, log):
        return LiveConsole(f"http://127.0.0.1:{port}", port, env["CONSOLE_SQLITE_PATH"], log, env, tokens)

    with running_daphne(env, tmp_path / "before.log") as port:
        before = console_on(port, env, tmp_path / "before.log")
        finished = start(before, {"tool": "deploy", "args": {"service": "api"}})
        [request] = poll(before, "/api/v1/requests?status=open", lambda b: b["requests"], what="the deploy request")[
            "requests"
        ]
        assert (
            before.call("POST", f"/api/v1/requests/{request['id']}/answer", {"ok": True, "data": {"env": "staging"}})[0]
            == 200
        )
        poll(before, f"/api/v1/runs/{finished}", lambda r: r["status"] == "succeeded", what="the first deploy")
        cut = datetime.now(UTC)  # every event of the first run is older, every one after is not

        waiting = start(before, {"tool": "deploy", "args": {"service": "db"}})
        poll(before, f"/api/v1/runs/{waiting}", lambda r: r["status"] == "waiting", what="the second deploy waiting")

        # Runs start and finish the whole time the archive and the backup are taken: the console writes on.
        stop, busy = threading.Event(), []

        def keep_writing():
            while not stop.is_set():
                busy.append(start(before, {"tool": "crunch", "args": {"steps": 2, "pause": 0}}))

        writer = threading.Thread(target=keep_writing)
        writer.start()
        try:
            while len(busy) < 5:
                stop.wait(0.01)
            archived = manage(env, "archive_audit", "--before", cut.isoformat(), "--out", str(tmp_path / "a.jsonl.gz"))
            assert "Archived" in archived
            backed_up = manage(env, "backup_console", "--out", str(tmp_path / "backup.sqlite3"))
            while len(busy) < 15:  # and after it
                stop.wait(0.01)
        finally:
            stop.set()
            writer.join()
        assert "Backed up to" in backed_up
    # daphne got SIGTERM: the backup is all the new console will have.

    restored_env = console_env(tmp_path / "restored.sqlite3")
    restored = manage(restored_env, "restore_console", "--from", str(tmp_path / "backup.sqlite3"))
    assert "events verified" in restored
    manage(restored_env, "migrate", "--noinput")
    assert "Events up to" in manage(restored_env, "verify_audit")
    assert "against checkpoint #1" in manage(restored_env, "verify_audit", "--archive", str(tmp_path / "a.jsonl.gz"))
    kept_busy = count_rows(tmp_path / "restored.sqlite3", "approvals_run") - 2
    assert 5 <= kept_busy < len(busy)  # the runs started before the snapshot, not those after

    with running_daphne(restored_env, tmp_path / "after.log") as port:
        after = console_on(port, restored_env, tmp_path / "after.log")
        assert after.call("GET", f"/api/v1/runs/{finished}")[1]["status"] == "succeeded"
        assert after.call("GET", f"/api/v1/runs/{waiting}")[1]["status"] == "waiting"
        [still_open] = open_requests_of(after, waiting)
        status, answer = after.call(
            "POST", f"/api/v1/requests/{still_open['id']}/answer", {"ok": True, "data": {"env": "production"}}
        )
        assert status == 200, answer
        done = poll(after, f"/api/v1/runs/{waiting}", lambda r: r["status"] == "succeeded", what="the restored run")
        assert done["result"] == {"output": "deployed to production", "is_error": False}
    assert "events verified." in manage(restored_env, "verify_audit")
