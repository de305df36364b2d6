"""Realtime benchmarks of the embedded console, each beside the raw ``websockets`` floor measured in the same run.

    .venv/bin/python bench/realtime.py            # all of them (~3½ min); bench/results/realtime.{json,png}
    .venv/bin/python bench/realtime.py --quick    # fewer rounds and runs: a smoke run (~1 min)

Against a real daphne on a fresh SQLite file (tests/support/live_console.py), with the tools
of bench/bench_tools.py and the console's default settings, dashboards being
``/ws/console/`` sockets logged in as the reviewer (bench/dashboards.py):

- suspension -> dashboard: a tool returns ``pending(...)`` -> its request.opened frame arrives;
- answer -> resumed: the dashboard sends the answer frame -> the tool's §10 retry starts;
- cancel -> observed: the dashboard sends cancel_run -> an async tool (``await signal.wait()``)
  and a sync one (``signal.wait_blocking``) see the trip;
- fan-out: one request.opened event to 100 dashboards;
- answers/s: runs wait, reviewers answer them all through the API, each answer resumes its
  run; on SQLite and on PostgreSQL (tests/support/services.py; fsync off there, see docs/benchmarks.md);

and in one process, 1,000 and 10,000 runs waiting at once (bench/waiting_runs.py): memory
per waiting run, time to open them all. The floor (bench/echo_floor.py) is a raw
``websockets`` echo server in its own process: the round trip of a frame the size of a
request.opened frame, and the push of one frame to 1 and to 100 clients.

Prints a table (target / measured / pass), writes every number with the machine it ran
on to bench/results/realtime.json and a chart to bench/results/realtime.png. Benchmarks,
not tests: exits 1 when a target is missed, and ``make bench`` goes on.
"""

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import platform
import re
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

import live_measurements as live_bench  # noqa: E402
from dashboards import ApiClient, Dashboard, login_session  # noqa: E402
from echo_floor import broadcast_arrivals, echo_server, round_trips  # noqa: E402
from longpoll import percentile  # noqa: E402

RESULTS = BENCH / "results"
REVIEWER = ("reviewer", "live-Reviewer-pass-5521")  # the user tests/support/live_console.py creates
# DEBUG off, as a deployment runs it (DEBUG keeps every query's SQL and parameters).
TOOLS_ENV = {"TOOLNEXUS_TOOL_MODULES": "bench.bench_tools", "PYTHONPATH": str(REPO), "DJANGO_DEBUG": "0"}
WAITING_RUNS_SECONDS = 300  # per bench/waiting_runs.py process

FULL = {
    "rounds": 300,
    "cancel_rounds": 150,
    "fanout_sockets": 100,
    "fanout_rounds": 30,
    "answer_runs": 300,
    "answer_clients": 8,
    "pg_rounds": 100,
    "echo_rounds": 2000,
    "waiting": (1000, 10_000),
    "traced_runs": 200,
}
QUICK = {
    "rounds": 40,
    "cancel_rounds": 30,
    "fanout_sockets": 100,
    "fanout_rounds": 5,
    "answer_runs": 100,
    "answer_clients": 8,
    "pg_rounds": 20,
    "echo_rounds": 300,
    "waiting": (1000,),
    "traced_runs": 100,
}
ANSWER_PHASE_SECONDS = 120.0
QUIET_BUSY = 0.15  # the machine is quiet when less than this share of its CPU time is busy

# (key in results, statistic, limit, unit, what the issue asks): benchmarks, not tests.
TARGETS = [
    ("suspension_to_dashboard", "p99", 25.0, "ms", "suspension -> dashboard p99 under 25 ms"),
    ("suspension_to_dashboard", "p99_over_echo_p99", 20.0, "x", "... and within 20x the raw echo"),
    ("answer_to_resumed", "p99", 25.0, "ms", "answer -> resumed p99 under 25 ms"),
    ("cancel_async", "p99", 10.0, "ms", "cancel -> observed by an async tool under 10 ms"),
    ("fan_out_100", "p99", 100.0, "ms", "fan-out to 100 dashboards p99 under 100 ms"),
    ("waiting_10000", "rss_kib_per_run", 20.0, "KiB", "10,000 waiting runs under 20 KiB each"),
    ("lost", "total", 0, "", "nothing lost"),
]


