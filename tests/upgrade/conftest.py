"""Fixtures for the upgrade tests: each snapshot in fixtures/, upgraded by today's code, on SQLite and PostgreSQL.

A snapshot is a SQLite file an old commit's console made (tests/upgrade/build_fixture.py). On
SQLite it is copied and migrated as it is. For PostgreSQL its rows are moved to a PostgreSQL
database that today's ``manage.py migrate`` brought to the snapshot's own migration state (the
migrations up to there are the same files the old commit ran; every table's columns are checked to
match), and then the same ``migrate`` carries it to the head: the new migrations run on PostgreSQL
over the old rows.
"""

import json
import shutil
import sqlite3
from pathlib import Path

import psycopg
import pytest

from tests.support.live_console import ClientAt, LiveConsole, console_env, manage, running_daphne
from tests.support.services import PostgresServer

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SNAPSHOTS = sorted(path.stem for path in FIXTURES.glob("*.json"))
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
BACKENDS = ("sqlite", "postgresql")


class Upgraded:
    """One snapshot on one backend, migrated by today's code; ``serve()`` starts today's console on it."""

    def __init__(self, snapshot, backend, workdir, postgres=None):
        self.snapshot, self.backend = snapshot, backend
        self.manifest = json.loads((FIXTURES / f"{snapshot}.json").read_text())
        self.db_path = Path(workdir) / "upgraded.sqlite3"
        shutil.copy(FIXTURES / f"{snapshot}.sqlite3", self.db_path)
        extra = {}
        if backend == "postgresql":
            name = f"upgrade_{snapshot}"
            postgres.psql(f'CREATE DATABASE "{name}"')
            extra["DATABASE_URL"] = f"postgresql://{postgres.user}@127.0.0.1:{postgres.port}/{name}"
        self.env = console_env(self.db_path, **extra)
        # The settings the snapshot was made under (unset: the development defaults), one process, no Redis.
        for setting, value in self.manifest["settings"].items():
            if setting.isupper():
                if value is None:
                    self.env.pop(setting, None)
                else:
                    self.env[setting] = value
        self.env.pop("REDIS_URL", None)
        if backend == "postgresql":
            self._move_rows_to_postgres(extra["DATABASE_URL"])
        self.migrate_output = manage(self.env, "migrate", "--noinput")
        try:  # checked by its own test, before the console writes anything
            self.verified_after_migrate = manage(self.env, "verify_audit", "--head", self.manifest["audit"]["head"])
        except RuntimeError as failure:
            self.verified_after_migrate = str(failure)
        ARTIFACTS.mkdir(exist_ok=True)
        self.log_path = ARTIFACTS / f"upgrade-{snapshot}-{backend}-daphne.log"

    def _move_rows_to_postgres(self, url):
        source = sqlite3.connect(self.db_path)
        applied = source.execute("SELECT app, name FROM django_migrations ORDER BY id").fetchall()
        last = {app: name for app, name in applied}  # each app's latest, in the order the apps first appear
        # `migrate <app> <name>` for each app, in one process (a manage.py start is seconds on a busy machine).
        steps = "".join(
            f"call_command('migrate', {app!r}, {name!r}, interactive=False)\n" for app, name in last.items()
        )
        manage(self.env, "shell", "--no-imports", "-c", "from django.core.management import call_command\n" + steps)
        tables = [
            name
            for (name,) in source.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                "AND name != 'django_migrations' ORDER BY name"
            )
        ]
        with psycopg.connect(url) as target:
            there = set(target.execute("SELECT app, name FROM django_migrations").fetchall())
            assert there == set(applied), "PostgreSQL is not at the snapshot's migration state"
            target.execute("SET TIME ZONE 'UTC'")  # Django keeps SQLite's datetimes as UTC without a zone
            target.execute("SET session_replication_role = replica")  # foreign keys checked by the old database
            # What migrate's post_migrate handlers created (content types, permissions) gives way to the old rows.
            target.execute("TRUNCATE " + ", ".join(f'"{table}"' for table in tables) + " CASCADE")
            for table in tables:
                _copy_table(source, target, table)
        source.close()

    def serve(self):
        return running_daphne(self.env, self.log_path)

    def console(self, port):
        return LiveConsole(
            base_url=f"http://127.0.0.1:{port}",
            port=port,
            db_path=self.db_path,
            log_path=self.log_path,
            env=self.env,
            tokens={name: user["token"] for name, user in self.manifest["users"].items()},
        )

    def reviewer_browser(self, console):
        browser = ClientAt(console, "127.0.0.1")
        status, _, _ = browser.log_in("reviewer", self.manifest["users"]["reviewer"]["password"])
        assert status == 302, "the reviewer's password from the old database no longer logs in"
        return browser


def _copy_table(source, target, table):
    """Every row of ``table``, each value cast by PostgreSQL to its column's type (0/1 to boolean, text to jsonb)."""
    types = dict(
        target.execute(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
            (f'"{table}"',),
        ).fetchall()
    )
    cursor = source.execute(f'SELECT * FROM "{table}"')
    columns = [description[0] for description in cursor.description]
    assert set(columns) == set(types), f"{table}: SQLite has {sorted(columns)}, PostgreSQL {sorted(types)}"
    rows = [[None if value is None else str(value) for value in row] for row in cursor]
    if not rows:
        return
    names = ", ".join(f'"{column}"' for column in columns)
    values = ", ".join(f"%s::{types[column]}" for column in columns)
    with target.cursor() as insert:
        insert.executemany(f'INSERT INTO "{table}" ({names}) VALUES ({values})', rows)
    if "id" not in columns:
        return
    [(sequence,)] = target.execute("SELECT pg_get_serial_sequence(%s, 'id')", (f'"{table}"',)).fetchall()
    if sequence:  # the next row Django adds gets the id after the old ones
        target.execute(f'SELECT setval(%s::regclass, (SELECT max(id) FROM "{table}"))', (sequence,))


@pytest.fixture(scope="session")
def upgrade_postgres():
    server = PostgresServer().start()
    yield server
    server.close()


@pytest.fixture(scope="module", params=[(s, b) for s in SNAPSHOTS for b in BACKENDS], ids="-".join)
def upgraded(request, tmp_path_factory):
    snapshot, backend = request.param
    postgres = request.getfixturevalue("upgrade_postgres") if backend == "postgresql" else None
    return Upgraded(snapshot, backend, tmp_path_factory.mktemp(f"upgrade-{snapshot}-{backend}"), postgres)


@pytest.fixture(scope="module")
def live(upgraded):
    """Today's console serving the upgraded database (one per snapshot: starting it adopts the waiting run)."""
    with upgraded.serve() as port:
        yield upgraded.console(port)
