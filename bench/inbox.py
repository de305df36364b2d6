"""The inbox at volume, from outside the process: 1,000 to 100,000 open requests on a live console.

    .venv/bin/python bench/inbox.py                  # 1,000 and 10,000, three runs each
    .venv/bin/python bench/inbox.py --sizes 1000 --runs 1
    .venv/bin/python bench/inbox.py --database postgresql --sizes 1000 10000 100000 --waiting 500 --explain

Each run serves a fresh console under daphne (SQLite and the embedded channel layer, or with
``--database postgresql`` a PostgreSQL server of its own, started by the bench, fsync off as in the
cluster tests) with the bench tools, opens ``--waiting`` runs that wait on a reviewer (bench_suspend)
and bulk-inserts the rest of the open requests (tests/support/long_queue.py; 100,000 in well under a
minute), then measures over loopback HTTP and a WebSocket:

- first view: the dashboard's HTML (time, bytes) and its socket's snapshot frame (time, bytes);
- the inbox's queries (search, filter, deadline sort, alike groups, "I may answer"), 15 calls each;
- the floor beside them: a JSON 404 under /api/v1/ (routing and auth, no query);
- the same search from ``--clients`` clients at once (each its own keep-alive connection);
- the first view in Chromium: from navigating to the dashboard to its first row and the server's total shown;
- the console's CPU while idle for ``--idle`` seconds with a dashboard connected (/proc/<pid>/stat), while
  ``--waiting`` runs wait (the supervisor's periodic work is what costs here), and PostgreSQL's beside it;
- answer calls: POST /api/v1/requests/<id>/answer on waiting runs' requests (each resumes its run).

Reports median and spread (min-max) of the runs' medians/p99s; writes bench/results/inbox.json
(``--out``). ``--explain`` also writes, per size, the plan and timing of every SELECT the snapshot and
the inbox's queries send (EXPLAIN ANALYZE on PostgreSQL, EXPLAIN QUERY PLAN on SQLite), run in the
console's settings after the last run's measurements, to bench/results/inbox-explain-<database>-<size>.txt.
Targets (issue 21): first view under 1 s, each query under 300 ms. A benchmark: it never fails a build.
"""

import argparse
import asyncio
import concurrent.futures
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from provenance import commit, machine  # noqa: E402

from tests.support.live_console import CREATE_USERS, console_env, daphne_process, manage  # noqa: E402
from tests.support.services import PostgresServer  # noqa: E402

