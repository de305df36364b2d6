"""The embedded default's channel layer (approvals/hotpath/channel_layer.py) and the outbox events go out through."""

import asyncio
import math

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import transaction
from toolnexus import pending

from approvals import events
from approvals.events import CONSOLE_GROUP
from approvals.hotpath.channel_layer import FanOutInMemoryChannelLayer
from approvals.models import AuditEvent, Request, RequestStatus
from approvals.review import decisions
from approvals.runs import runner
from approvals.team.policies import Viewer
from approvals.web.consumers import EncodedEvents
from tests.support.changes import recorded_without_notice
from tests.support.metrics import moved, scrape

pytestmark = pytest.mark.django_db(transaction=True)


async def members(layer, count, group="g"):
    names = [await layer.new_channel() for _ in range(count)]
    for name in names:
        await layer.group_add(group, name)
    return names


async def test_a_group_send_reaches_every_member_each_with_its_own_top_level_copy():
    layer = FanOutInMemoryChannelLayer()
    names = await members(layer, 3)
    message = {"type": "console.changed", "seq": 1, "frame": {"action": "request.opened"}}
    await layer.group_send("g", message)
    message["seq"] = 99  # the sender changing its own afterwards changes nothing sent
    message["frame"]["action"] = "changed"
    received = [await layer.receive(name) for name in names]
    assert [m["seq"] for m in received] == [1, 1, 1]
    assert all(m["frame"] == {"action": "request.opened"} for m in received)
    received[0]["seq"] = 7  # one receiver setting a key leaves the others theirs
    assert received[1]["seq"] == 1


async def test_a_full_member_misses_the_message_and_the_others_still_get_it():
    layer = FanOutInMemoryChannelLayer(capacity=1)
    full, other = await members(layer, 2)
    await layer.send(full, {"type": "first"})
    await layer.group_send("g", {"type": "second"})
    assert (await layer.receive(full))["type"] == "first"
    assert (await layer.receive(other))["type"] == "second"
    assert layer.channels.get(full) is None  # nothing else was queued for it


async def test_expired_messages_are_still_swept_and_their_channel_leaves_its_groups():
    layer = FanOutInMemoryChannelLayer(expiry=-1)  # every message is expired as it is queued
    (name,) = await members(layer, 1)
    await layer.group_send("g", {"type": "stale"})
    layer._swept_at = -math.inf  # the once-a-second sweep is due
    layer._clean_expired()
    assert name not in layer.channels
    assert name not in layer.groups.get("g", {})


def test_the_embedded_default_uses_it():
    assert isinstance(get_channel_layer(), FanOutInMemoryChannelLayer)


def test_one_event_is_encoded_once_per_viewer_and_prev():
    encoded = EncodedEvents()
    frame = {"type": "event", "seq": 5, "action": "run.started", "run": None, "request": None}
    alice, bob = Viewer("alice"), Viewer("bob")
    first = encoded.text(frame, 4, alice)
    assert encoded.text(frame, 4, alice) is first
    assert '"prev": 4' in first and '"seq": 5' in first
    assert encoded.text(frame, 3, alice) != first  # a socket that is behind is told its own prev
    assert encoded.text(frame, 4, bob) is not first
    newer = {**frame, "seq": 6}
    assert '"seq": 6' in encoded.text(newer, 5, alice)
    assert set(encoded.texts) == {(5, alice)}  # only the newest event is kept


async def test_events_committed_on_the_database_thread_go_out_through_the_outbox_in_commit_order():
    await runner.ensure_started()
    assert events._outbox_of_calling_loop() is None  # on the loop itself there is no calling loop
    layer = get_channel_layer()
    listener = await layer.new_channel()
    await layer.group_add(CONSOLE_GROUP, listener)

    def commit_events(count):
        outboxes = set()
        for i in range(count):
            with transaction.atomic():
                events.record("run.started", actor="system", payload={"i": i})
            outboxes.add(events._outbox_of_calling_loop())
        return outboxes

    outboxes = await sync_to_async(commit_events)(20)
    assert len(outboxes) == 1 and None not in outboxes  # each was handed to this loop's outbox
    received = [await asyncio.wait_for(layer.receive(listener), 10) for _ in range(20)]
    seqs = [m["seq"] for m in received]
    assert seqs == sorted(seqs) and len(set(seqs)) == 20
    assert [m["frame"]["payload"]["i"] for m in received] == list(range(20))


async def test_send_to_group_hands_every_member_the_senders_own_frame_without_awaiting():
    layer = FanOutInMemoryChannelLayer()
    names = await members(layer, 2)
    frame = {"action": "request.opened"}
    layer.send_to_group("g", {"type": "console.changed", "seq": 1, "frame": frame})  # a plain call, on the loop
    received = [await layer.receive(name) for name in names]
    assert all(m["frame"] is frame for m in received)  # handed over, not copied
    assert received[0] is not received[1]  # still a top-level dict each


