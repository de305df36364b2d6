"""Extending an open request's deadline: by whoever may answer it, within a cap that holds across clicks and
processes, audited, followed by the expiry timer and shown on every dashboard (issue 35, part 2).

Driven through the API (Django's test client, the real database), the dashboard socket on the console's ASGI
application, and the console's own expiry timer. Time is driven by deadlines set in the past or the future.
"""

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.test import Client
from django.utils import timezone

from approvals.models import AuditEvent, Policy, Request, RequestStatus
from approvals.review import deadlines, decisions
from approvals.review.errors import DecisionError
from approvals.runs import runner
from tests.support.dashboard import dashboard_for, waiting_request

pytestmark = pytest.mark.django_db(transaction=True)


def wire(moment):
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def in_minutes(minutes):
    return wire(timezone.now() + timedelta(minutes=minutes))


def extend(user, request_id, body=None):
    client = Client()
    client.force_login(user)
    return client.post(
        f"/api/v1/requests/{request_id}/extend", data=json.dumps(body or {}), content_type="application/json"
    )


def deadline_of(request_id):
    return Request.objects.get(pk=request_id).expires_at


def extended_events(request_id):
    return list(
        AuditEvent.objects.filter(request_id=request_id, action="request.extended")
        .order_by("id")
        .values_list("actor", "payload")
    )


# -- the API ---------------------------------------------------------------------------------------------------


def test_an_extension_moves_the_deadline_an_hour_by_default_and_is_audited(alice):
    opened = waiting_request("r1", expires=in_minutes(30))
    old = opened.expires_at
    response = extend(alice, "r1")
    assert response.status_code == 200, response.content
    new = old + timedelta(hours=1)
    assert deadline_of("r1") == new
    assert response.json()["expiresAt"] == wire(new)  # the wire's expiresAt follows
    assert response.json()["deadline"] == {
        "extended_minutes": 60,
        "room_minutes": 23 * 60,
        "step_minutes": 60,
        "reminded": False,
    }
    assert response.json()["policy"]["may_extend"] is True
    assert extended_events("r1") == [("alice", {"from": opened.expires_at_wire, "to": wire(new), "minutes": 60})]


def test_an_extension_by_the_minutes_asked(alice):
    opened = waiting_request("r1", expires=in_minutes(30))
    assert extend(alice, "r1", {"minutes": 15}).status_code == 200
    assert deadline_of("r1") == opened.expires_at + timedelta(minutes=15)
    assert extended_events("r1")[0][1]["minutes"] == 15


@pytest.mark.parametrize("minutes", [0, -5, 1441, 1.5, "60", True])
def test_a_bad_number_of_minutes_is_400_and_changes_nothing(alice, minutes):
    opened = waiting_request("r1", expires=in_minutes(30))
    response = extend(alice, "r1", {"minutes": minutes})
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid" and "minutes" in response.json()["field_errors"]
    assert deadline_of("r1") == opened.expires_at


def test_the_cap_refuses_the_step_that_would_pass_24_hours_saying_so(alice):
    opened = waiting_request("r1", expires=in_minutes(30))
    for _ in range(23):
        assert extend(alice, "r1").status_code == 200
    assert extend(alice, "r1", {"minutes": 61}).status_code == 409  # more than is left
    last = extend(alice, "r1")
    assert last.status_code == 200 and last.json()["deadline"]["room_minutes"] == 0
    refused = extend(alice, "r1", {"minutes": 1})
    assert refused.status_code == 409
    assert refused.json() == {
        "error": "conflict",
        "message": "Its deadline was already moved by 24 h, of at most 24 h: it cannot be extended any further.",
    }
    assert deadline_of("r1") == opened.expires_at + timedelta(hours=24)


def test_the_cap_and_step_come_from_settings(alice, settings):
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "EXTEND_STEP_MINUTES": 5, "EXTEND_MAX_MINUTES": 12}
    opened = waiting_request("r1", expires=in_minutes(30))
    assert extend(alice, "r1").json()["deadline"]["room_minutes"] == 7
    assert extend(alice, "r1").status_code == 200
    refused = extend(alice, "r1")
    assert refused.status_code == 409
    assert refused.json()["message"].endswith("it may move 2 min more.")
    assert deadline_of("r1") == opened.expires_at + timedelta(minutes=10)


def test_whoever_may_not_answer_may_not_extend(alice, bob):
    Policy.objects.create(name="bob only", tool_pattern="refund")
    Policy.objects.get(name="bob only").allowed_users.add(bob)
    opened = waiting_request("r1", expires=in_minutes(30))
    refused = extend(alice, "r1")
    assert refused.status_code == 403
    assert refused.json()["message"].startswith("Only someone who may answer this request may extend it. Only bob")
    assert deadline_of("r1") == opened.expires_at
    assert extend(bob, "r1").status_code == 200


def test_a_resolved_request_is_not_extended(alice):
    waiting_request("r1", expires=in_minutes(30))
    decisions.resolve_request("r1", ok=False, reason="declined", user=alice)
    refused = extend(alice, "r1")
    assert refused.status_code == 409
    assert refused.json()["message"].startswith("This request was already declined by alice")
    assert extended_events("r1") == []


def test_a_request_past_its_deadline_expires_instead_of_being_extended(alice):
    waiting_request("r1", expires=wire(timezone.now() - timedelta(seconds=1)))
    refused = extend(alice, "r1")
    assert refused.status_code == 409 and "expired" in refused.json()["message"]
    assert Request.objects.get(pk="r1").status == RequestStatus.EXPIRED


