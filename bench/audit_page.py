"""How fast the audit page stays with 100,000 events: first page, a deep page, filtered views (ms).

    .venv/bin/python bench/audit_page.py                 # 100,000 events in a fresh temporary database
    .venv/bin/python bench/audit_page.py -n 20000 --rounds 9 --explain

A benchmark, not a test: it prints timings and, with --explain, SQLite's query plans,
and never fails. The events are bulk-inserted through AuditEvent.objects.bulk_create,
which seals them into one valid hash chain (``verify_audit`` is timed too). Each page
is fetched through Django's test client as a logged-in user, the whole view and
template included; the figure is the median of --rounds fetches.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

USERS = [f"reviewer{i:02d}" for i in range(20)] + ["system", "tool:refund", "tool:deploy"]
TOOLS = ["refund", "deploy", "crunch", "signup", "balance", "payout", "confirm", "question", "fetchish", "phish"]
KINDS = ["approval", "input", "question", "authorization", ""]


def setup_django(db_path):
    os.environ["DJANGO_SETTINGS_MODULE"] = "toolnexus_site.settings"
    os.environ["CONSOLE_SQLITE_PATH"] = str(db_path)
    os.environ.setdefault("CONSOLE_DEMO_TOOLS", "0")
    import django
    from django.conf import settings

    django.setup()

    class NoMigrations(dict):  # the tables straight from the models: a scratch database
        def __contains__(self, app_label):
            return True

        def __getitem__(self, app_label):
            return None

    settings.MIGRATION_MODULES = NoMigrations()
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    from django.core.management import call_command

    call_command("migrate", run_syncdb=True, verbosity=0)
    from django.test.utils import setup_test_environment

    setup_test_environment()  # response.context for the row counts, and the test client's host allowed


def seed(count, batch=5000):
    from approvals.models import AuditEvent

    actions = list(AuditEvent.Action.values)
    start = datetime(2030, 1, 1, tzinfo=UTC)
    step = timedelta(days=60) / max(count, 1)
    made = 0
    began = time.perf_counter()
    while made < count:
        rows = []
        for i in range(made, min(made + batch, count)):
            rows.append(
                AuditEvent(
                    action=actions[i % len(actions)],
                    actor=USERS[(i * 7) % len(USERS)],
                    tool=TOOLS[(i * 3) % len(TOOLS)],
                    kind=KINDS[i % len(KINDS)],
                    payload={"i": i, "comment": "bench", "data": {"amount": i % 500}},
                    created_at=start + step * i,
                )
            )
        AuditEvent.objects.bulk_create(rows)
        made += len(rows)
    return time.perf_counter() - began


def timed(fetch, rounds):
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        fetch()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times), min(times), max(times)


def explain(filters_query, before=None):
    from django.db import connection

    from approvals.audit import pages as audit

    events = audit.filtered_events(audit.parse_filters(filters_query))
    if before is not None:
        events = events.filter(id__lt=before)
    sql, params = events.order_by("-id")[:51].query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        return "; ".join(row[-1] for row in cursor.fetchall())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--explain", action="store_true", help="print SQLite's plan for each query")
    options = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="audit-bench-") as folder:
        setup_django(Path(folder) / "bench.sqlite3")
        from django.contrib.auth import get_user_model
        from django.test import Client

        from approvals.audit.chain import verify_chain
        from approvals.models import AuditEvent

        seconds = seed(options.events)
        print(f"inserted {options.events:,} chained events in {seconds:.1f} s")
        began = time.perf_counter()
        report = verify_chain()
        print(
            f"verify_audit: {report.verified:,} events verified in {time.perf_counter() - began:.1f} s"
            + ("" if report.ok else f" -- PROBLEM: {report.problem}")
        )

        user = get_user_model().objects.create_user("bench", password="bench-pass-123456")
        client = Client()
        client.force_login(user)
        oldest = AuditEvent.objects.order_by("id").values_list("id", flat=True).first()
        cases = [
            ("first page", {}),
            ("deep page (50 from the oldest)", {"before": oldest + 50}),
            ("filtered: one user", {"user": "reviewer07"}),
            ("filtered: user + tool + kind", {"user": "reviewer07", "tool": "deploy", "kind": "input"}),
            ("filtered: action group request.*", {"action": "request.*"}),
            ("filtered: one day, 40 days back", {"since": "2030-01-20", "until": "2030-01-20"}),
            ("filtered: since day 2 (nearly everything)", {"since": "2030-01-02"}),
            ("filtered: until day 2 (the oldest 2 days)", {"until": "2030-01-02"}),
            ("filtered + deep: user, near the oldest", {"user": "reviewer07", "before": oldest + 500}),
            ("filtered: no match (unknown user)", {"user": "nobody"}),
        ]
        print(f"\n/audit/ with {options.events:,} events, median of {options.rounds} (min–max), ms:")
        for label, query in cases:
            response = client.get("/audit/", query)
            assert response.status_code == 200, response.status_code
            median, low, high = timed(lambda q=query: client.get("/audit/", q), options.rounds)
            rows = len(response.context["page"].rows)
            print(f"  {label:42s} {median:8.1f}  ({low:.1f}–{high:.1f})  rows={rows}")
            if options.explain:
                filters = {k: v for k, v in query.items() if k != "before"}
                print(f"      plan: {explain(filters, query.get('before'))}")

        from asgiref.sync import async_to_sync

        @async_to_sync
        async def export_size(query):
            from django.test import AsyncClient

            export_client = AsyncClient()
            await export_client.aforce_login(user)
            response = await export_client.get("/audit/export.csv", query)
            return sum([len(chunk) async for chunk in response.streaming_content])

        for label, query in (("one user's events", {"user": "reviewer07"}), ("all events", {})):
            began = time.perf_counter()
            size = export_size(query)
            print(
                f"\nexport.csv of {label}: {size / 1024:.0f} KiB in {(time.perf_counter() - began) * 1000:.0f} ms",
                end="",
            )
        print()


if __name__ == "__main__":
    main()
