"""A round trip as a host sees it, beside a thin Django app (bench/thin_app/thin.py), measured from outside.

    .venv/bin/python bench/roundtrip.py                       # 3 runs, 1/4/16 clients, SQLite and PostgreSQL
    .venv/bin/python bench/roundtrip.py --runs 1 --seconds 3  # a smoke run
    .venv/bin/python bench/roundtrip.py --databases postgresql --consoles 1,2 --clients 4,16  # processes side by side

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

``--consoles 1,2`` (PostgreSQL only) measures the console as docs/scaling.md deploys it: that many
daphne processes on one PostgreSQL server and one redis-server (the channel layer; ``--redis`` uses it
for a single console too), a keep-alive connection per client spread round-robin over the processes
(client i calls process i mod N for both its calls, so its run executes there), and one dashboard
socket per process; client i waits for its frames on process i+1 mod N (``--dashboard-on other``, the
default: each frame crosses Redis to another process) or on its own (``same``); ``first`` opens one
dashboard socket in all, on the first process, as one console has. Each count is its own
cluster (its own PostgreSQL and Redis, so their CPU is kept apart) and takes turns with the others and
the thin app. CPU per round trip then sums every console process, PostgreSQL and Redis; beside it,
the bench's own CPU and how busy the machine's cores were, which is where a ceiling shows.
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
from tests.support.services import PostgresServer, RedisServer  # noqa: E402

REVIEWER_PASSWORD = "live-Reviewer-pass-5521"  # tests/support/live_console.py's CREATE_USERS
RUN_BODY = {"tool": "refund", "args": {"order": "A-7", "amount": 12}}
FRAME_TIMEOUT = 20.0
TICKS = os.sysconf("SC_CLK_TCK")
FOUR_STEPS = "thin, four steps"  # the floor of the console's shape: bench/thin_app/thin.py, THIN_STEPS=4
METRICS = [  # key, label, unit, better when higher
    ("round_trips_per_s", "round trips/s", "", True),
    ("cpu_ms_per_round_trip", "server CPU per round trip", "ms", False),
    ("run_to_request_p50_ms", "run -> request p50", "ms", False),
    ("run_to_request_p99_ms", "run -> request p99", "ms", False),
    ("answer_to_finished_p50_ms", "answer -> finished p50", "ms", False),
    ("answer_to_finished_p99_ms", "answer -> finished p99", "ms", False),
    ("statements_per_round_trip", "statements per round trip", "", False),
    ("write_transactions_per_round_trip", "write transactions per round trip", "", False),
    ("app_cpu_ms_per_round_trip", "  of which the app's processes", "ms", False),
    ("postgresql_cpu_ms_per_round_trip", "  of which PostgreSQL", "ms", False),
    ("redis_cpu_ms_per_round_trip", "  of which Redis", "ms", False),
    ("client_cpu_ms_per_round_trip", "the bench client's CPU per round trip", "ms", False),
    ("machine_busy_percent", "machine busy, all cores", "%", False),
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
    """One app's process under daphne (through bench/counted_asgi.py)."""

    def __init__(self, name, target, env, log_path):
        self.name = name
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
        try:
            wait_for_port(self.process, self.port, log_path)
        except Exception:
            self.close()
            raise
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.headers, self.cookie = {}, None

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


class App:
    """What a block measures: its server processes and the PostgreSQL and Redis servers only they use."""

    def __init__(self, name, servers, services):
        self.name, self.servers, self.services = name, servers, services

    def cpu_seconds(self):
        """{part: CPU seconds so far} for the app's processes ("app"), its "postgresql" and its "redis"."""
        parts = {"app": sum(process_tree_cpu_seconds(server.process.pid) for server in self.servers)}
        parts["postgresql"], parts["redis"] = 0.0, 0.0
        for service in self.services:
            part = "redis" if isinstance(service, RedisServer) else "postgresql"
            parts[part] += process_tree_cpu_seconds(service.process.pid)
        return parts

    async def statements(self):
        counts = [await server.statements() for server in self.servers]
        return {key: sum(count[key] for count in counts) for key in ("statements", "write_transactions")}

    def logs(self):
        for server in self.servers:
            server.log.flush()
            print(
                f"--- the end of {self.name}'s {server.name} log:",
                *server.log_path.read_text().splitlines()[-40:],
                sep="\n",
            )

    def close(self):
        for server in self.servers:
            server.close()
        for service in self.services:
            service.close()


def machine_busy_ticks():
    """(busy, all) clock ticks of every core since boot, from /proc/stat."""
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


