"""Many runs waiting at once in one console process: memory per waiting run, time to open them all.

    .venv/bin/python bench/waiting_runs.py -n 10000              # RSS per run, seconds to open, to resume
    .venv/bin/python bench/waiting_runs.py -n 200 --baseline-runs 200 --tracemalloc  # the Python heap's share, and where
    .venv/bin/python bench/waiting_runs.py -n 10000 --profile var/open.prof --no-resume
    .venv/bin/python bench/waiting_runs.py -n 1000 --baseline-runs 200 --tracemalloc --database postgresql

One process, Django set up on a fresh SQLite file (CONSOLE_SQLITE_PATH), or with ``--database
postgresql`` on a PostgreSQL server the bench starts (and stops) for itself, and migrated,
the run supervisor started as daphne starts it. After one warm-up run, N runs of
``bench_suspend`` (bench/bench_tools.py) are started one after another with
``runner.start_run``; "open" is when every one of them is parked in
``wait_for_stored_answer`` and the database says it is waiting. Memory per waiting
run is the growth of the process's resident set (VmRSS) over those N runs, divided
by N, after a ``gc.collect()``; ``--tracemalloc`` measures the Python heap instead
(tracemalloc's own bookkeeping inflates RSS and slows opening sevenfold, so the two are
separate runs; ``--baseline-runs`` leaves fixed costs out by starting that many runs before
the baseline). Then every
request is answered through ``decisions.resolve_request`` and the bench waits until
every run has resumed and succeeded (nothing lost). Every wait has a deadline
(--timeout); ``--json`` prints one JSON object for bench/realtime.py.
"""

import argparse
import asyncio
import gc
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

POLL_SECONDS = 0.05  # how often the bench itself looks whether all runs are parked (not the console's poll)


def rss_kib():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def setup_django(db_path):
    os.environ["DJANGO_SETTINGS_MODULE"] = "toolnexus_site.settings"
    os.environ["CONSOLE_SQLITE_PATH"] = str(db_path)
    os.environ["TOOLNEXUS_TOOL_MODULES"] = "bench.bench_tools"
    # As its figures were measured: with DEBUG's query log, then without it (DEBUG is off by default now).
    os.environ.setdefault("DJANGO_DEBUG", "1")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from django.db import connection

    # As in daphne, no connection stays open between database calls (CONN_MAX_AGE = 0).
    connection.close()


async def until(condition, deadline, what):
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        await asyncio.sleep(POLL_SECONDS)


