"""The dashboard WebSocket, through the real ASGI application.

Every socket here goes through ``toolnexus_site.asgi.application``: the
AllowedHostsOriginValidator, the console's ExactOriginValidator and the
AuthMiddlewareStack (a real session cookie) all run before the consumer does.
"""

import asyncio
import json
import math
import threading

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings as django_settings
from django.db import transaction
from toolnexus import Request as WireRequest

from approvals import events, frames, selectors, shapes
from approvals.events import CONSOLE_GROUP
from approvals.models import AuditEvent, Request, RequestStatus, Run, RunStatus
from approvals.review import decisions
from approvals.runs import runner
from approvals.runs import services as runs
from approvals.team import policies
from approvals.web import consumers
from tests.support.dashboard import (
    HOST,
    ORIGIN,
    RECEIVE_TIMEOUT,
    dashboard_for,
    open_socket,
    session_key_for,
    socket_headers,
)
from tests.support.signatures import verified

# reset_sequences: audit ids (the seq numbers) start at 1, as in a fresh console.
pytestmark = pytest.mark.django_db(transaction=True, reset_sequences=True)


@pytest.fixture(autouse=True)
def _stop_leftover_runs(stop_leftover_runs):
    """Every test here cancels what it left running."""


async def start_deploy_and_wait_for_request(dashboard, user, service="web"):
    """Start a deploy run; the dashboard sees run.started then request.opened. Returns (run, opened frame)."""
    run = await runner.start_run(tool="deploy", args={"service": service}, user=user)
    await dashboard.expect_event("run.started", run_id=run.pk)
    opened = await dashboard.expect_event("request.opened", run_id=run.pk)
    return run, opened


# -- who may connect -------------------------------------------------------------------


@pytest.mark.parametrize("session_key", [None, "not-a-real-session-key"], ids=["no-cookie", "unknown-session"])
async def test_refused_without_login(session_key):
    async with open_socket(socket_headers(session_key)) as (accepted, code, _):
        assert accepted is False
        assert code == 4401


async def test_refused_with_foreign_origin_even_when_logged_in(alice):
    key = await session_key_for(alice)
    # Same host name, another port: Channels' host-only AllowedHostsOriginValidator lets this through.
    async with open_socket(socket_headers(key, origin="http://127.0.0.1:9999", host=HOST)) as (accepted, code, _):
        assert accepted is False
        assert code != 4401  # refused for its origin, not for the login
    # The same session from the console's own origin is let in, so the origin was the reason.
    async with open_socket(socket_headers(key, origin=ORIGIN, host=HOST)) as (accepted, _, _):
        assert accepted is True


async def test_refused_without_origin_header(alice):
    key = await session_key_for(alice)
    async with open_socket(socket_headers(key, origin=None)) as (accepted, _, _):
        assert accepted is False


async def test_accepted_when_origin_equals_the_host(alice):
    key = await session_key_for(alice)
    async with open_socket(socket_headers(key, origin="http://127.0.0.1:8000", host="127.0.0.1:8000")) as (
        accepted,
        _,
        communicator,
    ):
        assert accepted is True
        assert (await communicator.receive_json_from(timeout=RECEIVE_TIMEOUT))["type"] == "snapshot"


async def test_accepted_when_origin_is_listed_in_console_allowed_origins(alice, settings):
    key = await session_key_for(alice)
    headers = socket_headers(key, origin="http://localhost:3000", host=HOST)
    async with open_socket(headers) as (accepted, _, _):
        assert accepted is False  # not the host's own origin, and not listed yet
    settings.CONSOLE_ALLOWED_ORIGINS = ["http://localhost:3000"]
    async with open_socket(headers) as (accepted, _, communicator):
        assert accepted is True
        assert (await communicator.receive_json_from(timeout=RECEIVE_TIMEOUT))["type"] == "snapshot"


# -- snapshot --------------------------------------------------------------------------


async def test_first_frame_is_a_snapshot_of_the_database(alice, console_events):
    finished = await runner.start_run(tool="crunch", args={"steps": 0}, user=alice)
    await runner.wait_for_run(finished.pk)
    waiting = await runner.start_run(tool="deploy", args={"service": "api"}, user=alice)
    opened = await console_events.next("request.opened", run_id=waiting.pk)

    async with dashboard_for(alice) as dashboard:
        snap = dashboard.snapshot
        assert set(snap) == {"type", "seq", "requests", "next", "runs", "runs_next", "recent_runs", "counts"}
        assert snap["counts"] == {"requests": 1, "kinds": {"input": 1}, "for_me": 1, "runs": 1}
        assert snap["next"] is None and snap["runs_next"] is None
        assert snap["seq"] == await sync_to_async(selectors.last_seq)() == opened["seq"]

        db_open = await sync_to_async(list)(
            Request.objects.filter(status=RequestStatus.OPEN).values_list("id", flat=True)
        )
        assert [r["id"] for r in snap["requests"]] == db_open == [opened["request_id"]]
        request = snap["requests"][0]
        assert request["prompt"] == "Which environment should api be deployed to?"
        assert request["kind"] == "input"
        assert request["run"] == waiting.pk
        assert request["status"] == "open"

        assert [(r["id"], r["status"]) for r in snap["runs"]] == [(waiting.pk, "waiting")]
        assert [(r["id"], r["status"]) for r in snap["recent_runs"]] == [(finished.pk, "succeeded")]
        assert snap["recent_runs"][0]["result"] == {"output": "crunched 0 of 0 steps", "is_error": False}