def start_consoles(workdir, database, count=1, redis=False, **extra_env):
    """``count`` console processes on one database (a PostgreSQL server of their own, or SQLite) and, with
    ``redis``, one redis-server as their channel layer; migrated, with the reviewer logged in."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    env = console_env(workdir / "console.sqlite3", DJANGO_DEBUG="0", **extra_env)
    services, servers = [], []
    try:
        if database == "postgresql":
            services.append(PostgresServer().start())
            env["DATABASE_URL"] = services[-1].url
        if redis:
            services.append(RedisServer().start())
            env["REDIS_URL"] = services[-1].url
        manage(env, "migrate", "--noinput")
        manage(env, "shell", "-c", CREATE_USERS, "--no-imports")
        collect_static(env)  # DEBUG off: the login page links the collected, hashed names
        token = manage(env, "issue_token", "reviewer", "--name", "bench").strip()
        for number in range(1, count + 1):
            target = "toolnexus_site.asgi:application"
            servers.append(Server(f"console-{number}", target, env, workdir / f"console-{number}.log"))
        session = login_session(servers[0].base_url, "reviewer", REVIEWER_PASSWORD)  # in the database: any process
        for server in servers:
            server.headers = {"Authorization": f"Bearer {token}"}
            server.cookie = f"sessionid={session}"
    except Exception:
        App("console", servers, services).close()
        raise
    return App("console" if count == 1 else f"{count} consoles", servers, services)


def start_thin(workdir, database, steps=2):
    """The thin app; ``steps=4``: the four-step floor, with the console's write transactions and frames."""
    name = "thin" if steps == 2 else "thin, four steps"
    workdir = Path(workdir) / name.replace(", ", "-").replace(" ", "-")
    workdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "THIN_SQLITE_PATH": str(workdir / "thin.sqlite3"), "PYTHONUNBUFFERED": "1"}
    env["THIN_STEPS"] = str(steps)
    env.pop("DATABASE_URL", None)
    services = []
    if database == "postgresql":
        services.append(PostgresServer().start())
        env["DATABASE_URL"] = services[-1].url
    try:
        server = Server(name, "thin_app.thin:application", env, workdir / "thin.log")
    except Exception:
        App(name, [], services).close()
        raise
    return App(name, [server], services)


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


async def block(app, clients, seconds, dashboard_on="other"):
    """``clients`` closed loops for ``seconds`` against ``app``; the block's figures.

    Client i calls ``app``'s process i mod N and waits for its frames on the dashboard socket of
    process i+1 mod N (``dashboard_on="other"``), of its own (``"same"``), or on the one dashboard,
    the first process's (``"first"``); one process: its own.
    """
    count_of = len(app.servers)
    watched = app.servers[:1] if dashboard_on == "first" else app.servers
    dashboards = [await DashboardFrames.open(server) for server in watched]
    shift = 1 if dashboard_on == "other" else 0
    loops = []
    for client in range(clients):
        server = app.servers[client % count_of]
        loops.append((await Http.open(server.port, server.headers), dashboards[(client + shift) % len(dashboards)]))
    for http, dashboard in loops:  # warm: connections, caches, the first run of the tool
        await round_trip(http, dashboard)
    timings = []

    async def loop(http, dashboard, deadline):
        while time.perf_counter() < deadline:
            timings.append(await round_trip(http, dashboard))

    before_statements, before_cpu = await app.statements(), app.cpu_seconds()
    before_client, before_machine = os.times(), machine_busy_ticks()
    began = time.perf_counter()
    await asyncio.gather(*(loop(http, dashboard, began + seconds) for http, dashboard in loops))
    elapsed, cpu, after_client, after_machine = (
        time.perf_counter() - began,
        app.cpu_seconds(),
        os.times(),
        machine_busy_ticks(),
    )
    after_statements = await app.statements()
    for http, _ in loops:
        http.close()
    for dashboard in dashboards:
        await dashboard.close()
    count = len(timings)
    client_cpu = (after_client.user + after_client.system) - (before_client.user + before_client.system)
    return {
        "round_trips": count,
        "round_trips_per_s": count / elapsed,
        "cpu_ms_per_round_trip": (sum(cpu.values()) - sum(before_cpu.values())) * 1000 / count,
        **{f"{part}_cpu_ms_per_round_trip": (cpu[part] - before_cpu[part]) * 1000 / count for part in cpu},
        "run_to_request_p50_ms": percentile([t[0] for t in timings], 0.50),
        "run_to_request_p99_ms": percentile([t[0] for t in timings], 0.99),
        "answer_to_finished_p50_ms": percentile([t[1] for t in timings], 0.50),
        "answer_to_finished_p99_ms": percentile([t[1] for t in timings], 0.99),
        "statements_per_round_trip": (after_statements["statements"] - before_statements["statements"]) / count,
        "write_transactions_per_round_trip": (
            after_statements["write_transactions"] - before_statements["write_transactions"]
        )
        / count,
        "client_cpu_ms_per_round_trip": client_cpu * 1000 / count,
        "machine_busy_percent": 100
        * (after_machine[0] - before_machine[0])
        / max(1, after_machine[1] - before_machine[1]),
    }


# -- the run ----------------------------------------------------------------------------------------


def summary(blocks):
    out = {}
    for key, *_ in METRICS:
        values = [b[key] for b in blocks]
        out[key] = {"median": statistics.median(values), "min": min(values), "max": max(values)}
    return out


