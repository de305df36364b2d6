"""A round trip as a host sees it, beside a thin Django app (bench/thin_app/thin.py), measured from outside.

    .venv/bin/python bench/roundtrip.py                       # 3 runs, 1/4/16 clients, SQLite and PostgreSQL
    .venv/bin/python bench/roundtrip.py --runs 1 --seconds 3  # a smoke run

The loop, closed, per client: ``POST /api/v1/runs`` (a refund), its ``request.opened`` frame on an
open dashboard socket, ``POST /api/v1/requests/<id>/answer``, the run's ``run.finished`` frame.
Public API and dashboard socket only. The console (daphne, ``DJANGO_DEBUG=0``, as deployed) and the
thin app (the same daphne, Channels and Django) run side by side, each on its own database (SQLite
files with the same pragmas, or a PostgreSQL server each, fsync off), and take turns in blocks within
one run, so noise on the machine hits both alike. Each block reports round trips/s, server CPU per
round trip (the server's processes, PostgreSQL's included, read from /proc), run -> request and
answer -> finished latency at p50 and p99, and statements and write transactions per round trip
(bench/counted_asgi.py counts every statement sent, BEGIN and COMMIT included). Prints each figure's
median, spread (min-max) and ratio to the thin app; writes bench/results/roundtrip.json with the
machine and the commit.
"""

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(BENCH))

from dashboards import login_session  # noqa: E402
from provenance import commit, machine  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402

from tests.support.live_console import (  # noqa: E402
    CREATE_USERS,
    collect_static,
    console_env,
    free_port,
    manage,
    venv_bin,
    wait_for_port,
)
from tests.support.services import PostgresServer  # noqa: E402

REVIEWER_PASSWORD = "live-Reviewer-pass-5521"  # tests/support/live_console.py's CREATE_USERS
RUN_BODY = {"tool": "refund", "args": {"order": "A-7", "amount": 12}}
FRAME_TIMEOUT = 20.0
TICKS = os.sysconf("SC_CLK_TCK")
METRICS = [  # key, label, unit, better when higher
    ("round_trips_per_s", "round trips/s", "", True),
    ("cpu_ms_per_round_trip", "server CPU per round trip", "ms", False),
    ("run_to_request_p50_ms", "run -> request p50", "ms", False),
    ("run_to_request_p99_ms", "run -> request p99", "ms", False),
    ("answer_to_finished_p50_ms", "answer -> finished p50", "ms", False),
    ("answer_to_finished_p99_ms", "answer -> finished p99", "ms", False),
    ("statements_per_round_trip", "statements per round trip", "", False),
    ("write_transactions_per_round_trip", "write transactions per round trip", "", False),
]


# -- the servers ------------------------------------------------------------------------------------


def process_tree_cpu_seconds(root):
    """User + system CPU of ``root`` and every live descendant (PostgreSQL's backends), from /proc."""
    parents, cpu = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rpartition(")")[2].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / TICKS
    total = 0.0
    for pid in cpu:
        ancestor = pid
        while ancestor and ancestor != root:
            ancestor = parents.get(ancestor, 0)
        if ancestor == root:
            total += cpu[pid]
    return total