async def test_snapshot_of_an_empty_console(alice):
    async with dashboard_for(alice) as dashboard:
        assert dashboard.snapshot == {
            "type": "snapshot",
            "seq": 0,
            "requests": [],
            "next": None,
            "runs": [],
            "runs_next": None,
            "recent_runs": [],
            "counts": {"requests": 0, "kinds": {}, "for_me": 0, "runs": 0},
        }


# -- live events -----------------------------------------------------------------------


async def test_live_request_opened_event_in_wire_keys_with_prev_and_consecutive_seq(alice):
    async with dashboard_for(alice) as dashboard:
        run, opened = await start_deploy_and_wait_for_request(dashboard, alice, service="api")

        request = opened["request"]
        row = await Request.objects.aget(pk=opened["request_id"])
        assert {"id", "kind", "prompt", "url", "data", "expiresAt"} <= set(request)
        assert "expires_at" not in request and "expires_at_wire" not in request
        assert request["id"] == row.id
        assert request["kind"] == "input"
        assert request["prompt"] == "Which environment should api be deployed to?"
        assert request["url"] is None
        assert request["expiresAt"] is None
        assert request["data"]["schema"]["properties"]["env"]["enum"] == ["staging", "production"]
        assert opened["run"]["status"] == "waiting"

        # Finish the run so the socket sees a longer stream.
        await dashboard.send({"type": "answer", "ref": "x", "request": row.id, "ok": True, "data": {"env": "staging"}})
        await dashboard.expect("answered", ref="x")
        await dashboard.expect_event("request.answered")
        await dashboard.expect_event("run.finished", run_id=run.pk)
        await runner.wait_for_run(run.pk)

        event_frames = [f for f in dashboard.frames if f["type"] == "event"]
        assert [f["action"] for f in event_frames] == [
            "run.started",
            "request.opened",
            "request.answered",
            "run.finished",
        ]
        seqs = [dashboard.snapshot["seq"]] + [f["seq"] for f in event_frames]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # one apart, no gaps, no repeats
        assert [f["prev"] for f in event_frames] == seqs[:-1]  # each event names the one before it


# -- answering over the socket -----------------------------------------------------------


async def test_answer_over_the_socket_resumes_the_run(alice):
    async with dashboard_for(alice) as dashboard:
        run, opened = await start_deploy_and_wait_for_request(dashboard, alice)
        request_id = opened["request_id"]

        await dashboard.send(
            {"type": "answer", "ref": "r1", "request": request_id, "ok": True, "data": {"env": "staging"}}
        )
        answered = await dashboard.expect("answered", ref="r1")
        assert verified(answered["answer"]) == {"id": request_id, "ok": True, "data": {"env": "staging"}}

        event = await dashboard.expect_event("request.answered", request_id=request_id)
        assert event["actor"] == "alice"
        assert verified(event["request"]["answer"]) == {"id": request_id, "ok": True, "data": {"env": "staging"}}
        assert event["request"]["answered_by"] == "alice"

        finished = await dashboard.expect_event("run.finished", run_id=run.pk)
        assert finished["run"]["status"] == "succeeded"
        assert finished["run"]["result"] == {"output": "deployed to staging", "is_error": False}

        await runner.wait_for_run(run.pk)
        row = await Run.objects.aget(pk=run.pk)
        assert (row.status, row.result_output) == (RunStatus.SUCCEEDED, "deployed to staging")


async def test_second_answer_is_refused_naming_who_answered(alice, bob):
    async with dashboard_for(alice) as alice_dash, dashboard_for(bob) as bob_dash:
        run, opened = await start_deploy_and_wait_for_request(alice_dash, alice)
        request_id = opened["request_id"]
        await alice_dash.send(
            {"type": "answer", "ref": "a", "request": request_id, "ok": True, "data": {"env": "staging"}}
        )
        await alice_dash.expect("answered", ref="a")
        await runner.wait_for_run(run.pk)

        await bob_dash.send(
            {"type": "answer", "ref": "b", "request": request_id, "ok": True, "data": {"env": "production"}}
        )
        # bob's socket saw the whole story as events first; the refusal follows them.
        frame = await bob_dash.receive()
        while frame["type"] == "event":
            frame = await bob_dash.receive()
        assert frame["type"] == "error"
        assert frame["ref"] == "b"
        assert frame["error"] == "not_open"
        assert "alice" in frame["message"]
        assert "answered" in frame["message"]

        row = await Run.objects.aget(pk=run.pk)
        assert row.result_output == "deployed to staging"  # the tool resumed once, with alice's answer
        request = await Request.objects.aget(pk=request_id)
        assert request.answer_data == {"env": "staging"}


