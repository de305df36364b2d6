"""The idle connection that keeps SQLite's WAL between database calls (approvals/hotpath/sqlite_wal.py)."""

import gc
import os
import shutil
import sqlite3

import pytest
from django.db import connections

from approvals import startup
from approvals.hotpath import sqlite_wal
from approvals.runs import runner

pytestmark = pytest.mark.django_db(transaction=True)


def write_and_close(path):
    """What a short-lived connection does (every database call, under CONN_MAX_AGE = 0): connect, write, close."""
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("CREATE TABLE IF NOT EXISTS t (x)")
    connection.execute("INSERT INTO t VALUES (1)")
    connection.commit()
    connection.close()


def test_the_last_connection_closing_checkpoints_and_deletes_the_wal(tmp_path):
    # The cost the module avoids: without another connection, close() folds the WAL back in.
    path = str(tmp_path / "alone.sqlite3")
    write_and_close(path)
    assert not os.path.exists(path + "-wal")


def test_with_an_idle_connection_held_a_close_leaves_the_wal(tmp_path, settings):
    path = str(tmp_path / "held.sqlite3")
    write_and_close(path)
    connections["default"].settings_dict["NAME"], name = path, connections["default"].settings_dict["NAME"]
    try:
        assert sqlite_wal.hold_wal_open() == path
        assert sqlite_wal.hold_wal_open() == path  # once per file
        for _ in range(3):
            write_and_close(path)
            assert os.path.exists(path + "-wal")
        reader = sqlite3.connect(path)
        assert reader.execute("SELECT count(*) FROM t").fetchone() == (4,)  # nothing held back from readers
        reader.execute("INSERT INTO t VALUES (2)")  # and the idle connection holds no lock
        reader.commit()
        reader.close()
    finally:
        connections["default"].settings_dict["NAME"] = name
        sqlite_wal.release(path)


def rows_in_database_file_alone(path, copy):
    """The rows of ``t`` in the database file itself: a copy made without its WAL sees only what was checkpointed."""
    shutil.copyfile(path, copy)
    reader = sqlite3.connect(copy)
    try:
        return reader.execute("SELECT count(*) FROM t").fetchone()[0]
    finally:
        reader.close()


def test_the_held_connection_checkpoints_from_its_own_thread_so_no_commit_has_to(tmp_path):
    path = str(tmp_path / "checkpointed.sqlite3")
    write_and_close(path)  # creates the table; the file is checkpointed as this connection closes
    connections["default"].settings_dict["NAME"], name = path, connections["default"].settings_dict["NAME"]
    writer = sqlite3.connect(path)
    try:
        sqlite_wal.hold_wal_open()
        held = sqlite_wal.held_file(path)
        for _ in range(5):  # a few pages: far below the 1,000 at which a commit would checkpoint
            writer.execute("INSERT INTO t VALUES (2)")
            writer.commit()
        assert rows_in_database_file_alone(path, str(tmp_path / "before.sqlite3")) == 1  # all still in the WAL
        # Two turns: the first may have begun before the inserts.
        assert held.wait_for_checkpoints(2, timeout=30)
        assert rows_in_database_file_alone(path, str(tmp_path / "after.sqlite3")) == 6
        assert writer.execute("SELECT count(*) FROM t").fetchone()[0] == 6
    finally:
        writer.close()
        connections["default"].settings_dict["NAME"] = name
        assert sqlite_wal.release(path)
    assert not held.thread.is_alive()
    assert not sqlite_wal.release(path)  # once


def test_start_up_objects_are_frozen_out_of_the_collectors_walks():
    long_lived = [["built at start-up"]]
    before = gc.get_freeze_count()
    try:
        frozen = startup.freeze_start_up_objects()
        assert frozen > before  # (the count falls as frozen objects are freed: other threads run)
        assert not any(tracked is long_lived for tracked in gc.get_objects())  # no collection walks it
        made_later = [["built by a request"]]
        assert any(tracked is made_later for tracked in gc.get_objects())
    finally:
        gc.unfreeze()


async def test_the_supervisor_holds_the_consoles_own_database_file():
    await runner.ensure_started()
    assert connections["default"].settings_dict["NAME"] in sqlite_wal.held_files()


def commit_pages(path, init_command, pages):
    """One transaction of about ``pages`` WAL pages, on a connection set up with ``init_command``."""
    connection = sqlite3.connect(path)
    connection.executescript(init_command)
    connection.execute("CREATE TABLE IF NOT EXISTS t (x)")
    connection.commit()
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()  # the empty table is in the file itself
    holder = sqlite3.connect(path)  # keeps the WAL as the writer closes (what the held connection does)
    holder.execute("SELECT count(*) FROM sqlite_master").fetchall()
    try:
        connection.executemany("INSERT INTO t VALUES (?)", [(b"\0" * 3000,) for _ in range(pages)])
        connection.commit()
    finally:
        connection.close()
    return holder


def test_a_commit_past_a_thousand_pages_leaves_the_checkpoint_to_the_thread(tmp_path, settings):
    init_command = settings.DATABASES["default"]["OPTIONS"]["init_command"]
    assert f"wal_autocheckpoint={settings.SQLITE_WAL_CEILING_PAGES}" in init_command
    # SQLite's default: the commit that takes the WAL past 1,000 pages checkpoints it itself.
    default = str(tmp_path / "default.sqlite3")
    holder = commit_pages(default, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", 1200)
    assert rows_in_database_file_alone(default, str(tmp_path / "default-copy.sqlite3")) == 1200
    holder.close()
    # The console's connections leave it in the WAL for sqlite_wal's thread.
    console = str(tmp_path / "console.sqlite3")
    holder = commit_pages(console, init_command, 1200)
    assert rows_in_database_file_alone(console, str(tmp_path / "console-copy.sqlite3")) == 0
    assert holder.execute("SELECT count(*) FROM t").fetchone()[0] == 1200
    holder.close()
