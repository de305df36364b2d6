"""The Redis channel layer's connections (issue 18): a dashboard left idle stays live, and a crowd of
sockets opening and closing at once never leaves a process without a Redis connection.

One console process on the session's redis-server and PostgreSQL. The safety poll and the
dashboards' safety tick are set far beyond every wait here, so what a dashboard shows in time
came through Redis.
"""

import asyncio

import pytest
from websockets.exceptions import InvalidStatus

# channels_redis blocks up to 5 s on each read of an idle channel: idle for two of them and more.
IDLE_SECONDS = 12.0
LIVE_SECONDS = 2.0  # a notification, not a safety tick
CROWD = 150  # more sockets than redis-py's default pool has connections (100)
LATECOMERS = 20


@pytest.fixture(scope="module")
def cluster_options():
    return {"names": ("a",), "env": {"CONSOLE_SAFETY_POLL_SECONDS": "60", "CONSOLE_SAFETY_TICK_SECONDS": "60"}}


async def test_a_dashboard_idle_for_twelve_seconds_still_hears_the_next_request(cluster, label):
    [a] = cluster.members
    async with a.dashboard() as dashboard:
        await asyncio.sleep(IDLE_SECONDS)  # the idleness under test: nothing to wait for but time
        run_id = a.start_run({"tool": "cluster_approve", "args": {"label": label}})
        opened = await dashboard.event("request.opened", run_id=run_id, timeout=LIVE_SECONDS)
        assert (await dashboard.answer(opened["request_id"]))["type"] == "answered"
    assert "the channel layer failed" not in a.log_path.read_text()


async def open_all(member, count):
    """Open ``count`` dashboards at once: the ones whose snapshot came, and what refused the others."""
    outcomes = await asyncio.gather(*(member.open_dashboard() for _ in range(count)), return_exceptions=True)
    opened = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [
        f"HTTP {o.response.status_code}" if isinstance(o, InvalidStatus) else repr(o)
        for o in outcomes
        if isinstance(o, BaseException)
    ]
    return opened, refused


async def test_150_sockets_closing_together_then_20_new_ones_each_get_their_snapshot(cluster):
    [a] = cluster.members
    crowd, refused = await open_all(a, CROWD)
    try:
        assert refused == [], f"{len(refused)} of {CROWD} refused: {sorted(set(refused))}"
    finally:
        leaving = asyncio.gather(*(dashboard.close() for dashboard in crowd))
    latecomers, refused = await open_all(a, LATECOMERS)  # while the crowd's disconnects are under way
    await leaving
    await asyncio.gather(*(dashboard.close() for dashboard in latecomers))
    assert refused == [], f"{len(refused)} of {LATECOMERS} refused: {sorted(set(refused))}"
    assert all(dashboard.snapshot["type"] == "snapshot" for dashboard in latecomers)
    log = a.log_path.read_text()
    assert "Too many connections" not in log and "the channel layer failed" not in log


async def test_discarding_a_dead_process_takes_only_its_channels_out_of_every_group(redis_url):
    from approvals.hotpath.redis_layer import WaitingPoolRedisChannelLayer

    dead, alive = (WaitingPoolRedisChannelLayer(hosts=[{"address": redis_url}], prefix="discard-test") for _ in "ab")
    try:
        channels = {}
        for name, layer in (("dead", dead), ("alive", alive)):
            await layer.register_process(f"host:{name}")
            channels[name] = [await layer.new_channel() for _ in range(2)]
            for channel in channels[name]:
                await layer.group_add("g1", channel)
            await layer.group_add("g2", channels[name][0])

        assert await alive.discard_process("host:dead") == 3
        assert await alive.discard_process("host:dead") == 0  # already gone, and its record with it
        assert await alive.discard_process("host:unknown") == 0
        connection = alive.connection(0)
        assert sorted(m.decode() for m in await connection.zrange("discard-test:group:g1", 0, -1)) == sorted(
            channels["alive"]
        )
        assert [m.decode() for m in await connection.zrange("discard-test:group:g2", 0, -1)] == channels["alive"][:1]
    finally:
        await alive.flush()
        for layer in (dead, alive):
            await layer.close_pools()