async def test_invalid_input_answer_gets_field_errors_and_the_request_stays_open(alice):
    async with dashboard_for(alice) as dashboard:
        run, opened = await start_deploy_and_wait_for_request(dashboard, alice)
        request_id = opened["request_id"]

        await dashboard.send(
            {"type": "answer", "ref": "bad", "request": request_id, "ok": True, "data": {"env": "mars"}}
        )
        error = await dashboard.expect("error", ref="bad", error="invalid")
        assert set(error["field_errors"]) == {"env"}
        assert error["field_errors"]["env"] and all(isinstance(m, str) for m in error["field_errors"]["env"])

        request = await Request.objects.aget(pk=request_id)
        assert request.status == RequestStatus.OPEN
        assert request.answer_ok is None
        assert (await Run.objects.aget(pk=run.pk)).status == RunStatus.WAITING
        snap = await dashboard.resync()
        assert [r["id"] for r in snap["requests"]] == [request_id]
        assert snap["requests"][0]["status"] == "open"


# -- cancelling over the socket -----------------------------------------------------------


async def test_cancel_run_over_the_socket(alice):
    async with dashboard_for(alice) as dashboard:
        run = await runner.start_run(tool="crunch", args={"steps": 500, "pause": 0.05}, user=alice)
        await dashboard.expect_event("run.started", run_id=run.pk)

        await dashboard.send({"type": "cancel_run", "ref": "c1", "run": run.pk})
        await dashboard.expect("cancel_requested", ref="c1", run=run.pk)
        await dashboard.expect_event("run.cancel_requested", run_id=run.pk, actor="alice")
        finished = await dashboard.expect_event("run.finished", run_id=run.pk)
        assert finished["run"]["status"] == "cancelled"
        assert finished["payload"]["status"] == "cancelled"
        assert finished["run"]["result"]["is_error"] is True

        await runner.wait_for_run(run.pk)
        row = await Run.objects.aget(pk=run.pk)
        assert row.status == RunStatus.CANCELLED
        assert row.result_output.startswith("cancelled after ")


# -- bad frames ------------------------------------------------------------------------------


async def _finished_run_id(user):
    run = await runner.start_run(tool="crunch", args={"steps": 0}, user=user)
    await runner.wait_for_run(run.pk)
    return run.pk


async def _nothing(user):
    return None


def _text(value):
    return ("text", value)


BAD_FRAMES = {
    "malformed-json": (_nothing, lambda _: _text('{"type": "resync"'), "bad_frame"),
    "json-array": (_nothing, lambda _: _text('[{"type": "resync"}]'), "bad_frame"),
    "json-string": (_nothing, lambda _: _text('"resync"'), "bad_frame"),
    "unknown-type": (_nothing, lambda _: _text('{"type": "launch_missiles"}'), "bad_frame"),
    "missing-type": (_nothing, lambda _: _text('{"request": "x"}'), "bad_frame"),
    "non-string-type": (_nothing, lambda _: _text('{"type": ["resync"]}'), "bad_frame"),
    "deeply-nested-json": (_nothing, lambda _: _text("[" * 20000 + "]" * 20000), "bad_frame"),
    "answer-unknown-request": (
        _nothing,
        lambda _: _text(json.dumps({"type": "answer", "request": "no-such-request", "ok": True})),
        "not_found",
    ),
    "answer-missing-ok": (_nothing, lambda _: _text(json.dumps({"type": "answer", "request": "x"})), "bad_frame"),
    "answer-missing-request": (_nothing, lambda _: _text(json.dumps({"type": "answer", "ok": True})), "bad_frame"),
    "cancel-string-id": (_nothing, lambda _: _text(json.dumps({"type": "cancel_run", "run": "1"})), "bad_frame"),
    "cancel-bool-id": (_nothing, lambda _: _text(json.dumps({"type": "cancel_run", "run": True})), "bad_frame"),
    "cancel-unknown-run": (_nothing, lambda _: _text(json.dumps({"type": "cancel_run", "run": 987654})), "not_found"),
    "cancel-finished-run": (
        _finished_run_id,
        lambda run_id: _text(json.dumps({"type": "cancel_run", "run": run_id})),
        "not_open",
    ),
    "oversized": (
        _nothing,
        lambda _: _text(json.dumps({"type": "resync", "pad": "x" * django_settings.TOOLNEXUS["MAX_FRAME_BYTES"]})),
        "bad_frame",
    ),
    "binary": (_nothing, lambda _: ("bytes", b'{"type": "resync"}'), "bad_frame"),
}


