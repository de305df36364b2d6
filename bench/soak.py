"""The soak (issue 27): two consoles on PostgreSQL and Redis under steady work, one killed every 30 s.

    .venv/bin/python bench/soak.py                                # 5 minutes, a kill every 30 s
    .venv/bin/python bench/soak.py --duration 600 --kill-every 60 --requests-per-second 4 --runs-per-second 1

Starts a redis-server, a PostgreSQL and two consoles on loopback (tests/cluster/harness.py, the way
``make run-cluster`` starts them), then runs tests/cluster/soak.py's driver: hosts opening requests and
long-polling their answers, runs of a tool that records each execution, two reviewers answering
through the API 1-3 s after a request appears, a dashboard socket on each console, and one console
killed with SIGKILL and started again every ``--kill-every`` seconds. Prints a summary, writes
bench/results/soak.json, and exits 1 when any check is not 0 (docs/operations.md, "Soak").
"""

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.cluster.harness import Cluster, ClusterTemplate  # noqa: E402
from tests.cluster.soak import Soak, SoakPlan, summary  # noqa: E402
from tests.support.services import PostgresServer, RedisServer  # noqa: E402

RESULTS = REPO / "bench" / "results" / "soak.json"
# As tests/cluster/test_soak.py: a killed console is seen by its pid at the next beat.
ENV = {"CONSOLE_HEARTBEAT_SECONDS": "0.5", "CONSOLE_HEARTBEAT_TIMEOUT_SECONDS": "5"}


def parse_args():
    plan = SoakPlan()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=plan.duration, help="seconds of work (default %(default)s)")
    parser.add_argument("--kill-every", type=float, default=plan.kill_every, help="seconds (default %(default)s)")
    parser.add_argument("--requests-per-second", type=float, default=plan.requests_per_second)
    parser.add_argument("--runs-per-second", type=float, default=plan.runs_per_second)
    parser.add_argument("--settle", type=float, default=plan.settle_seconds, help="at most, seconds")
    parser.add_argument(
        "--heartbeat-timeout",
        type=float,
        default=float(ENV["CONSOLE_HEARTBEAT_TIMEOUT_SECONDS"]),
        help="seconds of silence before a console is taken for dead; shorter takes busy live ones too (default %(default)s)",
    )
    parser.add_argument("--output", type=Path, default=RESULTS)
    return parser.parse_args()


def main():
    args = parse_args()
    plan = SoakPlan(
        duration=args.duration,
        kill_every=args.kill_every,
        requests_per_second=args.requests_per_second,
        runs_per_second=args.runs_per_second,
        settle_seconds=args.settle,
    )
    redis_server, postgres = RedisServer().start(), PostgresServer().start()
    cluster, workdir = None, Path(tempfile.mkdtemp(prefix="console-soak-"))
    try:
        template = ClusterTemplate.create(postgres)
        env = {**ENV, "CONSOLE_HEARTBEAT_TIMEOUT_SECONDS": str(args.heartbeat_timeout)}
        cluster = Cluster(template, redis_server.url, workdir, database="soak", env=env).start()
        result = asyncio.run(Soak(cluster, plan, "soak", redis_server.url).run())
        result["console_env"] = env
    finally:
        if cluster is not None:
            cluster.close()
        postgres.close()
        redis_server.close()
        shutil.rmtree(workdir, ignore_errors=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(summary(result))
    print(f"wrote {args.output}")
    failed = {name: count for name, count in result["checks"].items() if count}
    if failed:
        print(f"FAILED: {failed}; details in {args.output}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