def test_a_request_without_a_deadline_has_nothing_to_extend(alice):
    waiting_request("r1")
    refused = extend(alice, "r1")
    assert refused.status_code == 409
    assert refused.json()["message"] == "This request has no deadline, so there is nothing to extend."
    assert extend(alice, "nope").status_code == 404


def _at_once(users, request_id):
    """Each user extends by one step at the same moment, in a thread (and connection) of their own."""
    barrier = threading.Barrier(len(users))

    def press(user):
        barrier.wait()
        try:
            deadlines.extend_request(request_id, user=user)
            return "extended"
        except DecisionError as exc:
            return exc.code
        finally:
            connection.close()

    with ThreadPoolExecutor(len(users)) as pool:
        return sorted(pool.map(press, users))


@pytest.mark.parametrize("cap, outcomes", [(90, ["conflict", "extended"]), (120, ["extended", "extended"])])
def test_two_extensions_at_once_add_two_steps_only_when_both_fit(alice, bob, settings, cap, outcomes):
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "EXTEND_MAX_MINUTES": cap}
    opened = waiting_request("r1", expires=in_minutes(30))
    assert _at_once([alice, bob], "r1") == outcomes
    stored = Request.objects.get(pk="r1")
    steps = outcomes.count("extended")
    assert stored.extended_seconds == steps * 3600 <= cap * 60
    assert stored.expires_at == opened.expires_at + timedelta(hours=steps)
    assert len(extended_events("r1")) == steps


# -- the expiry timer follows the new deadline -----------------------------------------------------------------


def _as_if_minutes_passed(request_id, minutes):
    """Move the stored deadline earlier, as ``minutes`` passing would bring it closer."""
    stored = Request.objects.get(pk=request_id)
    Request.objects.filter(pk=request_id).update(expires_at=stored.expires_at - timedelta(minutes=minutes))


def test_the_expiry_timer_expires_at_the_new_deadline_not_the_old(alice):
    waiting_request("r1", expires=in_minutes(10))
    assert extend(alice, "r1", {"minutes": 30}).status_code == 200
    _as_if_minutes_passed("r1", 20)  # the old deadline is 10 minutes past, the new one 20 minutes ahead
    next_due = decisions.expire_due_requests()
    assert Request.objects.get(pk="r1").status == RequestStatus.OPEN
    assert 19 * 60 < next_due <= 20 * 60
    _as_if_minutes_passed("r1", 21)
    decisions.expire_due_requests()
    assert Request.objects.get(pk="r1").status == RequestStatus.EXPIRED


async def test_the_consoles_timer_lets_an_extended_request_outlive_its_old_deadline(console_events, alice):
    first = await runner.start_run(tool="expiring", args={"seconds": 0.5}, user=alice)
    opened = await console_events.next("request.opened", run_id=first.pk)
    await sync_to_async(deadlines.extend_request)(opened["request_id"], user=alice, minutes=1)
    # A second request due after the first one's old deadline: once the timer expired it, it had read past that.
    later = await runner.start_run(tool="expiring", args={"seconds": 1.0}, user=alice)
    await console_events.next("request.expired", run_id=later.pk)
    stored = await Request.objects.aget(pk=opened["request_id"])
    assert stored.status == RequestStatus.OPEN
    assert stored.expires_at > timezone.now() + timedelta(seconds=30)
    await runner.cancel_run(first.pk)
    await runner.wait_for_run(first.pk)


# -- dashboards ------------------------------------------------------------------------------------------------


async def test_an_extension_from_one_dashboard_shows_the_new_deadline_on_another(alice, bob):
    await sync_to_async(waiting_request)("r1", expires=in_minutes(30))
    async with dashboard_for(bob) as bobs, dashboard_for(alice) as alices:
        await alices.send({"type": "extend", "request": "r1", "ref": 7})
        reply = await alices.next("extended", ref=7)
        frame = await bobs.next("event", action="request.extended")
    new = await sync_to_async(deadline_of)("r1")
    assert reply["expiresAt"] == wire(new) == frame["request"]["expiresAt"]
    assert frame["actor"] == "alice" and frame["payload"]["minutes"] == 60
    assert frame["request"]["deadline"]["extended_minutes"] == 60
    assert frame["request"]["policy"]["may_extend"] is True  # bob may answer it, so he may extend it too


async def test_a_refused_extension_on_the_socket_is_an_error_frame(alice):
    await sync_to_async(waiting_request)("r1")
    async with dashboard_for(alice) as dashboard:
        await dashboard.send({"type": "extend", "request": "r1", "ref": 1})
        refused = await dashboard.next("error", ref=1)
        await dashboard.send({"type": "extend", "ref": 2})
        bad = await dashboard.next("error", ref=2)
    assert refused["error"] == "conflict" and "no deadline" in refused["message"]
    assert bad["error"] == "bad_frame"


def test_an_old_row_reads_as_never_extended():
    opened = waiting_request("r1", expires=in_minutes(30))
    assert deadlines.extension_view(opened) == {
        "extended_minutes": 0,
        "room_minutes": 24 * 60,
        "step_minutes": 60,
        "reminded": False,
    }
    assert deadlines.extension_view(waiting_request("r2")) is None
    assert datetime.fromisoformat(opened.expires_at_wire) == opened.expires_at