@pytest.mark.parametrize("case", list(BAD_FRAMES), ids=list(BAD_FRAMES))
async def test_bad_frame_gets_an_error_and_the_connection_stays_open(alice, case):
    prepare, make_frame, expected_error = BAD_FRAMES[case]
    context = await prepare(alice)  # before connecting, so its events are already in the snapshot
    async with dashboard_for(alice) as dashboard:
        kind, payload = make_frame(context)
        if kind == "bytes":
            await dashboard.communicator.send_to(bytes_data=payload)
        else:
            await dashboard.communicator.send_to(text_data=payload)

        error = await dashboard.expect("error")
        assert error["error"] == expected_error
        assert isinstance(error["message"], str) and error["message"]
        if case == "oversized":
            assert str(django_settings.TOOLNEXUS["MAX_FRAME_BYTES"]) in error["message"]
        if case == "cancel-finished-run":
            assert "already finished" in error["message"]

        # Still open and still in step: a valid frame right after gets its answer.
        snap = await dashboard.resync()
        assert snap["seq"] == dashboard.snapshot["seq"]


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
async def test_non_finite_number_in_an_answer_is_refused_and_the_request_stays_open(alice, number):
    # Not JSON (RFC 8259), and not storable: SQLite's JSON columns reject NaN/Infinity.
    async with dashboard_for(alice) as dashboard:
        run, opened = await start_deploy_and_wait_for_request(dashboard, alice)
        request_id = opened["request_id"]
        text = '{"type": "answer", "ref": "n", "request": "%s", "ok": true, "data": {"env": "staging", "n": %s}}'
        await dashboard.communicator.send_to(text_data=text % (request_id, number))
        error = await dashboard.expect("error", error="bad_frame")
        assert "not a finite number" in error["message"]
        assert (await Request.objects.aget(pk=request_id)).status == RequestStatus.OPEN
        snap = await dashboard.resync()
        assert [r["id"] for r in snap["requests"]] == [request_id]


async def test_error_frame_echoes_the_ref(alice):
    async with dashboard_for(alice) as dashboard:
        await dashboard.send({"type": "cancel_run", "ref": "mine-7", "run": "seven"})
        error = await dashboard.expect("error", ref="mine-7", error="bad_frame")
        assert "cancel_run" in error["message"]


async def test_frame_exactly_at_the_size_limit_is_accepted(alice):
    limit = django_settings.TOOLNEXUS["MAX_FRAME_BYTES"]
    base = json.dumps({"type": "resync", "pad": ""})
    frame = json.dumps({"type": "resync", "pad": "x" * (limit - len(base.encode()))})
    assert len(frame.encode()) == limit
    async with dashboard_for(alice) as dashboard:
        await dashboard.communicator.send_to(text_data=frame)
        await dashboard.expect("snapshot")


# -- catching up after a lost notification ---------------------------------------------------


@sync_to_async
def record_two_events_in_one_transaction():
    with transaction.atomic():
        run = Run.objects.create(tool="crunch", args={"steps": 1}, status=RunStatus.SUCCEEDED, result_output="done")
        first = events.record(AuditEvent.Action.RUN_STARTED, actor="alice", run=run)
        second = events.record(AuditEvent.Action.RUN_FINISHED, actor="tool:crunch", run=run)
    return run.pk, first.pk, second.pk


async def test_gap_in_seq_is_caught_up_from_the_database(alice, monkeypatch, settings):
    # Only the gap rule may deliver here: the safety tick will not fire during this test.
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "SAFETY_TICK_SECONDS": 3600}
    published = []
    real_publish = events.publish

    def drop_first_publish(event, build_frame=None):
        published.append(event.pk)
        if len(published) == 1:
            return  # this channel-layer message is lost
        real_publish(event, build_frame)

    async with dashboard_for(alice) as dashboard:
        start = dashboard.snapshot["seq"]
        monkeypatch.setattr(events, "publish", drop_first_publish)
        run_id, first_id, second_id = await record_two_events_in_one_transaction()
        assert published == [first_id, second_id]
        assert (first_id, second_id) == (start + 1, start + 2)

        first = await dashboard.expect_event("run.started", seq=first_id, prev=start, run_id=run_id)
        assert first["actor"] == "alice"
        second = await dashboard.expect_event("run.finished", seq=second_id, prev=first_id, run_id=run_id)
        assert second["run"]["result"] == {"output": "done", "is_error": False}

        # Nothing else is pending (no duplicate of either event): the next frame is our snapshot.
        assert (await dashboard.resync())["seq"] == second_id


