"""Nothing lost when a console dies (issue 27): a member killed (SIGKILL) at each point of a run, and
killed again and again while dashboards are open.

The other member takes over: each run ends as docs/operations.md ("When a console dies") says, an
answer accepted as its run's owner died is acted on once, and the dead member's channels leave the
Redis groups, so no event goes on being sent to a channel nobody reads.
"""

import pytest
import redis

from approvals.events import CONSOLE_GROUP
from approvals.team.accounts import user_group
from approvals.team.presence import PRESENCE_GROUP
from tests.cluster.harness import eventually
from tests.support.kill_points import KillPoints

CAPACITY = 20  # messages a channel holds: a few runs' events overflow a channel nobody reads
KILLS = 4
RUNS_AFTER = 8  # each about four events (started, opened, answered, finished): more than CAPACITY


@pytest.fixture(scope="module")
def cluster_options():
    # A longer silence than the harness's 1.5 s: the frozen member must not be taken for dead before the
    # answer is in (a killed one is seen at the next beat, by its pid, whatever the timeout).
    return {"env": {"CONSOLE_HEARTBEAT_TIMEOUT_SECONDS": "5", "CONSOLE_CHANNEL_CAPACITY": str(CAPACITY)}}


def test_a_member_killed_at_each_point_of_a_run_is_taken_over_with_each_documented_outcome(cluster, label):
    a, b = cluster.members
    points = KillPoints(label, cluster.executions_log).set_up(a)
    run_id, request_id = points.runs["after_answer"], points.requests["after_answer"]

    a.freeze()  # alive and beating a moment ago, unable to act on what comes now
    status, body = b.answer(request_id, ok=True)
    assert status == 200, body
    answered = b.run(run_id)
    assert (answered["status"], answered["owner"]) == ("running", a.process_id)  # the door let it go on; nobody did
    died = a.pid
    a.kill()

    points.check(b, died=died, carried_on=b.pid)


def group_members(client, group):
    return sorted(member.decode() for member in client.zrange(f"asgi:group:{group}", 0, -1))


def process_prefix(channel):
    """``specific.<the process's client prefix>!<random>`` -> the process's part."""
    return channel.partition("!")[0]


async def test_after_repeated_kills_the_groups_hold_only_live_channels_and_none_overflows(cluster, redis_url, label):
    a, b = cluster.members
    client = redis.Redis.from_url(redis_url)
    reviewer = int(cluster.sql("SELECT id FROM auth_user WHERE username = 'reviewer'")[0])
    async with b.dashboard():
        for _ in range(KILLS):
            doomed = await a.open_dashboard()
            a.kill()
            await doomed.close()
            a.serve()  # back on its port: a new process, with new channels
        async with a.dashboard():
            # Two listeners (one per member) and two dashboards. Nothing announces that a dead process's
            # channels have gone from a Redis set: a poll with a deadline.
            eventually(lambda: len(group_members(client, CONSOLE_GROUP)) == 4, "the console group down to 4 channels")
            console = group_members(client, CONSOLE_GROUP)
            assert len({process_prefix(channel) for channel in console}) == 2, console
            for group in (PRESENCE_GROUP, user_group(reviewer)):
                assert len(group_members(client, group)) == 2, (group, group_members(client, group))

            async with b.dashboard() as watching:
                for index in range(RUNS_AFTER):
                    run_id = a.start_run({"tool": "cluster_approve", "args": {"label": f"{label}-{index}"}})
                    opened = await watching.event("request.opened", run_id=run_id)
                    assert (await watching.answer(opened["request_id"]))["type"] == "answered"
                    await watching.event("run.finished", run_id=run_id)

    # channels_redis keeps a process's messages in one sorted set per process ("asgispecific.<prefix>!");
    # one holding CAPACITY messages is "over capacity" and drops every event after.
    held = {key.decode(): client.zcard(key) for key in client.scan_iter(match="asgispecific.*")}
    assert all(count < CAPACITY for count in held.values()), held
