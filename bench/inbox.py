"""The inbox at volume, from outside the process: 1,000 and 10,000 open requests on a live console.

    .venv/bin/python bench/inbox.py                  # 1,000 and 10,000, three runs each
    .venv/bin/python bench/inbox.py --sizes 1000 --runs 1

Each run serves a fresh console under daphne (SQLite, the embedded channel layer) with the bench
tools, opens ``--waiting`` runs that wait on a reviewer (bench_suspend) and bulk-inserts the rest of
the open requests (tests/support/long_queue.py), then measures over loopback HTTP and a WebSocket:

- first view: the dashboard's HTML (time, bytes) and its socket's snapshot frame (time, bytes);
- the inbox's queries (search, filter, deadline sort, alike groups, "I may answer"), 15 calls each;
- the floor beside them: a JSON 404 under /api/v1/ (routing and auth, no query);
- the same search from ``--clients`` clients at once (each its own keep-alive connection);
- the first view in Chromium: from navigating to the dashboard to its first row and the server's total shown;
- the console's CPU while idle for ``--idle`` seconds with a dashboard connected (/proc/<pid>/stat), while
  ``--waiting`` runs wait (the supervisor's periodic work is what costs here);
- answer calls: POST /api/v1/requests/<id>/answer on waiting runs' requests (each resumes its run).

Reports median and spread (min-max) of the runs' medians/p99s; writes bench/results/inbox.json.
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

from tests.support.live_console import CREATE_USERS, console_env, daphne_process, manage  # noqa: E402

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


async def idle_cpu(base_url, cookie, pid, seconds):
    """The console's CPU share (of one core) while a dashboard stays connected and nothing happens."""
    import websockets

    def cpu_seconds():
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    url = base_url.replace("http", "ws") + "/ws/console/"
    async with websockets.connect(url, additional_headers={"Cookie": cookie, "Origin": base_url}, max_size=None):
        await asyncio.sleep(1)  # let the snapshot go out
        before, started = cpu_seconds(), time.monotonic()
        await asyncio.sleep(seconds)  # the measurement itself: wall time during which nothing is asked
        return (cpu_seconds() - before) / (time.monotonic() - started)


def seed(env, open_requests, waiting, client):
    """``waiting`` runs waiting on a reviewer (through the API) and the rest of ``open_requests`` inserted."""
    run_ids = [client_post_run(client, n) for n in range(waiting)]
    rest = max(0, open_requests - waiting)
    code = f"from tests.support.long_queue import open_requests_in_bulk; open_requests_in_bulk({rest})"
    manage(env, "shell", "-c", code)
    deadline = time.monotonic() + 120
    while True:  # the runs suspend in the console: wait until each has asked (bounded)
        _, _, _, body = client.get("/api/v1/requests?status=open&q=Benchmark+round&limit=500")
        asked = json.loads(body)["count"]
        if asked >= waiting or time.monotonic() > deadline:
            return run_ids, asked
        time.sleep(0.2)


def client_post_run(client, n):
    data = json.dumps({"tool": "bench_suspend", "args": {"round": n}}).encode()
    headers = {"Authorization": f"Bearer {client.token}", "Content-Type": "application/json"}
    with client.opener.open(urllib.request.Request(client.base_url + "/api/v1/runs", data, headers), timeout=60) as r:
        return json.loads(r.read())["id"]


def one_run(size, waiting, idle_seconds, clients, workdir):
    db = Path(workdir) / f"inbox-{size}.sqlite3"
    env = console_env(
        db, TOOLNEXUS_TOOL_MODULES="bench.bench_tools", CONSOLE_DEMO_TOOLS="0", PYTHONPATH=str(REPO), DJANGO_DEBUG="0"
    )
    manage(env, "migrate", "--noinput")
    manage(env, "shell", "-c", CREATE_USERS, "--no-imports")
    token = manage(env, "issue_token", "reviewer", "--name", "bench").strip()
    with daphne_process(env, Path(workdir) / f"daphne-{size}.log") as proc:
        base = f"http://127.0.0.1:{proc.port}"
        api = Client(base, token=token)
        _, asked = seed(env, size, waiting, api)
        cookie = session_cookie(base)
        page = Client(base, cookie=cookie)
        result = {"size": size, "waiting_runs_asked": asked}
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
        result["idle_cpu_percent"] = 100 * asyncio.run(idle_cpu(base, cookie, proc.pid, idle_seconds))
        _, _, _, body = api.get("/api/v1/requests?status=open&q=Benchmark+round&limit=100")
        ids = [r["id"] for r in json.loads(body)["requests"]][:50]
        answers = [api.post(f"/api/v1/requests/{i}/answer", {"ok": True}) for i in ids]
        result["answer_ms"] = {
            "median": statistics.median(answers),
            "p99": percentile(answers, 0.99),
            "n": len(answers),
        }
    return result


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
    options = parser.parse_args()
    report = {"load_before": os.getloadavg()[0], "sizes": {}}
    print(f"load average before: {report['load_before']:.2f}")
    for size in options.sizes:
        runs = []
        waiting = options.waiting if options.waiting is not None else min(size // 2, 5000)
        for _ in range(options.runs):
            with tempfile.TemporaryDirectory() as workdir:
                runs.append(one_run(size, waiting, options.idle, options.clients, workdir))
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
        print(f"  answer call p99 ms                     {fmt(summary['answer_p99_ms'])}")
    out = REPO / "bench" / "results" / "inbox.json"
    out.parent.mkdir(exist_ok=True)
    report["load_after"] = os.getloadavg()[0]
    print(f"load average after: {report['load_after']:.2f}")
    out.write_text(json.dumps(report, indent=2))
    print(f"\nwrote {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