async def test_stale_and_duplicate_notifications_are_ignored(alice):
    async with dashboard_for(alice) as dashboard:
        run, opened = await start_deploy_and_wait_for_request(dashboard, alice)
        layer = get_channel_layer()
        # A repeat of an event the dashboard already has, and an older one.
        await layer.group_send(CONSOLE_GROUP, {"type": "console.changed", "seq": opened["seq"], "frame": opened})
        await layer.group_send(CONSOLE_GROUP, {"type": "console.changed", "seq": opened["seq"] - 1})
        # The next real change is the next frame, numbered straight on from request.opened.
        await runner.cancel_run(run.pk, user=alice)
        await dashboard.expect_event("run.cancel_requested", seq=opened["seq"] + 1, prev=opened["seq"])
        await runner.wait_for_run(run.pk)


async def test_a_change_reaches_the_dashboard_while_the_database_thread_is_busy(alice, monkeypatch):
    # The frame a change carries is forwarded without a hop to the one database thread
    # (Channels' own dispatch would wait there for every message to every socket).
    async with dashboard_for(alice) as dashboard:
        held = []
        monkeypatch.setattr(
            events, "publish", lambda event, build_frame=None: held.append(event)
        )  # this test delivers it itself
        event = await sync_to_async(events.record)("console.note", actor="system", payload={"note": "busy"})
        message = await sync_to_async(events.change_message)(held[0])
        busy, release = threading.Event(), threading.Event()

        def hold_the_database_thread():
            busy.set()
            release.wait(RECEIVE_TIMEOUT)

        holding = asyncio.ensure_future(sync_to_async(hold_the_database_thread)())
        try:
            assert await asyncio.to_thread(busy.wait, RECEIVE_TIMEOUT)
            await get_channel_layer().group_send(CONSOLE_GROUP, message)
            frame = await dashboard.expect_event("console.note", seq=event.pk, prev=dashboard.snapshot["seq"])
            assert not release.is_set() and not holding.done()  # it came while the thread was still held
        finally:
            release.set()
            await holding
        assert frame["payload"] == {"note": "busy"}


def test_safety_ticks_are_spread_around_the_setting(settings):
    # Sockets opened together (a page of dashboards, a reconnect storm) must not all re-read at once.
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "SAFETY_TICK_SECONDS": 4.0}
    waits = [consumers.safety_tick_wait() for _ in range(200)]
    assert all(3.0 <= wait <= 5.0 for wait in waits)
    assert max(waits) - min(waits) > 1.0
    assert 3.8 < sum(waits) / len(waits) < 4.2


async def test_lost_last_notification_is_caught_by_the_safety_tick(alice, monkeypatch, settings):
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "SAFETY_TICK_SECONDS": 0.05}
    monkeypatch.setattr(events, "publish", lambda event, build_frame=None: None)  # every notification is lost
    async with dashboard_for(alice) as dashboard:
        start = dashboard.snapshot["seq"]
        run_id, first_id, second_id = await record_two_events_in_one_transaction()
        await dashboard.expect_event("run.started", seq=first_id, prev=start, run_id=run_id)
        await dashboard.expect_event("run.finished", seq=second_id, prev=first_id, run_id=run_id)


async def test_a_dashboard_dropped_by_the_layers_group_expiry_rejoins_on_its_safety_tick(alice, settings):
    # Channels' layers drop a group member after group_expiry (a day): a dashboard left open stays live.
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "SAFETY_TICK_SECONDS": 0.05}
    layer = get_channel_layer()
    before = set(layer.groups.get(CONSOLE_GROUP, {}))
    async with dashboard_for(alice) as dashboard:
        (channel,) = set(layer.groups[CONSOLE_GROUP]) - before - {runner.supervisor().listen_channel}
        layer.groups[CONSOLE_GROUP][channel] = 1.0  # joined long ago...
        layer._swept_at = -math.inf
        layer._clean_expired()  # ...so the layer's sweep drops it
        assert channel not in layer.groups.get(CONSOLE_GROUP, {})
        run_id, first_id, second_id = await record_two_events_in_one_transaction()
        await dashboard.expect_event("run.started", seq=first_id, run_id=run_id)  # caught up by the tick...
        await dashboard.expect_event("run.finished", seq=second_id, run_id=run_id)
        assert layer.groups[CONSOLE_GROUP][channel] > 1.0  # ...which rejoined the group


# -- reconnecting ---------------------------------------------------------------------------


