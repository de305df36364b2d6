"""How fast the inbox answers a search or a filter with 10,000 open requests, on SQLite and PostgreSQL.

    .venv/bin/python bench/inbox_query.py                          # both databases, 10,000 open requests
    .venv/bin/python bench/inbox_query.py --open 1000 --backends sqlite --calls 9

Each database gets its own console (daphne, migrated the way ``make run`` migrates) filled with
--open open requests and --resolved decided ones (tests/support/long_queue.py, then spread
over kinds, tools, hosts, runs and deadlines). Every figure is one GET /api/v1/requests
end to end: HTTP on loopback with an API token, the view, the SQL and the JSON, a page of
--limit rows. The floor is the same call without a filter. Each of --rounds rounds times each
query --calls times and keeps the median; the report gives the median of the rounds and
their spread (slowest round minus fastest). Before each database it waits (at most --max-wait s)
for the machine to be quiet, and the JSON notes how busy it was. Exits 1 when a query's median
is over --target-ms.
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(BENCH))

from realtime import machine, settle  # noqa: E402

OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy

# (name, query string): the floor first, then each search, filter, sort and grouping of the inbox.
QUERIES = [
    ("floor: no filter", ""),
    ("search, one match", "q=A-004321"),
    ("search, a host", "q=ops-bot"),
    ("search, no match", "q=no+such+text"),
    ("kind", "kind=input"),
    ("two kinds", "kind=question,authorization"),
    ("tool", "tool=deploy"),
    ("host", "host=ops-bot"),
    ("policy", "policy=wires"),
    ("starter", "starter=alice"),
    ("assigned to me", "assigned=me"),
    ("I may answer", "may_answer=1"),
    ("expiring soon", "expiring=1"),
    ("newest first", "sort=newest"),
    ("by deadline", "sort=deadline"),
    ("group by run", "group=run"),
    ("group alike", "group=alike"),
    ("tool, may answer, by deadline", "tool=refund&may_answer=1&sort=deadline"),
]


def seed(open_count, resolved_count):
    """Fill the console's database (run inside ``manage.py shell``): open requests spread over kinds, tools,
    hosts, runs and deadlines, decided ones beside them, two policies, and the users they name."""
    from datetime import timedelta

    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.db import connection
    from django.utils import timezone

    from approvals.models import Policy, Request, RequestStatus, Run, RunStatus
    from tests.support.long_queue import open_requests_in_bulk

    users = get_user_model().objects
    alice, bob = users.create_user("alice"), users.create_user("bob")
    ops = Group.objects.create(name="ops")
    users.get(username="reviewer").groups.add(ops)
    Policy.objects.create(name="wires", tool_pattern="wire").allowed_users.add(bob)
    Policy.objects.create(name="deploys", tool_pattern="deploy").assigned_groups.add(ops)

    ids = open_requests_in_bulk(open_count, prefix="open")
    now = timezone.now()
    spread = {
        "0": {"tool": "deploy", "host": "ops-bot", "args": {"service": "web"}},  # alike, assigned to ops
        "1": {"tool": "wire", "host": "ops-bot", "args": {"amount": 900}},  # only bob may answer
        "2": {"kind": "question"},
        "3": {"kind": "authorization", "url": "https://example.com/sign-in"},
        "5": {"expires_at": now + timedelta(minutes=30)},
        "6": {"expires_at": now + timedelta(days=1)},
    }
    for digit, fields in spread.items():
        Request.objects.filter(id__endswith=digit).update(**fields)
    # Every tenth asked from inside a console run (five requests a run), started by alice or bob. The runs
    # are marked finished so that no console process takes them over meanwhile: the inbox reads requests.
    in_runs = [pk for pk in ids if pk.endswith("4")]
    runs = Run.objects.bulk_create(
        Run(tool="refund", status=RunStatus.SUCCEEDED, started_by=alice if n % 2 else bob)
        for n in range(len(in_runs) // 5 + 1)
    )
    rows = list(Request.objects.filter(pk__in=in_runs))
    for n, row in enumerate(rows):
        row.run_id, row.host = runs[n // 5].pk, ""
    Request.objects.bulk_update(rows, ["run_id", "host"], batch_size=500)

    decided = open_requests_in_bulk(resolved_count, prefix="done")
    Request.objects.filter(pk__in=decided).update(
        status=RequestStatus.DECLINED, answer_ok=False, answer_reason="declined", answered_at=now
    )
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")  # what autovacuum does within a minute of a load this size


def get(base_url, token, query, limit):
    path = f"/api/v1/requests?status=open&limit={limit}" + (f"&{query}" if query else "")
    request = urllib.request.Request(base_url + path, headers={"Authorization": f"Bearer {token}"})
    began = time.perf_counter()
    with OPENER.open(request, timeout=60) as response:
        body = response.read()
    elapsed = (time.perf_counter() - began) * 1000
    assert response.status == 200, (path, response.status, body[:300])
    return elapsed, json.loads(body)


def measure(console, args):
    """{query name: {"rounds": [median ms of each round], "count": n matching, "bytes": size of the answer}}."""
    token = console.reviewer_token
    found = {}
    for name, query in QUERIES:  # once each, untimed: warm caches, check the answer
        _, body = get(console.base_url, token, query, args.limit)
        found[name] = {"rounds": [], "count": body["count"], "bytes": len(json.dumps(body))}
    for _ in range(args.rounds):
        for name, query in QUERIES:
            times = [get(console.base_url, token, query, args.limit)[0] for _ in range(args.calls)]
            found[name]["rounds"].append(statistics.median(times))
    return found


def report(backend, found, target_ms):
    floor = statistics.median(found[QUERIES[0][0]]["rounds"])
    print(f"\n{backend}: median of the rounds, spread (slowest round - fastest), matching requests")
    print(f"{'query':34} {'median':>9} {'spread':>8} {'- floor':>9} {'matching':>9}")
    missed = []
    for name, _ in QUERIES:
        rounds = found[name]["rounds"]
        median = statistics.median(rounds)
        over = " > target" if median > target_ms else ""
        if over:
            missed.append(name)
        print(
            f"{name:34} {median:7.1f}ms {max(rounds) - min(rounds):6.1f}ms {median - floor:7.1f}ms "
            f"{found[name]['count']:9d}{over}"
        )
    return missed


def run_backend(backend, args, workdir, load):
    from tests.support.live_console import live_console, manage
    from tests.support.services import PostgresServer

    (workdir / backend).mkdir()
    server = PostgresServer().start() if backend == "postgresql" else None
    extra = {"DJANGO_DEBUG": "0", **({"DATABASE_URL": server.url} if server is not None else {})}  # as deployed
    try:
        with live_console(workdir / backend, workdir / f"{backend}-daphne.log", **extra) as console:
            began = time.perf_counter()
            manage(
                console.env, "shell", "-c", f"from bench.inbox_query import seed; seed({args.open}, {args.resolved})"
            )
            print(
                f"{backend}: {args.open} open and {args.resolved} decided requests in {time.perf_counter() - began:.1f}s"
            )
            settle(backend, load, args.max_wait)
            return measure(console, args)
    finally:
        if server is not None:
            server.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--open", type=int, default=10_000, help="open requests (default 10,000)")
    parser.add_argument("--resolved", type=int, default=5_000, help="decided requests beside them")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=5, help="timed calls of each query per round")
    parser.add_argument("--limit", type=int, default=50, help="rows per page, as the inbox asks")
    parser.add_argument("--target-ms", type=float, default=300.0)
    parser.add_argument("--max-wait", type=float, default=120.0, help="seconds to wait for a quiet machine")
    args = parser.parse_args()

    results, missed, load = {}, [], {}
    with tempfile.TemporaryDirectory(prefix="bench-inbox-") as folder:
        for backend in args.backends.split(","):
            results[backend] = run_backend(backend, args, Path(folder), load)
            missed += [f"{backend}: {name}" for name in report(backend, results[backend], args.target_ms)]
    out = REPO / "bench" / "results" / "inbox_query.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"machine": machine(), "args": vars(args), **load, "results": results}, indent=2))
    print(f"\nwritten to {out.relative_to(REPO)}; target {args.target_ms:g} ms per call")
    if missed:
        print("over the target: " + "; ".join(missed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