async def measure(count, *, timeout, trace, resume, profile, baseline_runs=0):
    from channels.db import database_sync_to_async

    from approvals.models import Run, RunStatus
    from approvals.review import decisions
    from approvals.runs import runner

    def waiting_count():
        return Run.objects.filter(status=RunStatus.WAITING).count()

    def outcome():
        runs = Run.objects.exclude(pk__in=warm_ids)
        succeeded = runs.filter(status=RunStatus.SUCCEEDED, result_output__contains="resumed_ns").count()
        return succeeded, runs.count()

    sup = await runner.ensure_started()
    deadline = time.monotonic() + timeout
    warm = await runner.start_run(tool="bench_suspend", args={"round": -1})
    await until(lambda: len(sup.waiters) == 1, deadline, "the warm-up run to wait")
    await decisions.aresolve_request(next(iter(sup.waiters)), ok=True, actor="bench")
    await asyncio.wait_for(runner.wait_for_run(warm.pk), max(0.1, deadline - time.monotonic()))
    warm_ids = [warm.pk]
    for i in range(baseline_runs):  # waiting before the baseline: what is measured is the cost of one more
        await runner.start_run(tool="bench_suspend", args={"round": -2 - i})
    await until(lambda: len(sup.waiters) >= baseline_runs, deadline, f"{baseline_runs} baseline runs to wait")

    gc.collect()
    if trace:
        import tracemalloc

        tracemalloc.start(8)
        before_snapshot = tracemalloc.take_snapshot()
    rss_before = rss_kib()
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()

    began = time.perf_counter()
    marks = []  # seconds since the first start_run at every tenth of the runs: does opening slow down as they pile up?
    for i in range(count):
        await runner.start_run(tool="bench_suspend", args={"round": i})
        if (i + 1) % max(1, count // 10) == 0:
            marks.append(round(time.perf_counter() - began, 2))
    started = time.perf_counter()
    await until(
        lambda: len(sup.waiters) >= baseline_runs + count,
        deadline,
        f"{count} runs to wait (got {len(sup.waiters) - baseline_runs})",
    )
    parked = time.perf_counter()
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    in_db = await database_sync_to_async(waiting_count)()

    gc.collect()
    rss_after = rss_kib()
    result = {
        "runs": count,
        "baseline_runs": baseline_runs,
        "start_run_seconds": started - began,
        "open_seconds": parked - began,
        "runs_opened_per_second": count / (parked - began),
        "waiting_in_database": in_db - baseline_runs,
        "rss_before_kib": rss_before,
        "rss_after_kib": rss_after,
        "rss_kib_per_run": (rss_after - rss_before) / count,
        "tasks": len(sup.tasks),
        "started_seconds_at_each_tenth": marks,
    }
    if trace:
        after_snapshot = tracemalloc.take_snapshot()
        traced = sum(s.size_diff for s in after_snapshot.compare_to(before_snapshot, "filename"))
        result["traced_kib_per_run"] = traced / 1024 / count
        # DEBUG keeps the last 9,000 SQL statements per database thread: bounded, not per run.
        debug_log = [
            tracemalloc.Filter(False, "*/django/db/backends/utils.py"),
            tracemalloc.Filter(False, "*/django/db/backends/*/operations.py"),  # last_executed_query
        ]
        without_log = after_snapshot.filter_traces(debug_log).compare_to(
            before_snapshot.filter_traces(debug_log), "filename"
        )
        result["traced_kib_per_run_without_debug_query_log"] = sum(s.size_diff for s in without_log) / 1024 / count
        result["traced_top"] = [
            {
                "where": str(s.traceback[0]),
                "kib_per_run": s.size_diff / 1024 / count,
                "blocks_per_run": s.count_diff / count,
            }
            for s in after_snapshot.compare_to(before_snapshot, "lineno")[:15]
        ]
        # The same growth charged to the console's own line that led to it (the innermost frame under
        # approvals/ among the 8 kept): which of its objects a waiting run holds, whoever allocated them.
        by_line = {}
        for stat in after_snapshot.compare_to(before_snapshot, "traceback"):
            ours = [str(frame) for frame in stat.traceback if "/approvals/" in frame.filename]
            where = ours[-1].split("/approvals/", 1)[-1] if ours else "(no console frame)"
            where = "approvals/" + where if ours else where
            size, blocks = by_line.get(where, (0, 0))
            by_line[where] = (size + stat.size_diff, blocks + stat.count_diff)
        result["traced_top_console_lines"] = [
            {"where": where, "kib_per_run": size / 1024 / count, "blocks_per_run": blocks / count}
            for where, (size, blocks) in sorted(by_line.items(), key=lambda kv: -kv[1][0])[:15]
        ]
        tracemalloc.stop()

    if resume:
        resuming = time.perf_counter()
        waiting = list(sup.waiters)
        for request_id in waiting:
            await decisions.aresolve_request(request_id, ok=True, actor="bench")
        answered = time.perf_counter()
        await until(lambda: not sup.tasks, deadline, f"every run to resume ({len(sup.tasks)} still going)")
        done = time.perf_counter()
        succeeded, total = await database_sync_to_async(outcome)()
        result.update(
            {
                "answer_all_seconds": answered - resuming,
                "resume_all_seconds": done - resuming,
                "resumed_per_second": len(waiting) / (done - resuming),
                "succeeded": succeeded,
                "lost": total - succeeded,
            }
        )
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds for the whole measurement (default 240)")
    parser.add_argument("--tracemalloc", action="store_true", help="measure the Python heap per run instead of timing")
    parser.add_argument(
        "--baseline-runs",
        type=int,
        default=0,
        help="runs already waiting before the baseline is taken (the cost of one more, without fixed costs)",
    )
    parser.add_argument("--no-resume", dest="resume", action="store_false", help="do not answer the runs at the end")
    parser.add_argument("--profile", help="write a cProfile of opening the runs to this file")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    options = parser.parse_args()

    postgres = None
    if options.database == "postgresql":
        from tests.support.services import PostgresServer

        postgres = PostgresServer().start()
        os.environ["DATABASE_URL"] = postgres.url
    try:
        with tempfile.TemporaryDirectory(prefix="waiting-runs-") as folder:
            setup_django(Path(folder) / "bench.sqlite3")
            asyncio.run(measure_and_report(options, folder, postgres))
    finally:
        if postgres is not None:
            postgres.close()


async def measure_and_report(options, folder, postgres=None):
    result = await measure(
        options.runs,
        timeout=options.timeout,
        trace=options.tracemalloc,
        resume=options.resume,
        profile=options.profile,
        baseline_runs=options.baseline_runs,
    )
    if options.json:
        print(json.dumps(result), flush=True)
    else:
        report(result)
    if not options.resume:
        # Leave them waiting: ending the event loop would cancel every run, and each would withdraw its request.
        sys.stdout.flush()
        shutil.rmtree(folder, ignore_errors=True)
        if postgres is not None:
            postgres.close()
        os._exit(0)


def report(result):
    print(
        f"{result['runs']:,} runs waiting at once: opened in {result['open_seconds']:.1f} s "
        f"({result['runs_opened_per_second']:.0f}/s; start_run calls {result['start_run_seconds']:.1f} s), "
        f"{result['waiting_in_database']:,} waiting in the database"
    )
    print(f"  start_run calls done at each tenth: {result['started_seconds_at_each_tenth']} s")
    print(
        f"  RSS {result['rss_before_kib'] / 1024:.0f} -> {result['rss_after_kib'] / 1024:.0f} MiB: "
        f"{result['rss_kib_per_run']:.1f} KiB per waiting run"
    )
    if "traced_kib_per_run" in result:
        print(
            f"  Python heap (tracemalloc): {result['traced_kib_per_run']:.1f} KiB per waiting run, "
            f"{result['traced_kib_per_run_without_debug_query_log']:.1f} KiB without DEBUG's query log; largest growth:"
        )
        for row in result["traced_top"]:
            print(f"    {row['kib_per_run']:6.2f} KiB {row['blocks_per_run']:5.1f} blocks  {row['where']}")
        print("  the same, by the console's innermost line that led to it:")
        for row in result["traced_top_console_lines"]:
            print(f"    {row['kib_per_run']:6.2f} KiB {row['blocks_per_run']:5.1f} blocks  {row['where']}")
    if "resume_all_seconds" in result:
        print(
            f"  answered all in {result['answer_all_seconds']:.1f} s, all resumed in {result['resume_all_seconds']:.1f} s "
            f"({result['resumed_per_second']:.0f}/s); succeeded {result['succeeded']:,}, lost {result['lost']}"
        )


if __name__ == "__main__":
    main()
