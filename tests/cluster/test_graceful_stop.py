"""A console stopped with SIGTERM (approvals/runs/shutdown.py) and the health probes with Redis or
PostgreSQL really stopped (approvals/web/health.py): real daphne processes on PostgreSQL and Redis.

A client's calls (start a run, answer it) go through nginx with the shipped deploy/nginx.conf in
front of both consoles (tests/support/proxy.py), as they would in production.
"""

import re
import signal
import time

import pytest

from tests.cluster.harness import Cluster, ClusterTemplate, eventually
from tests.support.services import PostgresServer, RedisServer

DRAIN_SECONDS = 3.0
GRACE_SECONDS = 1.0
STOP_BOUND_SECONDS = 15.0  # the drain, the grace, a tool's stop grace and the exit, on a loaded machine


@pytest.fixture(scope="module")
def cluster_options():
    return {
        "env": {
            "CONSOLE_SHUTDOWN_DRAIN_SECONDS": str(DRAIN_SECONDS),
            "CONSOLE_SHUTDOWN_GRACE_SECONDS": str(GRACE_SECONDS),
        }
    }


def readiness(member):
    try:
        return member.call("GET", "/readyz", timeout=5)
    except OSError:  # not listening (any more)
        return None, None


def health(member):
    return member.call("GET", "/healthz", timeout=5)


def owner(cluster, run_id):
    owner_id = cluster.owner_of(run_id)
    return next(m for m in cluster.members if m.process_id == owner_id)


def executed(records):
    """(pid, answered?) of each execution, in order."""
    return [(r["pid"], r["answer"] is not None) for r in records]


# -- SIGTERM ----------------------------------------------------------------------------------------


async def test_sigterm_hands_a_waiting_run_to_the_other_console_and_an_answer_resumes_it_there(cluster, front, label):
    first, second = cluster.members
    async with first.dashboard() as on_first, second.dashboard() as on_second:
        run_id = front.start_run({"tool": "cluster_approve", "args": {"label": label}})
        stopping = owner(cluster, run_id)  # whichever console the proxy gave the run to
        other = next(m for m in cluster.members if m is not stopping)
        dashboard = on_second if other is second else on_first  # the one that stays up
        request_id = (await dashboard.event("request.opened", run_id=run_id))["request_id"]

        stopping.process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        body = wait_for_readiness(stopping, 503, failing="shutdown")
        assert stopping.is_running()  # it said so itself, before exiting
        assert body["checks"]["shutdown"]["ok"] is False, body
        assert health(stopping)[0] == 200
        adopted = await dashboard.event("run.adopted", run_id=run_id)
        adopted_after = time.monotonic() - signalled

        assert adopted["payload"] == {"previous_owner": f"{stopping.process_id}:released", "requests": [request_id]}
        assert adopted_after < DRAIN_SECONDS  # at the other's next beat, not after a heartbeat timeout
        assert cluster.owner_of(run_id) == other.process_id
        stopping.process.wait(timeout=STOP_BOUND_SECONDS)
        assert stopping.process.returncode == 0
        stopping.logged("stopped: 1 waiting run(s) handed over")

        status, _ = front.answer(request_id)
        assert status == 200
        finished = await dashboard.event("run.finished", run_id=run_id)

    assert finished["run"]["status"] == "succeeded"
    assert finished["run"]["result"] == {"output": f"{label} approved in pid {other.pid}", "is_error": False}
    assert executed(cluster.executions(label)) == [(stopping.pid, False), (other.pid, True)]
    print(f"\nSIGTERM -> run.adopted on the other console: {adopted_after * 1000:.0f} ms")


def test_a_stopping_console_refuses_new_runs_with_503_and_the_other_takes_them(cluster, label):
    a, b = cluster.members
    holding = a.start_run({"tool": "cluster_hold", "args": {"label": f"{label}-hold", "seconds": 60}})
    cluster.wait_for_execution(f"{label}-hold", "started")  # keeps a serving through its grace period

    a.process.send_signal(signal.SIGTERM)
    wait_for_readiness(a, 503, failing="shutdown")
    status, body = a.call("POST", "/api/v1/runs", {"tool": "cluster_approve", "args": {"label": label}})

    assert status == 503
    assert body["error"] == "shutting_down"
    assert "shutting down and starts no new runs" in body["message"]
    status, run = b.call("POST", "/api/v1/runs", {"tool": "cluster_approve", "args": {"label": label}})
    assert status == 201, run
    a.process.wait(timeout=STOP_BOUND_SECONDS)
    assert b.wait_for_run(holding, lambda r: r["status"] == "interrupted")