def cpu_busy(seconds=1.0):
    """The fraction of the machine's CPU time spent busy over ``seconds`` (/proc/stat), None if unknown."""

    def totals():
        with open("/proc/stat") as stat:
            values = [int(v) for v in stat.readline().split()[1:]]
        return sum(values), values[3] + values[4]  # all, idle + iowait

    try:
        all_before, idle_before = totals()
        time.sleep(seconds)
        all_after, idle_after = totals()
    except OSError:
        return None
    return 1 - (idle_after - idle_before) / max(1, all_after - all_before)


def settle(phase, results, max_wait):
    results.setdefault("phase_started", {})[phase] = time.monotonic()
    """Before a phase: wait (at most ``max_wait`` s) for the machine to be quiet, and note how busy it was.

    Other processes on a 2-core machine move every number here; the JSON says how loaded it was.
    """
    waited, busy = 0.0, cpu_busy()
    while busy is not None and busy > QUIET_BUSY and waited < max_wait:
        waited += 1.0
        busy = cpu_busy()
    results.setdefault("load", {})[phase] = {
        "cpu_busy_before": busy,
        "waited_seconds": waited,
        "loadavg_1min": os.getloadavg()[0],
    }
    if busy is not None and busy > QUIET_BUSY:
        print(
            f"  note: the machine is {busy:.0%} busy with other work before {phase}; numbers will be worse", flush=True
        )


def summary(samples):
    if not samples:
        return {"n": 0}
    return {
        "n": len(samples),
        "p50": percentile(samples, 0.50),
        "p90": percentile(samples, 0.90),
        "p99": percentile(samples, 0.99),
        "max": max(samples),
        "mean": statistics.mean(samples),
        "samples_ms": [round(s, 3) for s in samples],
    }


