"""Faults (issue 7): Redis restarted while runs wait, a dashboard's socket dropped, a channel layer
that drops messages, a busy database. In every case no answer is lost, no run is resumed twice,
and every dashboard ends up showing what the database holds.

Real processes throughout: daphne consoles (the cluster harness on PostgreSQL + Redis, or the
embedded default, SQLite + the in-memory layer, in one daphne), a real redis-server and
PostgreSQL. Runs use ``cluster_approve`` (tests/cluster/cluster_tools.py), which records every
execution, so "resumed once" is counted, not assumed. Dashboards are ``DashboardTab``s, socket
clients that reconnect and resync the way static/approvals/console/sync.js does.
"""

import asyncio
import contextlib
import re
import sqlite3
import time

import psycopg
import pytest

from tests.cluster.fault_helpers import (
    ACTIVE_STATUSES,
    SqliteTemplate,
    dashboard_tabs,
    database_held,
    database_view,
    embedded_console,
)
from tests.cluster.harness import Cluster
from tests.support.live_console import poll
from tests.support.services import RedisServer

WAITING_RUNS = 6
BURST_RUNS = 30
BUSY_SECONDS = 2.0  # the fault itself: how long the database stays locked
LIVE_SECONDS = 2.0  # a notification, not the consumers' 5 s safety tick


def report(what, **numbers):
    """One line per measurement (visible with ``pytest -s``)."""
    print(
        f"\nFAULT {what}: "
        + ", ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in numbers.items())
    )


# -- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory):
    return SqliteTemplate.create(tmp_path_factory.mktemp("faults-sqlite"))


@pytest.fixture
def embedded(sqlite_template, tmp_path):
    """``embedded(**env)``: the single-process console (SQLite, in-memory layer) for this test only."""
    with contextlib.ExitStack() as stack:
        yield lambda **env: stack.enter_context(embedded_console(sqlite_template, tmp_path, **env))


@pytest.fixture
def make_cluster(request, cluster_template, tmp_path):
    """``make_cluster(redis_url, names=..., env=...)``: a cluster for this test only, on a database of its own."""
    made = []

    def make(redis_url, **options):
        database = re.sub(r"\W", "_", f"faults_{request.node.name}").lower()[:60]
        cluster = Cluster(cluster_template, redis_url, tmp_path, database=database, **options)
        made.append(cluster)
        return cluster.start()

    yield make
    for cluster in made:
        cluster.close()


@pytest.fixture
def own_redis():
    """A Redis only this test uses, so restarting it disturbs no other test's cluster."""
    server = RedisServer().start()
    yield server
    server.close()


# -- what every fault test does --------------------------------------------------------------------


async def start_runs(members, label, count):
    """Start ``count`` runs at once, spread over ``members``; returns {run id: its label}."""
    labels = [f"{label}-{i}" for i in range(count)]
    run_ids = await asyncio.gather(
        *(
            asyncio.to_thread(members[i % len(members)].start_run, {"tool": "cluster_approve", "args": {"label": name}})
            for i, name in enumerate(labels)
        )
    )
    return dict(zip(run_ids, labels))


async def open_requests(member, runs):
    """{request id: run id} of the open requests of ``runs``, once each of them has one."""

    def all_open():
        return poll(
            member,
            "/api/v1/requests?status=open",
            lambda body: runs.keys() <= {r["run"] for r in body["requests"]},
            what=f"requests of runs {list(runs)}",
        )

    return {r["id"]: r["run"] for r in (await asyncio.to_thread(all_open))["requests"] if r["run"] in runs}


async def answer_over_api(members, request_ids):
    """Approve each request through the API, all at once, spread over ``members``."""
    replies = await asyncio.gather(
        *(asyncio.to_thread(members[i % len(members)].answer, request_id) for i, request_id in enumerate(request_ids))
    )
    assert [status for status, _ in replies] == [200] * len(request_ids), replies


async def assert_each_ran_then_resumed_once(deployment, runs):
    """Every run succeeded, its tool executed once and re-executed once with the answer, never more."""
    member = deployment.members[0]
    for run_id in runs:
        run = await asyncio.to_thread(member.wait_for_run, run_id, lambda r: r["status"] not in ACTIVE_STATUSES)
        assert run["status"] == "succeeded", run
    executions = {label: [r["answer"] is not None for r in deployment.executions(label)] for label in runs.values()}
    assert executions == {label: [False, True] for label in runs.values()}


async def converge(tabs, member, runs):
    """Wait until every tab shows what the database holds; returns the seconds each took."""
    expected = await asyncio.to_thread(database_view, member, runs)
    return await asyncio.gather(*(tab.converge(expected) for tab in tabs))


# -- Redis restarted while runs wait ------------------------------------------------------------------


