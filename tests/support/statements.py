"""Counts every statement that reaches the database, on every connection and thread, while active.

Django's ``execute_wrapper`` sees only what Django executes; the drivers send more on their own:
the sqlite3 module's COMMIT (Django's ``commit()`` calls it directly), psycopg's BEGIN, COMMIT and
ROLLBACK. So the counter listens below Django, where statements leave the process:

- SQLite: ``set_trace_callback`` on each sqlite3 connection, which SQLite calls for every statement
  it runs (BEGIN IMMEDIATE, COMMIT, SAVEPOINT, PRAGMA included);
- PostgreSQL: psycopg's one door for the commands it sends by itself (``_exec_command``: BEGIN,
  COMMIT, ROLLBACK) and the cursor class every query goes through (Django's and the pool's checks).

Connections are instrumented as Django opens them (SQLite: from their first PRAGMA) or, for those
opened before the first counter, the first time Django opens a cursor on them (``create_cursor``,
patched at class level for the rest of the process): connections on threads a test cannot reach
(asgiref's database thread, which keeps its connection) are counted as well as new ones.
The idle connection ``approvals/hotpath/sqlite_wal.py`` checkpoints through is not Django's and is not
counted: it runs on a timer, off the round trip's path.
"""

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.db.backends.base.base import BaseDatabaseWrapper

WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")
_active: list["StatementCounter"] = []
_active_lock = threading.Lock()


@dataclass(frozen=True)
class Statement:
    sql: str
    thread: str
    connection: int  # id() of the driver's connection: transactions are per connection
    at: float

    @property
    def verb(self):
        return self.sql.lstrip().split(None, 1)[0].upper() if self.sql.strip() else ""


def _record(connection_id, sql):
    if isinstance(sql, bytes):
        sql = sql.decode(errors="replace")
    elif not isinstance(sql, str):  # psycopg's sql.Composed
        sql = str(sql)
    if sql.startswith("--"):  # SQLite reports a trigger's body as a comment; no trigger is a statement sent
        return
    statement = Statement(sql, threading.current_thread().name, connection_id, time.monotonic())
    with _active_lock:
        counters = list(_active)
    for counter in counters:
        counter.add(statement)


def _instrument_sqlite(raw):
    key = id(raw)
    raw.set_trace_callback(lambda sql: _record(key, sql))


def _instrument_psycopg(raw):
    key = id(raw)
    exec_command = raw._exec_command

    def text(query):
        return query.as_string(raw) if hasattr(query, "as_string") else query

    def counted_exec_command(command, *args, **kwargs):
        _record(key, text(command))
        return exec_command(command, *args, **kwargs)

    raw._exec_command = counted_exec_command
    base = raw.cursor_factory

    class CountedCursor(base):
        # Counted after psycopg's own BEGIN, which _start_query sends first, so transactions read in order.
        def _start_query(self, query=None):
            yield from super()._start_query(query)
            if query is not None:
                _record(key, text(query))

        def executemany(self, query, params_seq, *args, **kwargs):
            params_seq = list(params_seq)
            for _ in params_seq[1:]:  # one statement per row; _start_query counted the first
                _record(key, text(query))
            return super().executemany(query, params_seq, *args, **kwargs)

    raw.cursor_factory = CountedCursor


# Driver connections instrumented, each once; held so that no new connection reuses a closed one's id
# (sqlite3's connections take no weak references). A few per test session.
_instrumented: dict[int, object] = {}
_original_create_cursor = None
_patch_lock = threading.Lock()


def _instrument(wrapper):
    raw = wrapper.connection
    if raw is None or id(raw) in _instrumented:
        return
    if wrapper.vendor == "sqlite":
        _instrument_sqlite(raw)
    elif wrapper.vendor == "postgresql":
        _instrument_psycopg(raw)
    else:
        raise NotImplementedError(f"no statement counter for {wrapper.vendor}")
    _instrumented[id(raw)] = raw


def _install():
    global _original_create_cursor
    with _patch_lock:
        if _original_create_cursor is not None:
            return
        from django.db import connections

        classes = {type(connections[alias]) for alias in connections}
        originals = {cls: cls.create_cursor for cls in classes}

        def create_cursor(self, name=None):
            _instrument(self)
            return originals[type(self)](self, name)

        for cls in classes:
            cls.create_cursor = create_cursor
        _original_create_cursor = originals

        # A SQLite connection opened while counting: traced from its first PRAGMA, before any cursor.
        from django.db.backends.sqlite3 import base as sqlite_base

        connect = sqlite_base.Database.connect

        def traced_connect(*args, **kwargs):
            raw = connect(*args, **kwargs)
            _instrumented[id(raw)] = raw
            _instrument_sqlite(raw)
            return raw

        sqlite_base.Database.connect = traced_connect


@dataclass
class Transaction:
    statements: list[Statement]

    @property
    def writes(self):
        return any(s.verb in WRITES for s in self.statements)


@dataclass
class StatementCounter:
    statements: list[Statement] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, statement):
        with self.lock:
            self.statements.append(statement)

    def taken(self):
        with self.lock:
            return list(self.statements)

    def since(self, moment):
        return [s for s in self.taken() if s.at >= moment]

    def transactions(self, statements=None):
        """Statements grouped into the transactions they ran in; a statement outside BEGIN is its own."""
        statements = self.taken() if statements is None else statements
        open_ones: dict[int, list[Statement]] = {}
        done = []
        for statement in statements:
            verb = statement.verb
            current = open_ones.get(statement.connection)
            if verb == "BEGIN":
                open_ones[statement.connection] = [statement]
            elif current is not None:
                current.append(statement)
                if verb in ("COMMIT", "ROLLBACK", "END") and "TO" not in statement.sql.upper().split():
                    done.append(Transaction(open_ones.pop(statement.connection)))
            else:
                done.append(Transaction([statement]))
        done.extend(Transaction(rest) for rest in open_ones.values())
        return done

    def write_transactions(self, statements=None):
        return [t for t in self.transactions(statements) if t.writes]


@contextmanager
def counting_statements():
    """``with counting_statements() as counter:``: every statement sent meanwhile, from any thread."""
    _install()
    counter = StatementCounter()
    with _active_lock:
        _active.append(counter)
    try:
        yield counter
    finally:
        with _active_lock:
            _active.remove(counter)


def installed_on(wrapper: BaseDatabaseWrapper) -> bool:
    """Whether the statements of this Django connection are being counted (for the self-test)."""
    return wrapper.connection is not None and id(wrapper.connection) in _instrumented