async def test_reconnect_gets_a_snapshot_of_what_changed_while_away(alice, console_events):
    async with dashboard_for(alice) as first:
        assert first.snapshot["requests"] == []
        seen = first.snapshot["seq"]

    # While no dashboard is connected: a run starts and asks; another finishes.
    waiting = await runner.start_run(tool="deploy", args={"service": "db"}, user=alice)
    opened = await console_events.next("request.opened", run_id=waiting.pk)
    finished_id = await _finished_run_id(alice)

    async with dashboard_for(alice) as second:
        snap = second.snapshot
        assert snap["seq"] == await sync_to_async(selectors.last_seq)()
        assert snap["seq"] > seen
        assert [r["id"] for r in snap["requests"]] == [opened["request_id"]]
        assert snap["requests"][0]["prompt"] == "Which environment should db be deployed to?"
        assert [(r["id"], r["status"]) for r in snap["runs"]] == [(waiting.pk, "waiting")]
        assert [r["id"] for r in snap["recent_runs"]] == [finished_id]

        # And it is live from there: answering from the new socket works.
        await second.send(
            {"type": "answer", "ref": "r", "request": opened["request_id"], "ok": True, "data": {"env": "production"}}
        )
        await second.expect("answered", ref="r")
        await runner.wait_for_run(waiting.pk)
        assert (await Run.objects.aget(pk=waiting.pk)).result_output == "deployed to production"


@sync_to_async
def record_many_events_in_one_transaction(count):
    with transaction.atomic():
        run = Run.objects.create(tool="crunch", args={}, status=RunStatus.SUCCEEDED, result_output="done")
        ids = [events.record(AuditEvent.Action.RUN_STARTED, actor=f"actor-{i}", run=run).pk for i in range(count)]
    return ids


async def test_gap_longer_than_one_catch_up_page_is_caught_up_completely(alice, monkeypatch, settings):
    # frames.frames_after reads at most 500 events at a time; a longer gap must still arrive whole.
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "SAFETY_TICK_SECONDS": 3600}
    real_publish = events.publish
    async with dashboard_for(alice) as dashboard:
        start = dashboard.snapshot["seq"]
        monkeypatch.setattr(
            events, "publish", lambda event, build_frame=None: None
        )  # all these notifications are lost...
        ids = await record_many_events_in_one_transaction(520)
        await sync_to_async(lambda: real_publish(AuditEvent.objects.get(pk=ids[-1])))()  # ...but the newest one

        received = [await dashboard.expect("event") for _ in ids]
        assert [f["seq"] for f in received] == ids
        assert [f["prev"] for f in received] == [start] + ids[:-1]
        assert (await dashboard.resync())["seq"] == ids[-1]


# -- a long queue: a bounded snapshot, then page by page ----------------------------------------------


SNAPSHOT_BUDGET_BYTES = 256 * 1024


def add_count_change(counts, frame):
    """What the dashboard's script does with an event's count_change."""
    change = frame.get("count_change") or {}
    counts = {**counts, "kinds": dict(counts["kinds"])}
    if change.get("requests"):
        counts["requests"] += change["requests"]
        counts["kinds"][change["kind"]] = counts["kinds"].get(change["kind"], 0) + change["requests"]
    counts["for_me"] += change.get("for_me", 0)
    counts["runs"] += change.get("runs", 0)
    return counts


async def answer_and_count(dashboard, counts, request_id, ref):
    """Approve one request from the socket; returns the counts after its event's count_change."""
    await dashboard.send({"type": "answer", "ref": ref, "request": request_id, "ok": True})
    await dashboard.expect("answered", ref=ref)
    event = await dashboard.expect_event("request.answered", request_id=request_id)
    assert event["count_change"] == {"requests": -1, "kind": "approval", "for_me": -1}
    return add_count_change(counts, event)


async def test_2000_open_requests_a_bounded_snapshot_then_pages_and_counts_that_stay_right(alice):
    from tests.support.long_queue import open_requests_in_bulk

    ids = await sync_to_async(open_requests_in_bulk)(2000)
    async with dashboard_for(alice) as dashboard:
        snap = dashboard.snapshot
        # Daphne refuses frames over 1 MiB; every request in one frame was 2 MB here.
        assert len(json.dumps(snap).encode()) < SNAPSHOT_BUDGET_BYTES
        assert snap["counts"] == {
            "requests": 2000,
            "kinds": {"approval": 1334, "input": 666},
            "for_me": 2000,
            "runs": 0,
        }

        # Page by page, in the dashboard's order: every request once, none missed, each frame bounded.
        loaded, after, pages = [r["id"] for r in snap["requests"]], snap["next"], 0
        while after is not None:
            await dashboard.send({"type": "page", "after": after})
            page = await dashboard.expect("page", of="requests", after=after)
            assert len(json.dumps(page).encode()) < SNAPSHOT_BUDGET_BYTES
            assert all(r["policy"]["may_answer"] for r in page["requests"])  # seen through alice's eyes
            loaded += [r["id"] for r in page["requests"]]
            after, pages = page["next"], pages + 1
        assert loaded == ids
        assert pages == math.ceil(2000 / frames.DASHBOARD_PAGE_ROWS) - 1

        # One opens, and the oldest and the newest are answered: each event says how the totals move.
        counts = snap["counts"]
        await sync_to_async(decisions.open_request)(
            WireRequest(id="late-arrival", kind="approval", prompt="One more?"), tool="refund", actor="tests"
        )
        opened = await dashboard.expect_event("request.opened", request_id="late-arrival")
        assert opened["count_change"] == {"requests": 1, "kind": "approval", "for_me": 1}
        counts = add_count_change(counts, opened)
        counts = await answer_and_count(dashboard, counts, ids[0], "oldest")
        counts = await answer_and_count(dashboard, counts, ids[-1], "newest")
        counts = await answer_and_count(dashboard, counts, "late-arrival", "arrival")
        assert counts == {"requests": 1998, "kinds": {"approval": 1332, "input": 666}, "for_me": 1998, "runs": 0}

        # A fresh snapshot counts the same, and starts at the second-oldest request.
        fresh = await dashboard.resync()
        assert fresh["counts"] == counts
        assert [r["id"] for r in fresh["requests"]][:2] == ids[1:3]
    assert await Request.objects.filter(status=RequestStatus.OPEN).acount() == 1998