async def measure_database(database_name, args, workdir):
    """Every app of ``args`` on ``database_name``, taking turns block by block; {clients: {app: figures}}."""
    apps = []
    try:
        for count in args.consoles:  # each on a PostgreSQL (and Redis) of its own: their CPU kept apart
            redis = args.redis or count > 1
            apps.append(start_consoles(Path(workdir) / f"consoles-{count}", database_name, count, redis))
        apps.append(start_thin(workdir, database_name))
        if args.four_step_floor:
            apps.append(start_thin(workdir, database_name, steps=4))
        results = {}
        for clients in args.clients:
            blocks = {app.name: [] for app in apps}
            for run in range(args.runs):
                turn = apps[run % len(apps) :] + apps[: run % len(apps)]  # none always goes first
                for app in turn:
                    blocks[app.name].append(await block(app, clients, args.seconds, args.dashboard_on))
                    print(
                        f"  {database_name} {clients:>2} clients, run {run + 1}, {app.name}: "
                        f"{blocks[app.name][-1]['round_trips_per_s']:.0f} round trips/s, "
                        f"machine {blocks[app.name][-1]['machine_busy_percent']:.0f}% busy",
                        flush=True,
                    )
            results[clients] = {name: {"runs": runs, **summary(runs)} for name, runs in blocks.items()}
        return results
    except Exception:
        for app in apps:
            app.logs()
        raise
    finally:
        for app in apps:
            app.close()


async def profile_console(workdir, seconds, database="sqlite", redis=False):
    """One client for ``seconds`` against a console whose every thread runs under cProfile; the text."""
    app = start_consoles(workdir, database, redis=redis, BENCH_PROFILE="1")
    server = app.servers[0]
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
        app.close()

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
            floors = [name for name in ("thin", FOUR_STEPS) if name in apps]
            for name, console in apps.items():
                if name == "thin":
                    continue
                beside = [floor for floor in floors if floor != name]
                head = " | ".join(f"{floor} median | ratio" for floor in beside)
                lines.append(f"\n{database}, {clients} client(s): {name} median [min-max] | {head}")
                for key, label, unit, _ in METRICS:
                    row = f"  {label:<38} {console[key]['median']:8.1f}{unit} [{console[key]['min']:.1f}-{console[key]['max']:.1f}]"
                    for floor in beside:
                        other = apps[floor][key]["median"]
                        ratio = console[key]["median"] / other if other else float("nan")
                        row += f" | {other:8.1f}{unit} | {ratio:5.2f}x"
                    lines.append(row)
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each block")
    parser.add_argument("--clients", type=lambda s: [int(c) for c in s.split(",")], default=[1, 4, 16])
    parser.add_argument("--databases", type=lambda s: s.split(","), default=["sqlite", "postgresql"])
    parser.add_argument(
        "--consoles",
        type=lambda s: [int(c) for c in s.split(",")],
        default=[1],
        help="console processes side by side, e.g. 1,2: each count is measured (PostgreSQL only above 1)",
    )
    parser.add_argument("--redis", action="store_true", help="Redis as the channel layer for one console too")
    parser.add_argument(
        "--dashboard-on",
        choices=("other", "same", "first"),
        default="other",
        help="with several consoles: a dashboard socket on each process, each client's frames on the next"
        " process's (other) or its own's (same); or one dashboard socket in all, on the first process (first)",
    )
    parser.add_argument(
        "--four-step-floor",
        action="store_true",
        help=f"also measure '{FOUR_STEPS}': the thin app with the console's four write transactions and frames",
    )
    parser.add_argument("--out", default=str(BENCH / "results" / "roundtrip.json"))
    parser.add_argument(
        "--profile",
        type=float,
        metavar="SECONDS",
        help="instead: profile one console on the first of --databases (give sqlite or postgresql), with --redis",
    )
    args = parser.parse_args()
    if max(args.consoles) > 1 and args.databases != ["postgresql"]:
        parser.error("several consoles share one database: give --databases postgresql (SQLite is one process)")
    if args.profile:
        with tempfile.TemporaryDirectory(prefix="roundtrip-profile-") as workdir:
            database = args.databases[0]  # SQLite unless --databases names another first
            text = asyncio.run(profile_console(workdir, args.profile, database, args.redis))
        suffix = "" if database == "sqlite" and not args.redis else f"-{database}" + ("-redis" if args.redis else "")
        out = BENCH / "results" / f"roundtrip-profile{suffix}.txt"
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
        "consoles": args.consoles,
        "channel_layer": "redis" if args.redis or max(args.consoles) > 1 else "in-memory",
        "dashboard_on": args.dashboard_on,
        "four_step_floor": args.four_step_floor,
        "results": results,
    }
    Path(args.out).parent.mkdir(exist_ok=True)
    Path(args.out).write_text(json.dumps(document, indent=1) + "\n")
    print(f"commit {document['commit']}, {document['machine']}")
    print(report(results))


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