@pytest.mark.parametrize("names", [("a",), ("a", "b")], ids=["one-process", "two-processes"])
async def test_runs_waiting_through_a_redis_restart_resume_once_and_dashboards_converge_and_stay_live(
    names, own_redis, make_cluster, label
):
    cluster = make_cluster(own_redis.url, names=names)
    members = cluster.members
    async with dashboard_tabs(cluster, members) as tabs:
        runs = await start_runs(members, label, WAITING_RUNS)
        requests = await open_requests(members[0], runs)
        await converge(tabs, members[0], runs)
        connections = [tab.connections for tab in tabs]

        own_redis.restart()  # every connection breaks, every group membership is gone
        restarted = time.monotonic()
        await answer_over_api(members, list(requests))
        await assert_each_ran_then_resumed_once(cluster, runs)
        resumed_after = time.monotonic() - restarted
        converged_after = await converge(tabs, members[0], runs)

        # Not only converged (a safety tick does that): the tabs hear of a new request by its notification.
        began = time.monotonic()
        [late] = await start_runs(members[-1:], f"{label}-late", 1)
        for tab in tabs:
            await tab.until(lambda tab=tab: late in tab.runs, f"run {late} showing", timeout=LIVE_SECONDS)
        live_after = time.monotonic() - began
        await answer_over_api(members, list(await open_requests(members[0], {late: None})))
        await assert_each_ran_then_resumed_once(cluster, {late: f"{label}-late-0"})
    report(
        f"redis restart, {len(names)} process(es)",
        all_resumed_s=resumed_after,
        tabs_converged_s=max(converged_after),
        new_request_seen_s=live_after,
        tab_reconnects=[tab.connections - before for tab, before in zip(tabs, connections)],
    )


# -- a dashboard's socket dropped ----------------------------------------------------------------------


async def test_a_dropped_dashboard_catches_up_on_what_happened_while_it_was_away(cluster, label):
    a, b = cluster.members
    async with dashboard_tabs(cluster, [a]) as [tab]:
        runs = await start_runs([a, b], f"{label}-before", 4)
        before = await open_requests(a, runs)
        await converge([tab], a, runs)

        tab.drop(stay_away=True)
        seq_when_dropped = tab.seq
        # While it is away, on the other process: two runs are answered and finish, two new ones open.
        answered = dict(list(before.items())[:2])
        await answer_over_api([b], list(answered))
        for run_id in answered.values():
            await asyncio.to_thread(b.wait_for_run, run_id, lambda r: r["status"] == "succeeded")
        away = await start_runs([b], f"{label}-away", 2)
        await open_requests(b, away)
        runs.update(away)
        expected = await asyncio.to_thread(database_view, a, runs)

        began = time.monotonic()
        await tab.come_back()
        caught_up_after = time.monotonic() - began
        assert tab.view() == expected  # the first snapshot after reconnecting is the database's state
        assert tab.seq > seq_when_dropped

        # And live again from there: the rest are answered over its own socket.
        for request_id in list(tab.requests):
            assert (await tab.answer(request_id))["type"] == "answered"
        await assert_each_ran_then_resumed_once(cluster, runs)
        converged_after = await converge([tab], a, runs)
    report(
        "dropped socket",
        events_missed=tab.seq - seq_when_dropped,
        caught_up_s=caught_up_after,
        converged_after_answers_s=converged_after[0],
        resyncs=tab.resyncs,
    )


async def test_an_answer_sent_as_its_socket_drops_resumes_the_run_once(cluster, label):
    a, b = cluster.members
    async with dashboard_tabs(cluster, [a]) as [tab]:
        runs = await start_runs([b], label, 1)
        [request_id] = await open_requests(a, runs)
        await converge([tab], a, runs)

        snapshots = tab.snapshots
        await tab.send_answer(request_id)
        tab.drop()  # before any reply: the reviewer cannot tell whether the answer landed
        await tab.until(lambda: tab.snapshots > snapshots, "the snapshot after reconnecting")
        # the dashboard's sync.js says "check the request and try again": trying again is answered or refused, never applied twice.
        retry = await tab.answer(request_id)
        assert retry["type"] == "answered" or retry["error"] == "not_open", retry
        await assert_each_ran_then_resumed_once(cluster, runs)
        await converge([tab], a, runs)
    report("answer in flight as the socket dropped", first_answer_landed=retry["type"] != "answered")


# -- a channel layer that drops messages ---------------------------------------------------------------


