"""Presence: "also here: bob" for a request someone else has on screen, over the dashboard socket."""

import pytest
from asgiref.sync import sync_to_async

from approvals.team.presence import MAX_REQUESTS_PER_SOCKET, PresenceBoard
from tests.support.dashboard import async_waiting_request, dashboard_for

pytestmark = pytest.mark.django_db(transaction=True)


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


# -- the board -------------------------------------------------------------------------------------


def test_a_sighting_lasts_its_time_to_live():
    clock = FakeClock()
    board = PresenceBoard(clock=clock)
    board.saw("r1", "chan-bob", "bob", 30)
    assert board.viewers("r1") == ["bob"]
    clock.now += 29
    assert board.viewers("r1") == ["bob"]
    clock.now += 2
    assert board.viewers("r1") == []
    assert board.request_ids() == []


def test_two_tabs_of_one_user_count_once_and_one_closing_keeps_the_other():
    board = PresenceBoard(clock=FakeClock())
    board.saw("r1", "tab-1", "bob", 30)
    board.saw("r1", "tab-2", "bob", 30)
    board.saw("r1", "tab-3", "carol", 30)
    assert board.viewers("r1") == ["bob", "carol"]
    assert board.left("tab-1") == {"r1"}
    assert board.viewers("r1") == ["bob", "carol"]
    board.left("tab-2")
    assert board.viewers("r1") == ["carol"]


def test_one_socket_cannot_fill_the_board():
    board = PresenceBoard(clock=FakeClock())
    for i in range(MAX_REQUESTS_PER_SOCKET):
        assert board.saw(f"r{i}", "greedy", "mallory", 30)
    assert not board.saw("one-too-many", "greedy", "mallory", 30)
    assert "one-too-many" not in board.request_ids()
    assert board.saw("r0", "greedy", "mallory", 30)  # renewing what it already watches is fine


# -- over the socket -------------------------------------------------------------------------------------


@pytest.fixture
async def people(make_user):
    return [await sync_to_async(make_user)(name) for name in ("alice", "bob", "carol")]


async def test_a_dashboard_sees_who_else_is_looking(people):
    alice, bob, _ = people
    await async_waiting_request("look-1", starter=alice)
    async with dashboard_for(alice) as as_alice, dashboard_for(bob) as as_bob:
        await as_bob.send({"type": "viewing", "request": "look-1"})
        assert await as_alice.next("presence") == {"type": "presence", "request": "look-1", "viewers": ["bob"]}
        await as_alice.send({"type": "viewing", "request": "look-1"})
        # bob is told about alice, never about himself.
        assert await as_bob.next("presence") == {"type": "presence", "request": "look-1", "viewers": ["alice"]}
        await as_bob.send({"type": "viewing", "request": "look-1"})  # a renewal changes nothing: no new frame
        async with dashboard_for(bob):
            pass  # another socket of bob's came and went
        await as_bob.communicator.disconnect()
        assert await as_alice.next("presence") == {"type": "presence", "request": "look-1", "viewers": []}


async def test_a_new_dashboard_is_told_who_is_already_looking(people):
    alice, bob, carol = people
    await async_waiting_request("look-2", starter=alice)
    async with dashboard_for(bob) as as_bob:
        await as_bob.send({"type": "viewing", "request": "look-2"})
        async with dashboard_for(carol) as as_carol:
            # The broadcast may reach carol's socket too: either way the next presence frame says bob.
            assert await as_carol.next("presence", request="look-2") == {
                "type": "presence",
                "request": "look-2",
                "viewers": ["bob"],
            }


async def test_a_sighting_lapses_without_renewal(people, settings):
    alice, bob, _ = people
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "PRESENCE_TTL_SECONDS": 0.3, "SAFETY_TICK_SECONDS": 0.1}
    await async_waiting_request("look-3", starter=alice)
    async with dashboard_for(alice) as as_alice, dashboard_for(bob) as as_bob:
        await as_bob.send({"type": "viewing", "request": "look-3"})
        assert (await as_alice.next("presence"))["viewers"] == ["bob"]
        lapsed = await as_alice.next("presence", timeout=3)
        assert lapsed == {"type": "presence", "request": "look-3", "viewers": []}


async def test_a_viewing_frame_needs_a_request_id(people):
    alice, _, _ = people
    async with dashboard_for(alice) as as_alice:
        await as_alice.send({"type": "viewing", "request": "no spaces allowed", "ref": "v1"})
        error = await as_alice.next("error")
        assert (error["error"], error["ref"]) == ("bad_frame", "v1")
        assert "'viewing' needs 'request'" in error["message"]