async def test_a_request_answered_by_someone_i_may_not_stand_in_for_counts_for_everyone_but_me(alice, bob):
    """for_me follows the same verdict the card shows: bob started the run, so four-eyes keeps him off it."""
    run = await sync_to_async(runs.create_run)(tool="refund", args={}, timeout=None, user=bob, owner=runner.PROCESS_ID)
    await sync_to_async(decisions.open_request)(
        WireRequest(id="bobs-refund", kind="approval", prompt="Refund?"), run_id=run.pk, tool="refund", actor="tests"
    )
    async with dashboard_for(bob) as bobs, dashboard_for(alice) as alices:
        viewer = policies.Viewer("bob")
        may = shapes.for_user(bobs.snapshot["requests"][0], viewer)["policy"]["may_answer"]
        assert bobs.snapshot["counts"]["for_me"] == int(may)
        assert alices.snapshot["counts"]["for_me"] == 1
        await alices.send({"type": "answer", "ref": "a", "request": "bobs-refund", "ok": True})
        await alices.expect("answered", ref="a")
        assert (await alices.expect_event("request.answered"))["count_change"]["for_me"] == -1
        assert (await bobs.expect_event("request.answered"))["count_change"]["for_me"] == -int(may)


@pytest.mark.parametrize(
    "frame, message",
    [
        ({"type": "page"}, "'page' needs 'after'"),
        ({"type": "page", "after": 12}, "bad 'after'"),
        ({"type": "page", "after": "not-a-cursor"}, "not a cursor this console gave out"),
        ({"type": "page", "of": "events", "after": "x"}, 'use "requests" or "runs"'),
        ({"type": "page", "of": "runs", "run": 3}, "only with 'of': \"requests\""),
        ({"type": "page", "run": 2**63}, "a run's id, 1 to 9223372036854775807"),  # was an OverflowError: closed 1011
    ],
)
async def test_a_bad_page_frame_gets_an_error_frame_that_says_what_to_send(alice, frame, message):
    async with dashboard_for(alice) as dashboard:
        await dashboard.send({**frame, "ref": "p"})
        error = await dashboard.expect("error", error="bad_frame", ref="p")
        assert message in error["message"]
        assert (await dashboard.resync())["type"] == "snapshot"  # the socket is still open


async def test_the_active_runs_come_a_page_at_a_time_too(alice):
    made = await sync_to_async(
        lambda: [
            runs.create_run(tool="crunch", args={"steps": i}, timeout=None, user=alice, owner=runner.PROCESS_ID).pk
            for i in range(frames.DASHBOARD_PAGE_ROWS + 5)
        ]
    )()
    async with dashboard_for(alice) as dashboard:
        snap = dashboard.snapshot
        assert snap["counts"]["runs"] == len(made)
        assert [r["id"] for r in snap["runs"]] == made[: frames.DASHBOARD_PAGE_ROWS]
        await dashboard.send({"type": "page", "of": "runs", "after": snap["runs_next"]})
        page = await dashboard.expect("page", of="runs")
        assert [r["id"] for r in page["runs"]] == made[frames.DASHBOARD_PAGE_ROWS :]
        assert page["next"] is None


# -- a run page's timeline ---------------------------------------------------------------------------