def test_an_executing_tool_gets_the_grace_period_then_its_token_trips(cluster, label):
    a, b = cluster.members
    quick = a.start_run({"tool": "cluster_hold", "args": {"label": f"{label}-quick", "seconds": GRACE_SECONDS / 4}})
    slow = a.start_run({"tool": "cluster_hold", "args": {"label": f"{label}-slow", "seconds": 60}})
    cluster.wait_for_execution(f"{label}-quick", "started")
    cluster.wait_for_execution(f"{label}-slow", "started")

    a.process.send_signal(signal.SIGTERM)
    a.process.wait(timeout=STOP_BOUND_SECONDS)

    assert b.run(quick)["status"] == "succeeded"  # it finished within the grace period
    stopped = b.run(slow)
    assert stopped["status"] == "interrupted"
    assert stopped["result"]["output"] == f"{label}-slow stopped (shutdown) in pid {a.pid}"
    assert [r["event"] for r in cluster.executions(f"{label}-slow")] == ["started", "stopped"]
    a.logged("stopped: 0 waiting run(s) handed over, 1 ended within the grace period, 1 interrupted")


# -- readiness with a service stopped ----------------------------------------------------------------


@pytest.fixture
def solo(request, cluster_template, tmp_path):
    """``solo(template, redis_url)``: one console for this test only, on a database of its own."""
    made = []

    def make(template, redis_url):
        database = re.sub(r"\W", "_", f"stop_{request.node.name}").lower()[:60]
        made.append(Cluster(template, redis_url, tmp_path, database=database, names=("solo",)))
        return made[-1].start().members[0]

    yield make
    for cluster in made:
        cluster.close()


def wait_for_readiness(member, status, failing=None):
    """/readyz once it answers ``status`` (with ``failing`` the one failing check, if given); checks that it
    answered within the readiness timeout's bound, however the service is gone."""

    def answered():
        started = time.monotonic()
        got, body = readiness(member)
        took = time.monotonic() - started
        assert took < 2.0, f"/readyz took {took:.1f}s"
        if got != status:
            return None
        if failing is not None and body["checks"][failing]["ok"]:
            return None
        return body

    return eventually(answered, f"{member.name}'s /readyz answering {status}")


def test_readiness_fails_while_redis_is_stopped_and_liveness_holds(cluster_template, solo):
    redis = RedisServer().start()
    try:
        console = solo(cluster_template, redis.url)
        wait_for_readiness(console, 200)

        redis.stop()
        body = wait_for_readiness(console, 503, failing="channel_layer")
        assert body["checks"]["database"]["ok"] and body["checks"]["shutdown"]["ok"], body
        assert health(console) == (200, {"status": "ok"})

        redis.start()  # the same port
        wait_for_readiness(console, 200)
    finally:
        redis.close()


def test_readiness_fails_while_postgresql_is_stopped_and_liveness_holds(redis_url):
    postgres = PostgresServer().start()
    try:
        template = ClusterTemplate.create(postgres, name="stop_template")
        cluster = Cluster(template, redis_url, postgres.workdir, database="stop_solo", names=("solo",)).start()
        console = cluster.members[0]
        try:
            wait_for_readiness(console, 200)

            postgres.halt()
            body = wait_for_readiness(console, 503, failing="database")
            assert body["checks"]["channel_layer"]["ok"], body
            assert body["checks"]["heartbeat"]["ok"] is False, body
            assert health(console) == (200, {"status": "ok"})

            postgres.start()  # the same data directory and port
            wait_for_readiness(console, 200)
        finally:
            for member in cluster.members:
                member.stop()
    finally:
        postgres.close()
