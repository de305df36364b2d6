"""The idle connection that keeps SQLite's WAL between database calls (approvals/sqlite_wal.py)."""
import os
import sqlite3

import pytest
from django.db import connections

from approvals import runner, sqlite_wal


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


@pytest.mark.django_db(transaction=True)
async def test_the_supervisor_holds_the_consoles_own_database_file():
    await runner.ensure_started()
    assert connections["default"].settings_dict["NAME"] in sqlite_wal.held_files()