async def test_a_run_pages_timeline_comes_after_an_event_number_or_before_it_a_page_at_a_time(alice):
    @sync_to_async
    def run_with_a_long_timeline():
        run = runs.create_run(tool="crunch", args={}, timeout=None, user=alice, owner=runner.PROCESS_ID)
        with transaction.atomic():
            for step in range(frames.RUN_TIMELINE_EVENTS + 10):
                events.record(AuditEvent.Action.RUN_TRANSCRIPT, actor="system", run=run, payload={"step": step})
        return run.pk, list(AuditEvent.objects.filter(run_id=run.pk).order_by("id").values_list("id", flat=True))

    run_id, seqs = await run_with_a_long_timeline()
    page = frames.RUN_TIMELINE_EVENTS
    async with dashboard_for(alice) as dashboard:
        # What a page drawn up to seqs[5] missed: the next page, then the rest.
        await dashboard.send({"type": "timeline", "run": run_id, "after": seqs[5], "ref": "t"})
        first = await dashboard.expect("timeline", run=run_id, after=seqs[5], ref="t", more=True)
        assert [e["seq"] for e in first["events"]] == seqs[6 : 6 + page]
        await dashboard.send({"type": "timeline", "run": run_id, "after": first["events"][-1]["seq"]})
        rest = await dashboard.expect("timeline", more=False)
        assert [e["seq"] for e in rest["events"]] == seqs[6 + page :]
        # Show earlier: the page before the first event shown, oldest first.
        await dashboard.send({"type": "timeline", "run": run_id, "before": seqs[-1]})
        earlier = await dashboard.expect("timeline", before=seqs[-1], more=True)
        assert [e["seq"] for e in earlier["events"]] == seqs[-1 - page : -1]
        await dashboard.send({"type": "timeline", "run": run_id, "before": seqs[-1 - page]})
        assert [e["seq"] for e in (await dashboard.expect("timeline", more=False))["events"]] == seqs[: -1 - page]


@pytest.mark.parametrize(
    "frame, message",
    [
        ({"type": "timeline"}, "'timeline' needs 'run'"),
        ({"type": "timeline", "run": 2**63}, "a run's id, 1 to 9223372036854775807"),
        ({"type": "timeline", "run": 1, "after": "7"}, "bad 'after'"),
        ({"type": "timeline", "run": 1, "before": -1}, "bad 'before'"),
        ({"type": "timeline", "run": 1, "after": 2**63}, "bad 'after'"),
        ({"type": "timeline", "run": 1, "after": 1, "before": 9}, "not both"),
    ],
)
async def test_a_bad_timeline_frame_gets_an_error_frame_that_says_what_to_send(alice, frame, message):
    async with dashboard_for(alice) as dashboard:
        await dashboard.send({**frame, "ref": "t"})
        error = await dashboard.expect("error", error="bad_frame", ref="t")
        assert message in error["message"]


# -- PostgreSQL: an id below one already passed on can commit later -------------------------------------


@sync_to_async
def committed_event(pk, action="console.note"):
    """An event committed with id ``pk`` and its channel-layer message (on PostgreSQL ids are not the commit order)."""
    event = AuditEvent.objects.create(pk=pk, action=action, actor="system", payload={"pk": pk})
    return event, events.change_message(event)


async def test_an_event_committed_below_one_already_passed_on_comes_late(alice, monkeypatch, settings):
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "SAFETY_TICK_SECONDS": 3600}  # only the notices deliver here
    monkeypatch.setattr(selectors, "ids_follow_commits", lambda: False)  # as on PostgreSQL
    layer = get_channel_layer()
    async with dashboard_for(alice) as dashboard:
        start = dashboard.snapshot["seq"]
        _, higher = await committed_event(start + 2)  # start + 1 was taken by a transaction still open
        await layer.group_send(CONSOLE_GROUP, higher)
        await dashboard.expect_event("console.note", seq=start + 2, prev=start)
        _, lower = await committed_event(start + 1)  # ... which commits now
        await layer.group_send(CONSOLE_GROUP, lower)
        late = await dashboard.expect_event("console.note", seq=start + 1)
        assert late["payload"] == {"pk": start + 1}
        await layer.group_send(CONSOLE_GROUP, lower)  # a repeat is still ignored
        _, next_one = await committed_event(start + 3)
        await layer.group_send(CONSOLE_GROUP, next_one)
        await dashboard.expect_event("console.note", seq=start + 3, prev=start + 2)


async def test_a_late_event_whose_notice_was_lost_comes_with_the_safety_tick(alice, monkeypatch, settings):
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "SAFETY_TICK_SECONDS": 0.05}
    monkeypatch.setattr(selectors, "ids_follow_commits", lambda: False)
    async with dashboard_for(alice) as dashboard:
        start = dashboard.snapshot["seq"]
        await committed_event(start + 2)  # no notices at all: the safety tick reads what changed
        await dashboard.expect_event("console.note", seq=start + 2, prev=start)
        await committed_event(start + 1)
        late = await dashboard.expect_event("console.note", seq=start + 1)
        assert late["payload"] == {"pk": start + 1}