@pytest.mark.parametrize("layer", ["in-memory", "redis"])
async def test_a_burst_through_a_one_message_channel_layer_loses_no_answer_and_dashboards_converge(
    layer, embedded, make_cluster, redis_url, label
):
    tiny = {"CONSOLE_CHANNEL_CAPACITY": "1"}
    deployment = embedded(**tiny) if layer == "in-memory" else make_cluster(redis_url, env=tiny)
    members = deployment.members
    async with dashboard_tabs(deployment, (members * 2)[:2]) as tabs:  # two tabs, on two processes if there are
        began = time.monotonic()
        runs = await start_runs(members, label, BURST_RUNS)
        requests = list(await open_requests(members[0], runs))
        # All answered at once: half through the API, half through the tabs' own sockets.
        by_socket = requests[: BURST_RUNS // 2]
        replies = await asyncio.gather(
            answer_over_api(members, requests[BURST_RUNS // 2 :]),
            *(tabs[i % 2].answer(request_id) for i, request_id in enumerate(by_socket)),
        )
        assert [reply["type"] for reply in replies[1:]] == ["answered"] * len(by_socket), replies
        await assert_each_ran_then_resumed_once(deployment, runs)
        finished_after = time.monotonic() - began
        converged_after = await converge(tabs, members[0], runs)
    # Redis says when it drops a message (the in-memory layer drops them silently): the fault did happen.
    dropped = sum(member.log_path.read_text().count("over capacity in group console") for member in members)
    assert layer == "in-memory" or dropped > 0
    report(
        f"capacity 1, {layer}",
        runs=BURST_RUNS,
        all_finished_s=finished_after,
        tabs_converged_s=max(converged_after),
        redis_drops_logged=dropped,
        resyncs=sum(tab.resyncs for tab in tabs),
    )


# -- a busy database -------------------------------------------------------------------------------------


def sqlite_write_lock(db_path):
    """Another connection takes SQLite's write lock (BEGIN IMMEDIATE), as a backup or a migration would."""

    def lock():
        connection = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
        connection.execute("BEGIN IMMEDIATE")
        return connection

    return lock


def postgres_table_lock(database_url):
    """Another session locks the requests table against everything, reads included."""

    def lock():
        connection = psycopg.connect(database_url)
        connection.execute("LOCK TABLE approvals_request IN ACCESS EXCLUSIVE MODE")
        return connection

    return lock


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
async def test_answers_given_while_the_database_is_locked_all_land_and_resume_once(database, embedded, request, label):
    if database == "sqlite":
        deployment = embedded()
        lock = sqlite_write_lock(deployment.member.db_path)
    else:
        deployment = request.getfixturevalue("cluster")
        lock = postgres_table_lock(deployment.env["DATABASE_URL"])
    members = deployment.members
    async with dashboard_tabs(deployment, members) as tabs:
        runs = await start_runs(members, label, WAITING_RUNS)
        requests = list(await open_requests(members[0], runs))
        await converge(tabs, members[0], runs)

        async with database_held(lock):
            answering = [
                asyncio.ensure_future(asyncio.to_thread(members[i % len(members)].answer, request_id))
                for i, request_id in enumerate(requests)
            ]
            await asyncio.sleep(BUSY_SECONDS)  # the fault itself: the database stays locked this long
            assert not any(answer.done() for answer in answering), "an answer got through a locked database"
        released = time.monotonic()
        replies = await asyncio.gather(*answering)
        answered_after = time.monotonic() - released
        assert [status for status, _ in replies] == [200] * len(requests), replies
        await assert_each_ran_then_resumed_once(deployment, runs)
        converged_after = await converge(tabs, members[0], runs)
    report(
        f"{database} locked {BUSY_SECONDS:g}s",
        answers_done_after_release_s=answered_after,
        tabs_converged_s=max(converged_after),
    )


async def test_a_member_whose_database_work_waits_on_a_lock_still_beats_and_keeps_its_runs(cluster, label):
    a, b = cluster.members
    runs = await start_runs([a, b], label, 4)
    requests = list(await open_requests(a, runs))
    owners = {run_id: cluster.owner_of(run_id) for run_id in runs}

    async with database_held(postgres_table_lock(cluster.env["DATABASE_URL"])):
        # Long enough for both members' safety polls (every second) to be stuck on the lock.
        await asyncio.sleep(BUSY_SECONDS)
        silent_for = [
            float(seconds)
            for seconds in cluster.sql(
                "SELECT extract(epoch FROM clock_timestamp() - last_beat) FROM approvals_consoleprocess "
                f"WHERE id IN ('{a.process_id}', '{b.process_id}')"
            )
        ]
    # Busy is not dead: HEARTBEAT_TIMEOUT_SECONDS is 1.5 s here, and neither member went quiet for half of it.
    assert len(silent_for) == 2 and max(silent_for) < BUSY_SECONDS / 2, silent_for
    await answer_over_api([a, b], requests)
    await assert_each_ran_then_resumed_once(cluster, runs)
    assert {run_id: cluster.owner_of(run_id) for run_id in runs} == owners  # nobody took a run over
    report("heartbeat during a 2 s table lock", longest_silence_s=max(silent_for))