async def test_the_outbox_sends_to_the_embedded_layer_from_the_loops_callback_in_order():
    layer = get_channel_layer()
    listener = await layer.new_channel()
    await layer.group_add(CONSOLE_GROUP, listener)
    outbox = events.Outbox(asyncio.get_running_loop())  # no deliver task running: the callback sends
    assert outbox.send_now is not None

    def put_from_another_thread():
        return [outbox.put({"type": "console.changed", "seq": n, "frame": None}) for n in range(1, 6)]

    assert await asyncio.to_thread(put_from_another_thread) == [True] * 5
    received = [await asyncio.wait_for(layer.receive(listener), 10) for _ in range(5)]
    assert [m["seq"] for m in received] == [1, 2, 3, 4, 5]
    assert outbox.queue.empty()


async def test_with_a_layer_that_sends_over_the_network_the_outbox_queues_for_its_task(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}  # no send_to_group
    outbox = events.Outbox(asyncio.get_running_loop())
    assert outbox.send_now is None
    assert outbox.put({"type": "console.changed", "seq": 1, "frame": None})
    assert (await asyncio.wait_for(outbox.queue.get(), 10))["seq"] == 1


async def test_the_run_supervisor_rejoins_the_console_group_so_a_day_old_process_still_hears_answers():
    sup = await runner.ensure_started()
    layer = get_channel_layer()
    while sup.listen_channel is None:  # the listener joins as its task first runs
        await asyncio.sleep(0)
    layer.groups[CONSOLE_GROUP][sup.listen_channel] = 1.0  # joined long ago: the next sweep would drop it
    await runner.stay_in_console_group(sup)  # what every heartbeat does
    layer._swept_at = -math.inf
    layer._clean_expired()
    assert sup.listen_channel in layer.groups[CONSOLE_GROUP]


async def test_a_rejoin_while_the_layer_is_down_does_not_raise_so_the_safety_tick_goes_on():
    class DownLayer(FanOutInMemoryChannelLayer):
        async def group_add(self, group, channel):
            raise ConnectionError("redis is restarting")

    await events.rejoin(DownLayer(), "specific.inmemory!abc", CONSOLE_GROUP)


class LayerThatFailsOnDemand(FanOutInMemoryChannelLayer):
    """The embedded layer with an outage on demand: the read in progress fails as a Redis read that
    timed out does (once per ``outage.set()``), and everything else goes on working."""

    def __init__(self, **config):
        super().__init__(**config)
        self.outage = asyncio.Event()

    async def receive(self, channel):
        reading = asyncio.ensure_future(super().receive(channel))
        failing = asyncio.ensure_future(self.outage.wait())
        await asyncio.wait({reading, failing}, return_when=asyncio.FIRST_COMPLETED)
        failing.cancel()
        if reading.done():
            return reading.result()
        reading.cancel()
        self.outage.clear()
        raise ConnectionError("Timeout reading from 127.0.0.1:6379")


async def test_a_layer_failure_costs_one_rejoin_and_wakes_only_the_wait_whose_request_was_resolved(settings, caplog):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "tests.hotpath.test_channel_layer.LayerThatFailsOnDemand"}}
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "SAFETY_POLL_SECONDS": 3600}  # only the catch-up wakes anyone
    requests = [pending(kind="approval", prompt=f"Ship {n}?").metadata["pending"] for n in range(3)]
    for wire in requests:
        await decisions.aopen_request(wire)
    resolved, *still_open = [wire.id for wire in requests]
    sup = await runner.ensure_started()
    before = await sync_to_async(scrape)()
    # Answered by another console process; its notice is lost (the layer is about to fail).
    await recorded_without_notice(
        Request.objects.filter(pk=resolved).update,
        {"status": RequestStatus.ANSWERED, "answer_ok": True},
        action=AuditEvent.Action.REQUEST_ANSWERED,
        request_id=resolved,
    )
    layer = get_channel_layer()
    waits = {wire.id: asyncio.Event() for wire in requests}
    for request_id, wait in waits.items():  # as wait_for_stored_answer registers its wait
        sup.waiters.setdefault(request_id, set()).add(wait)
    while sup.listen_channel is None:  # the listener joins as its task first runs
        await asyncio.sleep(0)
    first_channel = sup.listen_channel

    layer.outage.set()
    await asyncio.wait_for(waits[resolved].wait(), 10)  # by the catch-up, or the heartbeat's read if sooner

    async def rejoined():
        while sup.listen_channel == first_channel:
            await asyncio.sleep(0)

    await asyncio.wait_for(rejoined(), 10)

    assert [waits[request_id].is_set() for request_id in still_open] == [False, False]
    assert sup.listen_channel != first_channel and sup.listen_channel in layer.groups[CONSOLE_GROUP]
    said = [r.getMessage() for r in caplog.records if r.name == "approvals.runs.runner"]
    assert said == [
        "the channel layer failed (Timeout reading from 127.0.0.1:6379); rejoining in 0.1s",
        "the channel layer is back; catching up from the database",
    ]
    reconnects = moved(before, await sync_to_async(scrape)()).get(("console_channel_layer_reconnects_total", ()))
    assert reconnects == 1