def machine():
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")), "")
    memory = (
        next(
            (
                line.split()[1]
                for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal:")
            ),
            "0",
        )
        if Path("/proc/meminfo").exists()
        else "0"
    )
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    return {
        "cpu": model or platform.processor(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gib": round(int(memory) / 1024 / 1024, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": commit,
    }


@contextlib.contextmanager
def console(**env):
    """A live console (daphne, fresh database, the bench tools) with a dashboard session and a host client."""
    from tests.support.live_console import live_console

    with tempfile.TemporaryDirectory(prefix="realtime-bench-") as workdir:
        with live_console(workdir, Path(workdir) / "daphne.log", **{**TOOLS_ENV, **env}) as live:
            session = login_session(live.base_url, *REVIEWER)
            api = ApiClient(live.base_url, live.host_token)
            try:
                yield live, session, api
            finally:
                api.close()


async def measure_live(live, session, api, plan, *, everything=True):
    dashboard = await Dashboard.open(live.base_url, session)
    try:
        await live_bench.suspension_and_answer(dashboard, api, 5)  # warm-up: imports, toolkit, first queries
        found = {}
        timed = await live_bench.suspension_and_answer(
            dashboard, api, plan["rounds"] if everything else plan["pg_rounds"]
        )
        found["suspension_to_dashboard"] = summary(timed["to_dashboard"])
        found["answer_to_resumed"] = summary(timed["to_resumed"])
        found["frame_bytes"] = timed["frame_bytes"]
        found["lost_in_latency_rounds"] = timed["lost"]
        if everything:
            for key, tool in (("cancel_async", "bench_cancel_async"), ("cancel_sync", "bench_cancel_sync")):
                await live_bench.cancel_observed(dashboard, api, tool, 3)
                cancelled = await live_bench.cancel_observed(dashboard, api, tool, plan["cancel_rounds"])
                found[key] = {
                    **summary(cancelled["samples"]),
                    "lost": cancelled["lost"],
                    "not_parked": cancelled["not_parked"],
                }
            fanned = await live_bench.fan_out(
                live.base_url, session, dashboard, api, plan["fanout_sockets"], plan["fanout_rounds"]
            )
            found["fan_out_100"] = {
                **summary(fanned["arrivals"]),
                "slowest_per_round": summary(fanned["slowest_per_round"]),
                "sockets": plan["fanout_sockets"],
                "rounds": plan["fanout_rounds"],
                "connect_seconds": fanned["connect_seconds"],
                "lost": fanned["lost"],
            }
        answered = await live_bench.answers_per_second(
            live.base_url,
            dashboard,
            api,
            live.reviewer_token,
            plan["answer_runs"],
            plan["answer_clients"],
            ANSWER_PHASE_SECONDS,
        )
        answered["answer_call_ms"] = summary(answered["answer_call_ms"])
        found["answers"] = answered
        return found
    finally:
        await dashboard.close()


async def measure_floor(payload_bytes, plan, fanout_sockets):
    payload = "x" * payload_bytes
    with echo_server() as url:
        echo = await round_trips(url, payload, plan["echo_rounds"])
        push, _ = await broadcast_arrivals(url, payload, 1, 200)
        fanned, connect_seconds = await broadcast_arrivals(url, payload, fanout_sockets, plan["fanout_rounds"])
    return {
        "payload_bytes": payload_bytes,
        "echo_round_trip": summary(echo),
        "push_to_1": summary(push),
        "push_to_100": {**summary(fanned), "connect_seconds": connect_seconds},
    }


def waiting_runs(count, *extra):
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "waiting_runs.py"),
            "-n",
            str(count),
            "--json",
            "--timeout",
            str(WAITING_RUNS_SECONDS - 20),
            *extra,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=WAITING_RUNS_SECONDS,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(
            f"waiting_runs.py -n {count} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        )
    return json.loads(lines[-1])


def phase_seconds(started):
    marks = sorted(started.items(), key=lambda item: item[1]) + [("end", time.monotonic())]
    return {name: round(after - at, 1) for (name, at), (_, after) in zip(marks, marks[1:])}


def with_ratios(results):
    floor = results["floor"]
    echo = floor["echo_round_trip"]
    for key, against in (
        ("suspension_to_dashboard", echo),
        ("answer_to_resumed", echo),
        ("cancel_async", echo),
        ("cancel_sync", echo),
        ("fan_out_100", floor["push_to_100"]),
    ):
        row = results["sqlite"].get(key)
        if row and row.get("n"):
            row["p50_over_floor_p50"] = row["p50"] / against["p50"]
            row["p99_over_floor_p99"] = row["p99"] / against["p99"]
    row = results["sqlite"]["suspension_to_dashboard"]
    row["p99_over_echo_p99"] = row["p99"] / echo["p99"]
    lost = 0
    for part in (results["sqlite"], results.get("postgresql") or {}):
        lost += part.get("lost_in_latency_rounds", 0)
        for key in ("cancel_async", "cancel_sync", "fan_out_100", "answers"):
            lost += (part.get(key) or {}).get("lost", 0)
    for row in results["waiting"].values():
        lost += row.get("lost", 0)
    results["lost"] = {"total": lost}
    return results


def verdicts(results):
    rows = []
    for key, statistic, limit, unit, label in TARGETS:
        source = results["sqlite"].get(key) or results["waiting"].get(key) or results.get(key)
        value = source.get(statistic) if source else None
        passed = value is not None and (value <= limit if limit else value == 0)
        rows.append({"target": label, "limit": limit, "unit": unit, "measured": value, "pass": passed})
    return rows


def print_table(results):
    sqlite, floor = results["sqlite"], results["floor"]
    echo = floor["echo_round_trip"]
    print(
        f"\nmachine: {results['machine']['cpu']}, {results['machine']['cores']} cores, "
        f"Python {results['machine']['python']}, {results['machine']['date']}"
    )
    print(f"\n{'latency (ms)':44s} {'p50':>8s} {'p99':>8s} {'x floor p50':>12s} {'x floor p99':>12s}")
    rows = [
        ("floor: raw websockets echo round trip", echo, None),
        ("floor: raw push to 1 client", floor["push_to_1"], None),
        ("floor: raw push to 100 clients", floor["push_to_100"], None),
        ("suspension -> dashboard", sqlite["suspension_to_dashboard"], True),
        ("answer -> tool resumed", sqlite["answer_to_resumed"], True),
        ("cancel -> observed, async tool", sqlite["cancel_async"], True),
        ("cancel -> observed, sync tool", sqlite["cancel_sync"], True),
        ("one event -> 100 dashboards (each)", sqlite["fan_out_100"], True),
        ("one event -> 100 dashboards (slowest)", sqlite["fan_out_100"]["slowest_per_round"], None),
    ]
    pg = results.get("postgresql")
    if pg:
        rows += [
            ("PostgreSQL: suspension -> dashboard", pg["suspension_to_dashboard"], None),
            ("PostgreSQL: answer -> tool resumed", pg["answer_to_resumed"], None),
        ]
    for label, row, ratios in rows:
        extra = (
            f"{row['p50_over_floor_p50']:11.0f}x {row['p99_over_floor_p99']:11.0f}x"
            if ratios and "p50_over_floor_p50" in row
            else ""
        )
        print(f"{label:44s} {row['p50']:8.2f} {row['p99']:8.2f} {extra}")
    print()
    for name, part in (("SQLite", sqlite), ("PostgreSQL", pg)):
        if part:
            a = part["answers"]
            print(
                f"answers, {name:10s}: {a['answers_per_second']:6.0f}/s answered, {a['resumed_per_second']:6.0f}/s resumed "
                f"({a['answered']} answers from {a['clients']} clients; answer call p50 "
                f"{a['answer_call_ms']['p50']:.1f} ms, p99 {a['answer_call_ms']['p99']:.1f} ms; "
                f"{a['runs'] / a['opened_seconds']:.0f} runs/s opened)"
            )
    for key, row in results["waiting"].items():
        if key.startswith("waiting_"):
            traced = results["waiting"].get("tracemalloc", {})
            print(
                f"{row['runs']:>6,} runs waiting in one process: {row['rss_kib_per_run']:.1f} KiB RSS each, "
                f"opened in {row['open_seconds']:.1f} s ({row['runs_opened_per_second']:.0f}/s)"
                + (f", all resumed in {row['resume_all_seconds']:.1f} s, lost {row['lost']}" if "lost" in row else "")
                + (
                    f"; Python heap {traced['traced_kib_per_run']:.1f} KiB each (tracemalloc, {traced['runs']:,})"
                    if traced and key == "waiting_1000"
                    else ""
                )
            )
    print(f"\n{'target':48s} {'measured':>12s}  pass")
    for row in results["verdicts"]:
        value = "-" if row["measured"] is None else f"{row['measured']:.2f} {row['unit']}".strip()
        print(f"{row['target']:48s} {value:>12s}  {'yes' if row['pass'] else 'NO'}")


def write_json(results, path):
    """Indented, with each list of numbers (the raw samples) on one line."""
    text = json.dumps(results, indent=1)
    text = re.sub(
        r"\[([-0-9.eE,\s]+)\]", lambda m: "[" + ", ".join(v.strip() for v in m.group(1).split(",")) + "]", text
    )
    path.write_text(text + "\n")


def chart(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sqlite, floor = results["sqlite"], results["floor"]
    bars = [
        ("raw echo\nround trip", floor["echo_round_trip"], None),
        ("raw push\nto 100", floor["push_to_100"], None),
        ("suspension\n-> dashboard", sqlite["suspension_to_dashboard"], 25.0),
        ("answer\n-> resumed", sqlite["answer_to_resumed"], 25.0),
        ("cancel ->\nasync tool", sqlite["cancel_async"], 10.0),
        ("cancel ->\nsync tool", sqlite["cancel_sync"], None),
        ("fan-out\nto 100", sqlite["fan_out_100"], 100.0),
    ]
    figure, (latency, memory, throughput) = plt.subplots(
        1, 3, figsize=(15, 5.2), gridspec_kw={"width_ratios": [3.2, 1, 1.2]}
    )
    xs = range(len(bars))
    latency.bar([x - 0.2 for x in xs], [b[1]["p50"] for b in bars], 0.4, label="p50", color="#4c78a8")
    latency.bar([x + 0.2 for x in xs], [b[1]["p99"] for b in bars], 0.4, label="p99", color="#f58518")
    for x, (_, _, target) in zip(xs, bars):
        if target is not None:
            latency.hlines(target, x - 0.45, x + 0.45, colors="#d62728", linestyles="solid", linewidth=2)
    latency.axhline(
        floor["echo_round_trip"]["p99"], color="grey", linestyle="--", linewidth=1, label="raw echo p99 (floor)"
    )
    latency.plot([], [], color="#d62728", linewidth=2, label="target (p99)")
    latency.set_yscale("log")
    latency.set_xticks(list(xs), [b[0] for b in bars], fontsize=8)
    latency.set_ylabel("ms (log scale)")
    latency.set_title("Latency, embedded default (SQLite, in-memory layer)")
    latency.legend(fontsize=8, loc="upper left")

    waiting = [
        (f"{row['runs']:,}", row["rss_kib_per_run"])
        for key, row in results["waiting"].items()
        if key.startswith("waiting_")
    ]
    memory.bar([w[0] for w in waiting], [w[1] for w in waiting], color="#54a24b", label="RSS growth")
    traced = results["waiting"].get("tracemalloc")
    if traced:
        label, heap = f"{traced['runs']:,}\n(Python heap)", traced["traced_kib_per_run_without_debug_query_log"]
        memory.bar([label], [heap], color="#9ecae9", label="Python heap (tracemalloc)")
        memory.bar(
            [label],
            [traced["traced_kib_per_run"] - heap],
            bottom=[heap],
            color="#dddddd",
            hatch="//",
            label="+ DEBUG's query log (bounded)",
        )
    memory.axhline(20.0, color="#d62728", linewidth=2, label="target: 20 KiB")
    memory.set_ylabel("KiB per waiting run")
    memory.set_title("Runs waiting in one process")
    memory.legend(fontsize=8)

    names = [("SQLite", sqlite.get("answers"))] + [("PostgreSQL", (results.get("postgresql") or {}).get("answers"))]
    names = [(n, a) for n, a in names if a]
    xs = range(len(names))
    throughput.bar(
        [x - 0.2 for x in xs], [a["answers_per_second"] for _, a in names], 0.4, label="answered/s", color="#4c78a8"
    )
    throughput.bar(
        [x + 0.2 for x in xs], [a["resumed_per_second"] for _, a in names], 0.4, label="runs resumed/s", color="#72b7b2"
    )
    throughput.set_xticks(list(xs), [n for n, _ in names])
    throughput.set_title("Answers through the API")
    throughput.legend(fontsize=8)

    m = results["machine"]
    figure.suptitle(
        f"toolnexus console realtime benchmarks: {m['cpu']}, {m['cores']} cores, Python {m['python']}, {m['date'][:10]}",
        fontsize=10,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and runs: a smoke run")
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL part")
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=30.0,
        help="before each part, wait up to this many seconds for other work on the machine to stop (default 30)",
    )
    parser.add_argument(
        "--replot", action="store_true", help="measure nothing: redraw the chart and the table from the JSON"
    )
    parser.add_argument("--output", type=Path, default=RESULTS, help="where the JSON and the PNG go")
    options = parser.parse_args()
    if options.replot:
        results = json.loads((options.output / "realtime.json").read_text())
        chart(results, options.output / "realtime.png")
        print_table(results)
        return 0
    plan = QUICK if options.quick else FULL
    began = time.monotonic()
    results = {"machine": machine(), "plan": plan}

    print("live console on SQLite: latencies, cancels, fan-out, answers/s ...", flush=True)
    settle("sqlite", results, options.quiet_wait)
    with console() as (live, session, api):
        results["sqlite"] = asyncio.run(measure_live(live, session, api, plan))
    print("the raw websockets floor ...", flush=True)
    settle("floor", results, options.quiet_wait)
    results["floor"] = asyncio.run(measure_floor(results["sqlite"]["frame_bytes"], plan, plan["fanout_sockets"]))
    results["postgresql"] = None
    if not options.no_postgres:
        from tests.support.services import PostgresServer, ServiceError

        print("live console on PostgreSQL: latencies, answers/s ...", flush=True)
        try:
            server = PostgresServer(durable=True).start()  # fsync on, as a deployment runs it
        except (ServiceError, OSError) as exc:
            print(f"  skipped: {exc}")
        else:
            try:
                settle("postgresql", results, options.quiet_wait)
                with console(DATABASE_URL=server.url) as (live, session, api):
                    results["postgresql"] = asyncio.run(measure_live(live, session, api, plan, everything=False))
            finally:
                server.close()
    results["waiting"] = {}
    for count in plan["waiting"]:
        print(f"{count:,} runs waiting in one process ...", flush=True)
        settle(f"waiting_{count}", results, options.quiet_wait)
        extra = () if count <= 1000 else ("--no-resume",)  # resuming 10,000 one by one doubles the time
        results["waiting"][f"waiting_{count}"] = waiting_runs(count, *extra)
    print(f"{plan['traced_runs']:,} waiting runs under tracemalloc ...", flush=True)
    settle("tracemalloc", results, options.quiet_wait)
    results["waiting"]["tracemalloc"] = waiting_runs(
        plan["traced_runs"], "--tracemalloc", "--no-resume", "--baseline-runs", str(plan["traced_runs"])
    )
    results["phase_seconds"] = phase_seconds(results.pop("phase_started"))

    results = with_ratios(results)
    results["verdicts"] = verdicts(results)
    results["seconds"] = time.monotonic() - began
    options.output.mkdir(parents=True, exist_ok=True)
    write_json(results, options.output / "realtime.json")
    chart(results, options.output / "realtime.png")
    print_table(results)
    print(f"\nwrote {options.output / 'realtime.json'} and realtime.png in {results['seconds']:.0f} s")
    return 0 if all(row["pass"] for row in results["verdicts"]) else 1


if __name__ == "__main__":
    sys.exit(main())