class Server:
    """One app under daphne (through bench/counted_asgi.py) and, on PostgreSQL, the server it alone uses."""

    def __init__(self, name, target, env, log_path, database=None):
        self.name, self.database = name, database
        self.port = free_port()
        env = {**env, "BENCH_ASGI_TARGET": target, "PYTHONPATH": f"{BENCH}{os.pathsep}{REPO}"}
        self.log, self.log_path = open(log_path, "w"), Path(log_path)
        self.process = subprocess.Popen(
            [venv_bin("daphne"), "-b", "127.0.0.1", "-p", str(self.port), "counted_asgi:application"],
            cwd=BENCH,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        wait_for_port(self.process, self.port, log_path)
        self.base_url = f"http://127.0.0.1:{self.port}"

    def cpu_seconds(self):
        total = process_tree_cpu_seconds(self.process.pid)
        if self.database is not None:
            total += process_tree_cpu_seconds(self.database.process.pid)
        return total

    async def statements(self):
        http = await Http.open(self.port, {})
        try:
            return await http.call("GET", "/__bench__/statements")
        finally:
            http.close()

    def close(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def start_console(workdir, database, **extra_env):
    env = console_env(Path(workdir) / "console.sqlite3", DJANGO_DEBUG="0", **extra_env)
    if database is not None:
        env["DATABASE_URL"] = database.url
    manage(env, "migrate", "--noinput")
    manage(env, "shell", "-c", CREATE_USERS, "--no-imports")
    collect_static(env)  # DEBUG off: the login page links the collected, hashed names
    token = manage(env, "issue_token", "reviewer", "--name", "bench").strip()
    server = Server("console", "toolnexus_site.asgi:application", env, Path(workdir) / "console.log", database)
    server.headers = {"Authorization": f"Bearer {token}"}
    server.cookie = f"sessionid={login_session(server.base_url, 'reviewer', REVIEWER_PASSWORD)}"
    return server


def start_thin(workdir, database):
    env = {**os.environ, "THIN_SQLITE_PATH": str(Path(workdir) / "thin.sqlite3"), "PYTHONUNBUFFERED": "1"}
    env.pop("DATABASE_URL", None)
    if database is not None:
        env["DATABASE_URL"] = database.url
    server = Server("thin", "thin_app.thin:application", env, Path(workdir) / "thin.log", database)
    server.headers, server.cookie = {}, None
    return server


# -- the clients ------------------------------------------------------------------------------------


class Http:
    """HTTP/1.1 JSON calls over one keep-alive connection (asyncio streams: the client stays cheap)."""

    def __init__(self, reader, writer, port, headers):
        self.reader, self.writer, self.port, self.headers = reader, writer, port, headers

    @classmethod
    async def open(cls, port, headers):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer, port, headers)

    async def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else b""
        head = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{self.port}", f"Content-Length: {len(data)}"]
        head += ["Content-Type: application/json"] + [f"{k}: {v}" for k, v in self.headers.items()]
        self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
        status = int((await self.reader.readline()).split()[1])
        length, chunked = 0, False
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
            chunked |= name.lower() == "transfer-encoding" and "chunked" in value.lower()
        if chunked:  # the thin app's responses (no middleware sets a length)
            raw = b""
            while size := int((await self.reader.readline()).strip(), 16):
                raw += await self.reader.readexactly(size + 2)
                raw = raw[:-2]
            await self.reader.readline()
        else:
            raw = await self.reader.readexactly(length)
        if status >= 300:
            raise RuntimeError(f"{method} {path}: {status} {raw[:300]!r}")
        return json.loads(raw or b"null")

    def close(self):
        self.writer.close()


class DashboardFrames:
    """One dashboard socket; hands each request.opened / run.finished frame, stamped on arrival, to its waiter."""

    WATCHED = ("request.opened", "run.finished")

    def __init__(self, socket):
        self.socket, self.waiters, self.early = socket, {}, {}
        self.reader = asyncio.ensure_future(self._read())

    @classmethod
    async def open(cls, server):
        url = server.base_url.replace("http://", "ws://", 1) + "/ws/console/"
        headers = {"Cookie": server.cookie} if server.cookie else {}
        socket = await connect(url, origin=server.base_url, additional_headers=headers, max_size=None)
        json.loads(await socket.recv())  # the snapshot
        return cls(socket)

    async def _read(self):
        async for raw in self.socket:
            arrived = time.perf_counter()
            frame = json.loads(raw)
            if frame.get("type") != "event" or frame.get("action") not in self.WATCHED:
                continue
            key = (frame["action"], frame.get("run_id"))
            waiter = self.waiters.pop(key, None)
            if waiter is None:
                self.early[key] = (arrived, frame)
            elif not waiter.done():
                waiter.set_result((arrived, frame))

    async def wait(self, action, run_id):
        key = (action, run_id)
        if key in self.early:
            return self.early.pop(key)
        waiter = self.waiters[key] = asyncio.get_running_loop().create_future()
        return await asyncio.wait_for(waiter, FRAME_TIMEOUT)

    async def close(self):
        self.reader.cancel()
        await self.socket.close()


async def round_trip(http, dashboard):
    started = time.perf_counter()
    run = await http.call("POST", "/api/v1/runs", RUN_BODY)
    opened_at, opened = await dashboard.wait("request.opened", run["id"])
    answered = time.perf_counter()
    await http.call("POST", f"/api/v1/requests/{opened['request_id']}/answer", {"ok": True})
    finished_at, _ = await dashboard.wait("run.finished", run["id"])
    return opened_at - started, finished_at - answered


def percentile(values, share):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000


async def block(server, clients, seconds):
    """``clients`` closed loops for ``seconds`` against ``server``; the block's figures."""
    dashboard = await DashboardFrames.open(server)
    https = [await Http.open(server.port, server.headers) for _ in range(clients)]
    for http in https:  # warm: connections, caches, the first run of the tool
        await round_trip(http, dashboard)
    timings = []

    async def loop(http, deadline):
        while time.perf_counter() < deadline:
            timings.append(await round_trip(http, dashboard))

    before_statements, before_cpu, began = await server.statements(), server.cpu_seconds(), time.perf_counter()
    await asyncio.gather(*(loop(http, began + seconds) for http in https))
    elapsed, cpu, after_statements = time.perf_counter() - began, server.cpu_seconds(), await server.statements()
    for http in https:
        http.close()
    await dashboard.close()
    count = len(timings)
    return {
        "round_trips": count,
        "round_trips_per_s": count / elapsed,
        "cpu_ms_per_round_trip": (cpu - before_cpu) * 1000 / count,
        "run_to_request_p50_ms": percentile([t[0] for t in timings], 0.50),
        "run_to_request_p99_ms": percentile([t[0] for t in timings], 0.99),
        "answer_to_finished_p50_ms": percentile([t[1] for t in timings], 0.50),
        "answer_to_finished_p99_ms": percentile([t[1] for t in timings], 0.99),
        "statements_per_round_trip": (after_statements["statements"] - before_statements["statements"]) / count,
        "write_transactions_per_round_trip": (
            after_statements["write_transactions"] - before_statements["write_transactions"]
        )
        / count,
    }


# -- the run ----------------------------------------------------------------------------------------


def summary(blocks):
    out = {}
    for key, *_ in METRICS:
        values = [b[key] for b in blocks]
        out[key] = {"median": statistics.median(values), "min": min(values), "max": max(values)}
    return out


async def measure_database(database_name, args, workdir):
    databases = []
    if database_name == "postgresql":
        databases = [PostgresServer().start(), PostgresServer().start()]  # one each: their CPU kept apart
    servers = []
    try:
        servers.append(start_console(workdir, databases[0] if databases else None))
        servers.append(start_thin(workdir, databases[1] if databases else None))
        results = {}
        for clients in args.clients:
            blocks = {server.name: [] for server in servers}
            for run in range(args.runs):
                turn = servers if run % 2 == 0 else servers[::-1]  # neither always goes first
                for server in turn:
                    blocks[server.name].append(await block(server, clients, args.seconds))
                    print(
                        f"  {database_name} {clients:>2} clients, run {run + 1}, {server.name}: "
                        f"{blocks[server.name][-1]['round_trips_per_s']:.0f} round trips/s",
                        flush=True,
                    )
            results[clients] = {name: {"runs": runs, **summary(runs)} for name, runs in blocks.items()}
        return results
    except Exception:
        for server in servers:
            server.log.flush()
            print(f"--- the end of {server.name}'s log:", *server.log_path.read_text().splitlines()[-40:], sep="\n")
        raise
    finally:
        for server in servers:
            server.close()
        for database in databases:
            database.close()


async def profile_console(workdir, seconds):
    """One client for ``seconds`` against a console whose every thread runs under cProfile; the text."""
    server = start_console(workdir, None, BENCH_PROFILE="1")
    try:
        dashboard = await DashboardFrames.open(server)
        http = await Http.open(server.port, server.headers)
        for _ in range(20):
            await round_trip(http, dashboard)
        control = await Http.open(server.port, {})
        await control.call("POST", "/__bench__/profile")
        count, deadline = 0, time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            await round_trip(http, dashboard)
            count += 1
        rows = await control.call("GET", "/__bench__/profile")
        http.close(), control.close()
        await dashboard.close()
    finally:
        server.close()

    def short(label):
        return label.replace(str(REPO) + "/", "").split("site-packages/")[-1]

    # Work done less than once in ten round trips is not the round trip's: the diff also holds, once,
    # the console's own start-up (toolnexus_site/asgi.py's import), which the profile's start misses.
    once = {label: row for label, row in rows.items() if row[0] * 10 < count}
    rows = {label: row for label, row in rows.items() if label not in once}
    own = sum(row[1] for row in rows.values())
    lines = [
        f"{count} round trips under cProfile (every thread, CPU clock); own time {own * 1000 / count:.1f} ms per"
        f" round trip; left out, done less than once in ten: {sum(r[1] for r in once.values()) * 1000:.0f} ms",
        "",
    ]
    for title, column in (("by own time", 1), ("by cumulative time", 2)):
        lines.append(f"top 35 {title}: calls/rt  own ms/rt  cumulative ms/rt  function")
        for label, (calls, inline, total) in sorted(rows.items(), key=lambda kv: -kv[1][column])[:35]:
            lines.append(
                f"  {calls / count:8.1f}  {inline * 1000 / count:8.3f}  {total * 1000 / count:8.3f}  {short(label)}"
            )
        lines.append("")
    for title, part in (("the console's own code", "/approvals/"), ("Django's database layer", "django/db/")):
        lines.append(f"top 25 of {title} by cumulative time: calls/rt  own ms/rt  cumulative ms/rt  function")
        mine = sorted(((k, v) for k, v in rows.items() if part in k), key=lambda kv: -kv[1][2])[:25]
        lines += [
            f"  {c / count:8.1f}  {i * 1000 / count:8.3f}  {t * 1000 / count:8.3f}  {short(k)}" for k, (c, i, t) in mine
        ]
        lines.append("")
    modules = sorted((label for label in rows if label.endswith("(<module>)")), key=lambda m: -rows[m][2])
    lines.append(f"modules executed during the round trips (imported late): {len(modules)}")
    lines += [f"  {rows[m][0] / count:8.2f}  {rows[m][2] * 1000 / count:8.3f}  {short(m)}" for m in modules[:25]]
    return "\n".join(lines)


def report(results):
    lines = []
    for database, by_clients in results.items():
        for clients, apps in by_clients.items():
            lines.append(f"\n{database}, {clients} client(s): console median [min-max] | thin median | ratio")
            for key, label, unit, _ in METRICS:
                console, thin = apps["console"][key], apps["thin"][key]
                ratio = console["median"] / thin["median"] if thin["median"] else float("nan")
                lines.append(
                    f"  {label:<36} {console['median']:8.1f}{unit} [{console['min']:.1f}-{console['max']:.1f}]"
                    f" | {thin['median']:8.1f}{unit} | {ratio:5.2f}x"
                )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each block")
    parser.add_argument("--clients", type=lambda s: [int(c) for c in s.split(",")], default=[1, 4, 16])
    parser.add_argument("--databases", type=lambda s: s.split(","), default=["sqlite", "postgresql"])
    parser.add_argument("--out", default=str(BENCH / "results" / "roundtrip.json"))
    parser.add_argument("--profile", type=float, metavar="SECONDS", help="instead: profile the console on SQLite")
    args = parser.parse_args()
    if args.profile:
        with tempfile.TemporaryDirectory(prefix="roundtrip-profile-") as workdir:
            text = asyncio.run(profile_console(workdir, args.profile))
        out = BENCH / "results" / "roundtrip-profile.txt"
        out.write_text(f"commit {commit()}, {machine()}\n{text}")
        print(text)
        return
    results = {}
    with tempfile.TemporaryDirectory(prefix="roundtrip-") as workdir:
        for database in args.databases:
            path = Path(workdir) / database
            path.mkdir()
            results[database] = asyncio.run(measure_database(database, args, path))
    document = {
        "commit": commit(),
        "machine": machine(),
        "when": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "runs": args.runs,
        "seconds_per_block": args.seconds,
        "results": results,
    }
    Path(args.out).parent.mkdir(exist_ok=True)
    Path(args.out).write_text(json.dumps(document, indent=1) + "\n")
    print(f"commit {document['commit']}, {document['machine']}")
    print(report(results))


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