QUERIES = {
    "search": "status=open&q=A-0001&limit=50",
    "filter kind": "status=open&kind=approval&limit=50",
    "sort deadline": "status=open&sort=deadline&limit=50",
    "group alike": "status=open&group=alike",
    "may answer": "status=open&may_answer=1&limit=50",
}
ROUNDS = 15
PASSWORD = "live-Reviewer-pass-5521"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Client:
    def __init__(self, base_url, token=None, cookie=None):
        self.base_url, self.token, self.cookie = base_url, token, cookie
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def get(self, path):
        """(milliseconds, bytes, status) of one GET."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        if self.cookie:
            headers["Cookie"] = self.cookie
        started = time.perf_counter()
        try:
            with self.opener.open(urllib.request.Request(self.base_url + path, headers=headers), timeout=60) as r:
                body, status = r.read(), r.status
        except urllib.error.HTTPError as exc:
            body, status = exc.read(), exc.code
        return (time.perf_counter() - started) * 1000, len(body), status, body

    def post(self, path, payload):
        data = json.dumps(payload).encode()
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        started = time.perf_counter()
        with self.opener.open(urllib.request.Request(self.base_url + path, data, headers), timeout=60) as r:
            r.read()
        return (time.perf_counter() - started) * 1000


def session_cookie(base_url):
    """Log in through the login form; returns the Cookie header a browser would send."""
    import http.cookiejar
    import re

    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(base_url + "/accounts/login/", timeout=30).read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    form = urllib.parse.urlencode({"username": "reviewer", "password": PASSWORD, "csrfmiddlewaretoken": token})
    request = urllib.request.Request(base_url + "/accounts/login/", form.encode(), {"Referer": base_url + "/"})
    opener.open(request, timeout=30).read()
    return "; ".join(f"{c.name}={c.value}" for c in jar)


async def snapshot(base_url, cookie):
    """(milliseconds, bytes) from opening the dashboard socket to its snapshot frame."""
    import websockets

    url = base_url.replace("http", "ws") + "/ws/console/"
    started = time.perf_counter()
    async with websockets.connect(url, additional_headers={"Cookie": cookie, "Origin": base_url}, max_size=None) as ws:
        while True:
            text = await ws.recv()
            if json.loads(text).get("type") == "snapshot":
                return (time.perf_counter() - started) * 1000, len(text)


def tree_cpu_seconds(root):
    """User + system CPU of ``root`` and its live descendants (PostgreSQL's backends), from /proc."""
    parents, cpu = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry)], cpu[int(entry)] = int(fields[1]), (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    total = 0.0
    for pid, seconds in cpu.items():
        ancestor = pid
        while ancestor and ancestor != root:
            ancestor = parents.get(ancestor, 0)
        total += seconds if ancestor == root else 0.0
    return total


async def idle_cpu(base_url, cookie, pid, seconds, database_pid=None):
    """The console's and the database server's CPU shares (of one core) while a dashboard stays connected
    and nothing happens (the database's is 0 on SQLite, which runs in the console's process)."""
    import websockets

    def cpu_seconds():
        return tree_cpu_seconds(pid), tree_cpu_seconds(database_pid) if database_pid else 0.0

    url = base_url.replace("http", "ws") + "/ws/console/"
    async with websockets.connect(url, additional_headers={"Cookie": cookie, "Origin": base_url}, max_size=None):
        await asyncio.sleep(1)  # let the snapshot go out
        before, started = cpu_seconds(), time.monotonic()
        await asyncio.sleep(seconds)  # the measurement itself: wall time during which nothing is asked
        after, elapsed = cpu_seconds(), time.monotonic() - started
        return (after[0] - before[0]) / elapsed, (after[1] - before[1]) / elapsed


def seed(env, open_requests, waiting, client):
    """``waiting`` runs waiting on a reviewer (through the API, four at a time) and the rest of
    ``open_requests`` inserted in bulk; returns the run ids, how many asked, and the seconds each part took."""
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        run_ids = list(pool.map(lambda n: client_post_run(client, n), range(waiting)))
    runs_started = time.monotonic()
    rest = max(0, open_requests - waiting)
    code = f"from tests.support.long_queue import open_requests_in_bulk; open_requests_in_bulk({rest})"
    manage(env, "shell", "-c", code)
    inserted = time.monotonic()
    deadline = time.monotonic() + 120
    while True:  # the runs suspend in the console: wait until each has asked (bounded)
        _, _, _, body = client.get("/api/v1/requests?status=open&q=Benchmark+round&limit=1")
        asked = json.loads(body)["count"]
        if asked >= waiting or time.monotonic() > deadline:
            seconds = {"runs": runs_started - started, "bulk_insert": inserted - runs_started}
            return run_ids, asked, seconds
        time.sleep(0.2)


def client_post_run(client, n):
    data = json.dumps({"tool": "bench_suspend", "args": {"round": n}}).encode()
    headers = {"Authorization": f"Bearer {client.token}", "Content-Type": "application/json"}
    with client.opener.open(urllib.request.Request(client.base_url + "/api/v1/runs", data, headers), timeout=60) as r:
        return json.loads(r.read())["id"]


def one_run(size, waiting, idle_seconds, clients, workdir, database="sqlite", explain=None):
    """One fresh console at ``size`` open requests, measured; on PostgreSQL a server of its own, stopped after."""
    postgres = PostgresServer().start() if database == "postgresql" else None
    try:
        return measured_console(size, waiting, idle_seconds, clients, workdir, postgres, explain)
    finally:
        if postgres is not None:
            postgres.close()


def measured_console(size, waiting, idle_seconds, clients, workdir, postgres, explain):
    db = Path(workdir) / f"inbox-{size}.sqlite3"
    env = console_env(
        db, TOOLNEXUS_TOOL_MODULES="bench.bench_tools", CONSOLE_DEMO_TOOLS="0", PYTHONPATH=str(REPO), DJANGO_DEBUG="0"
    )
    if postgres is not None:
        env["DATABASE_URL"] = postgres.url
    manage(env, "migrate", "--noinput")
    manage(env, "shell", "-c", CREATE_USERS, "--no-imports")
    token = manage(env, "issue_token", "reviewer", "--name", "bench").strip()
    with daphne_process(env, Path(workdir) / f"daphne-{size}.log") as proc:
        base = f"http://127.0.0.1:{proc.port}"
        api = Client(base, token=token)
        _, asked, seed_seconds = seed(env, size, waiting, api)
        visible = vacuumed(postgres) if postgres is not None else None
        cookie = session_cookie(base)
        page = Client(base, cookie=cookie)
        result = {"size": size, "waiting_runs_asked": asked, "seed_seconds": seed_seconds, "pages_all_visible": visible}
        html_ms, html_bytes, status, _ = page.get("/")
        assert status == 200, status
        snap_ms, snap_bytes = asyncio.run(snapshot(base, cookie))
        result["first_view"] = {
            "html_ms": html_ms,
            "html_bytes": html_bytes,
            "snapshot_ms": snap_ms,
            "snapshot_bytes": snap_bytes,
            "total_ms": html_ms + snap_ms,
        }
        result["floor_ms"] = statistics.median(api.get("/api/v1/no-such-endpoint")[0] for _ in range(ROUNDS))
        result["queries"] = {}
        for name, query in QUERIES.items():
            timings = [api.get(f"/api/v1/requests?{query}") for _ in range(ROUNDS)]
            assert all(t[2] == 200 for t in timings), (name, timings[0])
            result["queries"][name] = {
                "median_ms": statistics.median(t[0] for t in timings),
                "p95_ms": percentile([t[0] for t in timings], 0.95),
                "bytes": timings[0][1],
            }
        together = searches_at_once(base, token, clients, ROUNDS)
        result["search_together"] = {
            "clients": clients,
            "median_ms": statistics.median(together),
            "p99_ms": percentile(together, 0.99),
        }
        _, _, _, body = api.get("/api/v1/requests?status=open&limit=1")
        result["chromium_first_view_ms"] = chromium_first_view(base, cookie, json.loads(body)["count"])
        database_pid = postgres.process.pid if postgres is not None else None
        console_share, database_share = asyncio.run(idle_cpu(base, cookie, proc.pid, idle_seconds, database_pid))
        result["idle_cpu_percent"], result["idle_database_cpu_percent"] = 100 * console_share, 100 * database_share
        _, _, _, body = api.get("/api/v1/requests?status=open&q=Benchmark+round&limit=100")
        ids = [r["id"] for r in json.loads(body)["requests"]][:50]
        answers = [api.post(f"/api/v1/requests/{i}/answer", {"ok": True}) for i in ids]
        result["answer_ms"] = {
            "median": statistics.median(answers),
            "p99": percentile(answers, 0.99),
            "n": len(answers),
        }
        if explain is not None:
            code = f"from bench.inbox import explain_queries; explain_queries({str(explain)!r})"
            manage(env, "shell", "-c", code)
    return result


def explain_queries(out):
    """In the console's settings (``manage.py shell``): the plan and timing of every SELECT the snapshot and
    each of QUERIES send, as the reviewer sees them, written to ``out``."""
    from django.db import connection
    from django.http import QueryDict
    from django.test.utils import CaptureQueriesContext

    from approvals import frames, inbox
    from approvals.team import policies

    viewer = policies.Viewer(username="reviewer", staff=True)
    cases = {"snapshot": lambda: frames.snapshot(viewer)}
    for name, query in QUERIES.items():
        cases[name] = lambda query=query: inbox.inbox_page(inbox.InboxQuery.from_params(QueryDict(query)), viewer)
    explain = "EXPLAIN (ANALYZE, BUFFERS) " if connection.vendor == "postgresql" else "EXPLAIN QUERY PLAN "
    lines = []
    for name, call in cases.items():
        call()  # warm: the policies' cache, the connection
        with CaptureQueriesContext(connection) as captured:
            call()
        lines.append(f"== {name}: {len(captured)} statements, {sum(float(q['time']) for q in captured) * 1000:.1f} ms")
        for query in sorted(captured, key=lambda q: -float(q["time"])):
            sql = query["sql"]
            if not sql.lstrip().upper().startswith("SELECT"):
                continue
            with connection.cursor() as cursor:
                cursor.execute(explain + sql)
                plan = [" | ".join(str(v) for v in row) for row in cursor.fetchall()]
            lines += [f"-- {float(query['time']) * 1000:.1f} ms: {sql[:1500]}", *plan, ""]
    Path(out).write_text("\n".join(lines) + "\n")


def vacuumed(postgres):
    """What autovacuum leaves after a bulk load, at a known moment: the planner's statistics and the
    visibility map (index-only scans read it); returns the requests table's (pages, pages all-visible).

    The bench's server commits asynchronously: until its WAL is flushed (the CHECKPOINT), VACUUM may
    not mark the rows just loaded as visible to all."""
    postgres.psql("CHECKPOINT")
    postgres.psql("VACUUM ANALYZE approvals_request")
    pages = postgres.psql("SELECT relpages, relallvisible FROM pg_class WHERE relname = 'approvals_request'")
    return [int(n) for n in pages.strip().split("|")]


def searches_at_once(base_url, token, clients, rounds):
    """Every client runs ``rounds`` searches back to back, all clients at once; returns each call's milliseconds."""
    query = "/api/v1/requests?" + QUERIES["search"]

    def one_client(_):
        client = Client(base_url, token=token)
        return [client.get(query)[0] for _ in range(rounds)]

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        return [ms for timings in pool.map(one_client, range(clients)) for ms in timings]


def chromium_first_view(base_url, cookie, expected_total):
    """Milliseconds from asking Chromium for the dashboard to its first row and the server's total on screen."""
    from playwright.sync_api import sync_playwright

    cookies = [
        {"name": part.split("=", 1)[0], "value": part.split("=", 1)[1], "url": base_url} for part in cookie.split("; ")
    ]
    with sync_playwright() as playwright:
        chromium = os.environ.get("E2E_CHROMIUM", "/usr/bin/chromium")  # the Debian package, as the e2e tests use
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        try:
            context = browser.new_context(viewport={"width": 1440, "height": 900})
            context.add_cookies(cookies)
            page = context.new_page()
            page.goto(base_url + "/accounts/login/")  # warm the browser's process and connection, not the inbox
            started = time.perf_counter()
            page.goto(base_url + "/")
            page.wait_for_selector("#requests > .row", timeout=30_000)
            page.wait_for_function(
                f"document.querySelector('#request-count')?.textContent.trim() === '{expected_total}'",
                timeout=30_000,
            )
            return (time.perf_counter() - started) * 1000
        finally:
            browser.close()


def spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--waiting", type=int, help="of the open requests, how many are waiting runs (default: half, at most 5,000)"
    )
    parser.add_argument("--clients", type=int, default=8, help="clients searching at once")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle CPU measured")
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--explain", action="store_true", help="write each size's query plans (see above)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "inbox.json")
    options = parser.parse_args()
    report = {
        "commit": commit(),
        "machine": machine(),
        "database": options.database,
        "load_before": os.getloadavg()[0],
        "sizes": {},
    }
    print(f"load average before: {report['load_before']:.2f}")
    for size in options.sizes:
        runs = []
        waiting = options.waiting if options.waiting is not None else min(size // 2, 5000)
        for run in range(options.runs):
            explain = None
            if options.explain and run == options.runs - 1:
                explain = REPO / "bench" / "results" / f"inbox-explain-{options.database}-{size}.txt"
            with tempfile.TemporaryDirectory() as workdir:
                runs.append(one_run(size, waiting, options.idle, options.clients, workdir, options.database, explain))
        summary = {
            "first_view_ms": spread([r["first_view"]["total_ms"] for r in runs]),
            "html_bytes": runs[-1]["first_view"]["html_bytes"],
            "snapshot_bytes": runs[-1]["first_view"]["snapshot_bytes"],
            "floor_ms": spread([r["floor_ms"] for r in runs]),
            "queries_ms": {name: spread([r["queries"][name]["median_ms"] for r in runs]) for name in QUERIES},
            "queries_p95_ms": {name: spread([r["queries"][name]["p95_ms"] for r in runs]) for name in QUERIES},
            "search_together_ms": spread([r["search_together"]["median_ms"] for r in runs]),
            "search_together_p99_ms": spread([r["search_together"]["p99_ms"] for r in runs]),
            "chromium_first_view_ms": spread([r["chromium_first_view_ms"] for r in runs]),
            "idle_cpu_percent": spread([r["idle_cpu_percent"] for r in runs]),
            "idle_database_cpu_percent": spread([r["idle_database_cpu_percent"] for r in runs]),
            "seed_seconds": spread([sum(r["seed_seconds"].values()) for r in runs]),
            "answer_p99_ms": spread([r["answer_ms"]["p99"] for r in runs]),
        }
        report["sizes"][size] = {"summary": summary, "runs": runs}
        print(f"\n{size:,} open requests ({waiting:,} of them waiting runs), {options.runs} runs: median (min-max)")
        fmt = lambda s: f"{s['median']:.1f} ({s['min']:.1f}-{s['max']:.1f})"  # noqa: E731
        print(
            f"  first view (HTML + socket snapshot) ms  {fmt(summary['first_view_ms'])}   "
            f"HTML {summary['html_bytes']:,} B, snapshot {summary['snapshot_bytes']:,} B"
        )
        print(f"  floor: JSON 404 under /api/v1/ ms       {fmt(summary['floor_ms'])}")
        for name in QUERIES:
            print(f"  {name:<38} ms  {fmt(summary['queries_ms'][name])}   p95 {fmt(summary['queries_p95_ms'][name])}")
        print(
            f"  search, {options.clients} clients at once ms           {fmt(summary['search_together_ms'])}   "
            f"p99 {fmt(summary['search_together_p99_ms'])}"
        )
        print(f"  Chromium: dashboard to first row ms    {fmt(summary['chromium_first_view_ms'])}")
        print(f"  idle CPU, one dashboard connected %    {fmt(summary['idle_cpu_percent'])}")
        print(f"  ... and the database server's %        {fmt(summary['idle_database_cpu_percent'])}")
        print(f"  seeding (runs + bulk insert) s         {fmt(summary['seed_seconds'])}")
        print(f"  answer call p99 ms                     {fmt(summary['answer_p99_ms'])}")
    out = options.out.resolve()
    out.parent.mkdir(exist_ok=True)
    report["load_after"] = os.getloadavg()[0]
    print(f"load average after: {report['load_after']:.2f}")
    out.write_text(json.dumps(report, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
