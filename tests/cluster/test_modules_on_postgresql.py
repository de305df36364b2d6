"""The in-process tests of the modules that build SQL or frames by hand, run again on PostgreSQL.

approvals/hotpath/rows.py writes and reads a suspension's rows without the ORM's compiler, and the
frames a transaction builds from its own rows must equal the read-back on either database; the
inbox's queries (approvals/inbox/) lean on what the two databases do differently; archiving the audit
trail goes by chain position, which only PostgreSQL makes differ from the ids.
The cluster tests cover PostgreSQL end to end; these compare row for row and frame for frame.
"""

import os
import subprocess
import sys

import pytest

from tests.cluster.harness import REPO

MODULES = [
    "tests/hotpath/test_rows.py",
    "tests/hotpath/test_returning.py",  # UPDATE ... RETURNING with scalar subqueries
    # Which API calls share the database thread there: the calls of a few rows, not the lists.
    "tests/hotpath/test_database_thread.py",
    "tests/team/test_policies.py",
    "tests/review/test_decisions.py",
    # A policy's reject options are JSON read by the compiled policy read (rows.CompiledRead: raw SQL, jsonb).
    "tests/review/test_reject_reasons.py",
    # The door's frames from the rows its UPDATEs return (RETURNING) equal the read-back.
    "tests/review/test_frames_as_written.py",
    # The inbox's SQL: JSON as text, aggregates paged by HAVING, NULLS LAST, keyset comparisons.
    "tests/web/test_inbox_query.py",
    # The inbox's counts read one index alone, in PostgreSQL's own plan (its visibility map, its planner).
    "tests/web/test_inbox_plans.py",
    "tests/web/test_bulk_answers.py",
    # One snapshot, one moment: READ COMMITTED would give each of its statements its own.
    "tests/web/test_snapshot_consistency.py",
    # A socket's snapshot and the ids it still waits for, read in one view while another transaction commits.
    "tests/web/test_follow_from_snapshot.py",
    # A run taken over while its owner, declared dead, goes on: races between two connections.
    "tests/runs/test_takeover_races.py",
    # The supervisor's safety net reads its changes and the ids still missing in one view.
    "tests/runs/test_changes_after_races.py",
    # The approve round trip's statement budget: PostgreSQL's transactions are psycopg's, not SQLite's.
    "tests/web/test_statement_budget.py",
    # Archiving by chain position, where ids are not the commit order, beside writers and sealers.
    "tests/audit/test_archive_positions.py",
    # Upgrading past 0017: the id sequence goes on beyond the ids the console chose itself before.
    "tests/audit/test_audit_id_sequence.py",
    # The sealer's poll (its index plan) and its retry after a real failure, on PostgreSQL's locks.
    "tests/audit/test_sealer.py",
    # jsonb gives the float 1e16 back as the int 10000000000000000: the call digest and the signature still agree.
    "tests/audit/test_large_numbers.py",
]


@pytest.mark.timeout(900)  # one test running many modules: the whole run, not one test's, is bounded here
def test_rows_frames_and_decisions_hold_on_postgresql(postgres_server):
    # pytest-django creates (and drops) test_<database> on the session's PostgreSQL.
    env = {**os.environ, "DATABASE_URL": postgres_server.url}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-W",
            "ignore::pytest.PytestWarning",
            *MODULES,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=840,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "failed" not in result.stdout
