"""Requests from remote hosts: open (idempotent, limited), long-poll the answer, withdraw, and the host socket.

HTTP goes through django.test.AsyncClient inside async tests, so the long-poll
waits on the test's own loop with the same supervisor and listener a run uses.
Sockets go through the real ``toolnexus_site.asgi.application``.
"""

import asyncio
import contextlib
import json
import time
from datetime import UTC, datetime, timedelta

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import AsyncClient
from toolnexus import Request as Wire

from approvals import events, frames, selectors
from approvals.models import ApiToken, AuditEvent, Request, RequestStatus
from approvals.review import decisions
from approvals.runs import runner
from approvals.team import tokens
from tests.support.api_client import post_json
from tests.support.dashboard import HOST, RECEIVE_TIMEOUT, host_socket
from tests.support.signatures import verified, verified_frame, without
from tests.support.users import bearer
from toolnexus_site.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)

WIRE_KEYS = {"id", "kind", "prompt", "url", "data", "expiresAt"}


def new_request(request_id="host-req-1", **fields):
    return {
        "id": request_id,
        "kind": "approval",
        "prompt": "Transfer 12.50 EUR to ACME?",
        "data": {"amount": 12.5, "currency": "EUR"},
        "host": "billing-worker-3",
        "tool": "transfer",
        "args": {"amount": 12.5},
        **fields,
    }


def soon(seconds):
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@pytest.fixture
async def svc(make_user):
    return await sync_to_async(make_user)("svc", password=None)


@pytest.fixture
async def svc_token(svc, issue_token):
    return await sync_to_async(issue_token)(svc, "billing")


@pytest.fixture
async def other_token(make_user, issue_token):
    other = await sync_to_async(make_user)("other-host", password=None)
    return await sync_to_async(issue_token)(other)


@pytest.fixture
async def reviewer(make_user):
    """A logged-in reviewer answering through the API, as the dashboard's user would."""
    erin = await sync_to_async(make_user)("erin")
    client = AsyncClient()
    await client.aforce_login(erin)
    return client


@pytest.fixture
def host_client(svc_token):
    """The remote host: every call carries its bearer token."""

    class Host:
        async def post(self, path, body=None, token=svc_token):
            data = body if isinstance(body, (str, bytes)) else json.dumps(body if body is not None else {})
            return await AsyncClient().post(path, data=data, content_type="application/json", headers=bearer(token))

        async def get(self, path, token=svc_token):
            return await AsyncClient().get(path, headers=bearer(token))

    return Host()


async def answer_as_reviewer(reviewer, request_id, body):
    return await post_json(reviewer, f"/api/v1/requests/{request_id}/answer", body)


# -- POST /api/v1/requests ----------------------------------------------------------------------


async def test_post_request_is_201_with_the_stored_request(host_client):
    response = await host_client.post("/api/v1/requests", new_request())
    assert response.status_code == 201, response.content
    body = response.json()
    assert WIRE_KEYS <= set(body)
    assert (body["id"], body["kind"], body["prompt"]) == ("host-req-1", "approval", "Transfer 12.50 EUR to ACME?")
    assert body["data"] == {"amount": 12.5, "currency": "EUR"}
    assert (body["url"], body["expiresAt"]) == (None, None)
    assert (body["status"], body["answer"], body["run"]) == ("open", None, None)
    assert (body["host"], body["opened_by"], body["tool"], body["args"]) == (
        "billing-worker-3",
        "svc",
        "transfer",
        {"amount": 12.5},
    )
    row = await Request.objects.select_related("opened_by").aget(pk="host-req-1")
    assert (row.status, row.host, row.opened_by.username) == (RequestStatus.OPEN, "billing-worker-3", "svc")


async def test_post_request_with_only_the_wire_fields(host_client):
    response = await host_client.post("/api/v1/requests", {"id": "bare", "kind": "input", "prompt": "Name?"})
    assert response.status_code == 201
    body = response.json()
    assert (body["host"], body["tool"], body["args"], body["data"]) == (None, "", {}, None)


async def test_the_same_request_again_is_200_with_the_same_request(host_client):
    body = new_request(expiresAt=soon(3600))
    first = await host_client.post("/api/v1/requests", body)
    again = await host_client.post("/api/v1/requests", body)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == first.json()
    assert await Request.objects.acount() == 1
    opened = [e async for e in AuditEvent.objects.filter(action=AuditEvent.Action.REQUEST_OPENED)]
    assert len(opened) == 1  # a retry is not a second request in the audit trail


async def test_repeating_a_request_whose_deadline_a_reviewer_extended_is_still_the_same(host_client, reviewer):
    # The host retries with the expiresAt it sent; the console moved the deadline since, and that is no conflict.
    body = new_request(expiresAt=soon(3600))
    first = await host_client.post("/api/v1/requests", body)
    extended = await reviewer.post("/api/v1/requests/host-req-1/extend", data="{}", content_type="application/json")
    assert extended.status_code == 200, extended.json()
    again = await host_client.post("/api/v1/requests", body)
    assert again.status_code == 200, again.json()
    assert again.json()["expiresAt"] == extended.json()["expiresAt"] != first.json()["expiresAt"]


async def test_repeating_a_request_that_got_the_default_expiry_is_still_the_same(host_client, settings):
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "DEFAULT_EXPIRY_SECONDS": {"approval": 600}}
    first = await host_client.post("/api/v1/requests", new_request())
    assert first.json()["expiresAt"] is not None  # the console's default
    again = await host_client.post("/api/v1/requests", new_request())
    assert again.status_code == 200
    assert again.json()["expiresAt"] == first.json()["expiresAt"]


async def test_repeating_a_resolved_request_returns_it_with_its_answer(host_client, reviewer):
    await host_client.post("/api/v1/requests", new_request())
    await answer_as_reviewer(reviewer, "host-req-1", {"ok": False, "reason": "declined"})
    again = await host_client.post("/api/v1/requests", new_request())
    assert again.status_code == 200
    assert again.json()["status"] == "declined"
    assert verified(again.json()["answer"]) == {"id": "host-req-1", "ok": False, "reason": "declined"}


async def test_a_different_request_under_the_same_id_is_409_naming_the_fields(host_client):
    await host_client.post("/api/v1/requests", new_request())
    response = await host_client.post(
        "/api/v1/requests", new_request(prompt="Transfer 9999 EUR?", data={"amount": 9999})
    )
    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "conflict"
    assert "'host-req-1'" in body["message"] and "prompt" in body["message"] and "data" in body["message"]
    assert (await Request.objects.aget(pk="host-req-1")).prompt == "Transfer 12.50 EUR to ACME?"


async def test_the_same_id_from_another_user_is_409(host_client, other_token):
    await host_client.post("/api/v1/requests", new_request())
    response = await host_client.post("/api/v1/requests", new_request(), token=other_token)
    assert response.status_code == 409
    assert "opened by" in response.json()["message"]


async def test_an_id_the_console_itself_used_is_409(host_client):
    await decisions.aopen_request(Wire(id="console-made", kind="approval", prompt="Ship it?"))
    response = await host_client.post(
        "/api/v1/requests", {"id": "console-made", "kind": "approval", "prompt": "Ship it?"}
    )
    assert response.status_code == 409
    assert "opened by" in response.json()["message"]


async def test_a_body_over_256_kib_is_413(host_client):
    huge = new_request(data={"blob": "x" * (256 * 1024)})
    response = await host_client.post("/api/v1/requests", huge)
    assert response.status_code == 413
    assert response.json()["error"] == "too_large"
    assert "262144 bytes" in response.json()["message"]
    assert await Request.objects.acount() == 0


async def test_a_body_just_under_the_limit_is_accepted(host_client):
    body = new_request(data={"blob": ""})
    room = 256 * 1024 - len(json.dumps(body).encode())
    body["data"]["blob"] = "x" * room
    assert len(json.dumps(body).encode()) == 256 * 1024
    response = await host_client.post("/api/v1/requests", body)
    assert response.status_code == 201


async def test_a_prompt_over_4000_characters_is_400(host_client):
    response = await host_client.post("/api/v1/requests", new_request(prompt="p" * 4001))
    assert response.status_code == 400
    assert response.json()["error"] == "bad_request"
    assert "'prompt' is 4001 characters long; at most 4000" in response.json()["message"]
    assert (await host_client.post("/api/v1/requests", new_request(prompt="p" * 4000))).status_code == 201


def nested(depth):
    value = {}
    for _ in range(depth - 1):
        value = {"next": value}
    return value


async def test_data_nested_deeper_than_10_is_400(host_client):
    response = await host_client.post("/api/v1/requests", new_request(data=nested(11)))
    assert response.status_code == 400
    assert "'data' nests 11 levels deep; at most 10" in response.json()["message"]
    assert (await host_client.post("/api/v1/requests", new_request(data=nested(10)))).status_code == 201


async def test_args_nested_deeper_than_10_is_400(host_client):
    response = await host_client.post("/api/v1/requests", new_request(args={"a": [nested(10)]}))
    assert response.status_code == 400
    assert "'args' nests 12 levels deep" in response.json()["message"]


@pytest.mark.parametrize(
    "request_id",
    ["", "a" * 201, "has/slash", "has space", "ünïcode", 42, None, ["id"]],
    ids=["empty", "too-long", "slash", "space", "unicode", "number", "null", "list"],
)
async def test_a_bad_id_is_400(host_client, request_id):
    response = await host_client.post("/api/v1/requests", new_request(request_id=request_id))
    assert response.status_code == 400
    assert "'id' must be 1–200 characters" in response.json()["message"]
    assert await Request.objects.acount() == 0


async def test_the_longest_id_and_every_allowed_character_are_accepted(host_client):
    for request_id in ("a" * 200, "Az09._:-"):
        assert (await host_client.post("/api/v1/requests", new_request(request_id=request_id))).status_code == 201


@pytest.mark.parametrize("kind", [None, "", "   ", 3, {"k": 1}], ids=["missing", "empty", "blank", "number", "object"])
async def test_kind_is_required_as_a_non_empty_string(host_client, kind):
    body = new_request(kind=kind)
    if kind is None:
        del body["kind"]
    response = await host_client.post("/api/v1/requests", body)
    assert response.status_code == 400
    assert "'kind' is required" in response.json()["message"]


@pytest.mark.parametrize(
    "expires_at",
    ["tomorrow", "2030-01-01", "2030-01-01T12:00:00", "2030-13-01T00:00:00Z", "2030-01-01T12:00:00+25:00", 1893456000],
    ids=["words", "date-only", "no-time-zone", "month-13", "bad-offset", "number"],
)
async def test_a_bad_expires_at_is_400(host_client, expires_at):
    response = await host_client.post("/api/v1/requests", new_request(expiresAt=expires_at))
    assert response.status_code == 400
    assert "'expiresAt' must be an RFC 3339 date-time" in response.json()["message"]
    assert await Request.objects.acount() == 0


@pytest.mark.parametrize(
    "fields, complaint",
    [
        ({"prompt": ""}, "'prompt' is required"),
        ({"prompt": 7}, "'prompt' is required"),
        ({"data": [1, 2]}, "'data' must be a JSON object"),
        ({"args": "amount=1"}, "'args' must be a JSON object"),
        ({"url": 5}, "'url' must be a string"),
        ({"host": "h" * 201}, "'host' is 201 characters long"),
        ({"tool": ["x"]}, "'tool' must be a string"),
    ],
    ids=["empty-prompt", "number-prompt", "list-data", "string-args", "number-url", "long-host", "list-tool"],
)
async def test_other_bad_fields_are_400(host_client, fields, complaint):
    response = await host_client.post("/api/v1/requests", new_request(**fields))
    assert response.status_code == 400
    assert complaint in response.json()["message"]


@pytest.mark.parametrize("body", ['{"id": "x",', "[]", '{"id": "x", "kind": "a", "prompt": "p", "data": {"n": NaN}}'])
async def test_a_body_that_is_not_a_json_object_is_400(host_client, body):
    response = await host_client.post("/api/v1/requests", body)
    assert response.status_code == 400
    assert response.json()["error"] == ("bad_request" if body == "[]" else "bad_json")


async def test_opening_needs_credentials():
    response = await post_json(AsyncClient(), "/api/v1/requests", new_request())
    assert response.status_code == 401
    assert await Request.objects.acount() == 0


# -- the same dashboard and audit trail ------------------------------------------------------------


async def test_a_host_request_is_on_the_dashboard_and_in_the_audit_trail(host_client, console_events):
    response = await host_client.post("/api/v1/requests", new_request())
    assert response.status_code == 201

    opened = await console_events.next("request.opened", request_id="host-req-1")
    assert opened["actor"] == "svc"
    assert opened["payload"]["host"] == "billing-worker-3"
    assert opened["request"]["host"] == "billing-worker-3"  # what a dashboard card is sent

    snapshot = await sync_to_async(frames.snapshot)()
    [card] = [r for r in snapshot["requests"] if r["id"] == "host-req-1"]
    assert (card["host"], card["opened_by"], card["status"]) == ("billing-worker-3", "svc", "open")

    event = await AuditEvent.objects.select_related("actor_user").aget(request_id="host-req-1")
    assert (event.action, event.actor, event.actor_user.username) == ("request.opened", "svc", "svc")
    assert without(event.payload, "call_digest") == {
        "kind": "approval",
        "prompt": "Transfer 12.50 EUR to ACME?",
        "expiresAt": None,
        "host": "billing-worker-3",
    }


async def test_the_requests_list_shows_host_requests(host_client):
    await host_client.post("/api/v1/requests", new_request())
    listed = (await host_client.get("/api/v1/requests?status=open")).json()["requests"]
    assert [(r["id"], r["host"]) for r in listed] == [("host-req-1", "billing-worker-3")]


# -- GET /api/v1/requests/<id>/answer: the long-poll -------------------------------------------------


@pytest.fixture
def slow_safety_poll(settings):
    """The database re-read every 30 s: a prompt return can then only come from the wake-up."""
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "SAFETY_POLL_SECONDS": 30.0}


class Parked:
    """Counts the waits that read the database, found no answer, and are about to park on their wake-ups."""

    def __init__(self):
        self.count = 0
        self.changed = asyncio.Condition()

    async def note(self):
        async with self.changed:
            self.count += 1
            self.changed.notify_all()

    async def wait(self, count=1):
        async with self.changed:
            await self.changed.wait_for(lambda: self.count >= count)


@pytest.fixture
def long_poll_parked(monkeypatch):
    parked = Parked()
    stored_answer = selectors.astored_answer

    async def read_then_park(request_id):
        result = await stored_answer(request_id)
        if result is None:
            await parked.note()
        return result

    monkeypatch.setattr(selectors, "astored_answer", read_then_park)
    return parked


async def test_long_poll_on_an_open_request_is_202_after_the_wait(host_client):
    await host_client.post("/api/v1/requests", new_request())
    started = time.monotonic()
    response = await host_client.get("/api/v1/requests/host-req-1/answer?wait=0.3")
    elapsed = time.monotonic() - started
    assert response.status_code == 202
    assert response.json() == {"id": "host-req-1", "status": "open"}
    assert 0.3 <= elapsed < 3


async def test_long_poll_without_wait_answers_at_once(host_client):
    await host_client.post("/api/v1/requests", new_request())
    response = await host_client.get("/api/v1/requests/host-req-1/answer")
    assert response.status_code == 202


async def test_long_poll_on_an_answered_request_is_200_with_the_answer(host_client, reviewer):
    await host_client.post("/api/v1/requests", new_request())
    await answer_as_reviewer(reviewer, "host-req-1", {"ok": True, "comment": "fine"})
    response = await host_client.get("/api/v1/requests/host-req-1/answer?wait=20")
    assert response.status_code == 200
    assert verified(response.json()) == {"id": "host-req-1", "ok": True, "data": {"comment": "fine"}}


async def test_a_waiting_long_poll_returns_promptly_once_answered(
    host_client, reviewer, slow_safety_poll, long_poll_parked
):
    await host_client.post("/api/v1/requests", new_request())
    started = time.monotonic()
    polling = asyncio.ensure_future(host_client.get("/api/v1/requests/host-req-1/answer?wait=20"))
    await asyncio.wait_for(long_poll_parked.wait(), 5)
    assert not polling.done()

    answered = await answer_as_reviewer(reviewer, "host-req-1", {"ok": True, "data": {"comment": "go"}})
    answered_at = time.monotonic()
    assert answered.status_code == 200
    response = await asyncio.wait_for(polling, 5)
    returned_at = time.monotonic()

    assert response.status_code == 200
    assert verified(response.json()) == {"id": "host-req-1", "ok": True, "data": {"comment": "go"}}
    assert returned_at - answered_at < 2.0  # woken by the event; the safety re-read is 30 s away
    assert returned_at - started < 20


async def test_two_long_polls_on_one_request_both_wake(host_client, reviewer, slow_safety_poll, long_poll_parked):
    await host_client.post("/api/v1/requests", new_request())
    polls = [asyncio.ensure_future(host_client.get("/api/v1/requests/host-req-1/answer?wait=20")) for _ in range(2)]
    await asyncio.wait_for(long_poll_parked.wait(2), 5)
    sup = runner.supervisor()
    assert len(sup.waiters["host-req-1"]) == 2  # each poll has its own waiter
    await answer_as_reviewer(reviewer, "host-req-1", {"ok": False})
    responses = await asyncio.wait_for(asyncio.gather(*polls), 5)
    assert [r.status_code for r in responses] == [200, 200]
    assert "host-req-1" not in sup.waiters


async def test_a_long_poll_returns_when_the_request_expires(host_client, slow_safety_poll):
    await host_client.post("/api/v1/requests", new_request(expiresAt=soon(0.5)))
    started = time.monotonic()
    response = await host_client.get("/api/v1/requests/host-req-1/answer?wait=20")
    assert response.status_code == 200
    assert verified(response.json()) == {"id": "host-req-1", "ok": False, "reason": "expired"}
    assert time.monotonic() - started < 5  # the console's expiry timer resolved it and woke the poll


async def test_a_long_poll_after_the_deadline_expires_the_request(host_client):
    past = (datetime.now(UTC) - timedelta(seconds=5)).isoformat().replace("+00:00", "Z")
    await host_client.post("/api/v1/requests", new_request(expiresAt=past))
    response = await host_client.get("/api/v1/requests/host-req-1/answer")
    assert verified(response.json()) == {"id": "host-req-1", "ok": False, "reason": "expired"}
    assert (await Request.objects.aget(pk="host-req-1")).status == RequestStatus.EXPIRED


async def test_a_long_poll_that_goes_away_leaves_the_request_open(host_client, long_poll_parked):
    """A host that disconnects mid-poll will ask again: giving up withdraws nothing."""
    await host_client.post("/api/v1/requests", new_request())
    polling = asyncio.ensure_future(host_client.get("/api/v1/requests/host-req-1/answer?wait=20"))
    await asyncio.wait_for(long_poll_parked.wait(), 5)
    polling.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await polling
    assert "host-req-1" not in runner.supervisor().waiters
    assert (await Request.objects.aget(pk="host-req-1")).status == RequestStatus.OPEN


async def test_long_poll_on_an_unknown_request_is_404(host_client):
    response = await host_client.get("/api/v1/requests/nobody-asked/answer?wait=5")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


@pytest.mark.parametrize("wait", ["-1", "61", "abc", "nan", "inf", "", "1e9"])
async def test_long_poll_with_a_bad_wait_is_400(host_client, wait):
    await host_client.post("/api/v1/requests", new_request())
    response = await host_client.get(f"/api/v1/requests/host-req-1/answer?wait={wait}")
    assert response.status_code == 400
    assert "'wait' must be a number of seconds from 0 to 60" in response.json()["message"]


async def test_long_poll_with_wait_given_twice_is_400_not_the_last_one_taken(host_client):
    # Django's QueryDict keeps the last of a repeated parameter; a call that says two things is refused.
    await host_client.post("/api/v1/requests", new_request())
    response = await host_client.get("/api/v1/requests/host-req-1/answer?wait=abc&wait=0.1")
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "bad_request" and body["field"] == "wait"
    assert body["field_errors"] == {"wait": ["Give 'wait' once; it was given 2 times."]}


# -- POST /api/v1/requests/<id>/cancel ---------------------------------------------------------------------


async def test_cancel_is_200_with_the_answer_and_a_later_answer_is_409(host_client, reviewer, console_events):
    await host_client.post("/api/v1/requests", new_request())
    response = await host_client.post("/api/v1/requests/host-req-1/cancel")
    assert response.status_code == 200
    assert verified(response.json()) == {"id": "host-req-1", "ok": False, "reason": "cancelled"}

    cancelled = await console_events.next("request.cancelled", request_id="host-req-1")
    assert cancelled["actor"] == "svc"
    late = await answer_as_reviewer(reviewer, "host-req-1", {"ok": True})
    assert late.status_code == 409
    assert late.json()["error"] == "not_open"
    assert "already cancelled by svc at " in late.json()["message"]

    again = await host_client.post("/api/v1/requests/host-req-1/cancel")
    assert again.status_code == 409
    assert "already cancelled by svc" in again.json()["message"]
    polled = await host_client.get("/api/v1/requests/host-req-1/answer")
    assert verified(polled.json()) == {"id": "host-req-1", "ok": False, "reason": "cancelled"}


async def test_cancel_after_a_reviewer_answered_is_409_naming_them(host_client, reviewer):
    await host_client.post("/api/v1/requests", new_request())
    await answer_as_reviewer(reviewer, "host-req-1", {"ok": True})
    response = await host_client.post("/api/v1/requests/host-req-1/cancel")
    assert response.status_code == 409
    assert "already answered by erin at " in response.json()["message"]


async def test_cancel_by_another_user_is_403(host_client, other_token):
    await host_client.post("/api/v1/requests", new_request())
    response = await host_client.post("/api/v1/requests/host-req-1/cancel", token=other_token)
    assert response.status_code == 403
    assert response.json()["error"] == "forbidden"
    assert (await Request.objects.aget(pk="host-req-1")).status == RequestStatus.OPEN


async def test_cancel_of_an_unknown_request_is_404(host_client):
    response = await host_client.post("/api/v1/requests/nobody-asked/cancel")
    assert response.status_code == 404


async def test_unknown_api_paths_are_json_404s(host_client):
    response = await host_client.get("/api/v1/no/such/thing")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


# -- /ws/host/ ------------------------------------------------------------------------------------------------


async def test_host_socket_delivers_answers_as_they_happen(host_client, reviewer, svc_token, other_token):
    async with host_socket(svc_token) as (accepted, _, socket):
        assert accepted
        await host_client.post("/api/v1/requests", new_request("mine-1"))
        await host_client.post("/api/v1/requests", new_request("theirs-1"), token=other_token)
        await host_client.post("/api/v1/requests", new_request("mine-2"))

        await answer_as_reviewer(reviewer, "theirs-1", {"ok": True})  # not this host's: not sent
        await answer_as_reviewer(reviewer, "mine-2", {"ok": False, "reason": "declined"})
        assert verified_frame(await socket.receive_json_from(RECEIVE_TIMEOUT)) == {
            "type": "answer",
            "answer": {"id": "mine-2", "ok": False, "reason": "declined"},
        }
        await answer_as_reviewer(reviewer, "mine-1", {"ok": True, "data": {"comment": "ok"}})
        assert verified_frame(await socket.receive_json_from(RECEIVE_TIMEOUT)) == {
            "type": "answer",
            "answer": {"id": "mine-1", "ok": True, "data": {"comment": "ok"}},
        }
        assert await socket.receive_nothing(0.2)


async def test_host_socket_accepts_the_token_as_a_query_parameter(host_client, reviewer, svc_token):
    async with host_socket(query_token=svc_token) as (accepted, _, socket):
        assert accepted
        await host_client.post("/api/v1/requests", new_request())
        await host_client.post("/api/v1/requests/host-req-1/cancel")
        frame = await socket.receive_json_from(RECEIVE_TIMEOUT)
        assert verified(frame["answer"]) == {"id": "host-req-1", "ok": False, "reason": "cancelled"}


async def test_host_socket_watch_sends_a_resolved_answer_at_once(host_client, reviewer, svc_token, other_token):
    await host_client.post("/api/v1/requests", new_request("done-before"), token=other_token)
    await answer_as_reviewer(reviewer, "done-before", {"ok": True})
    async with host_socket(svc_token) as (_, _, socket):
        await socket.send_json_to({"type": "watch", "request": "done-before"})
        assert verified_frame(await socket.receive_json_from(RECEIVE_TIMEOUT)) == {
            "type": "answer",
            "answer": {"id": "done-before", "ok": True},
        }


async def test_host_socket_watch_on_an_open_request_acknowledges_then_delivers(
    host_client, reviewer, svc_token, other_token
):
    await host_client.post("/api/v1/requests", new_request("watched"), token=other_token)
    async with host_socket(svc_token) as (_, _, socket):
        await socket.send_json_to({"type": "watch", "request": "watched", "ref": 7})
        assert await socket.receive_json_from(RECEIVE_TIMEOUT) == {
            "type": "watching",
            "request": "watched",
            "status": "open",
            "ref": 7,
        }
        await answer_as_reviewer(reviewer, "watched", {"ok": False})
        frame = await socket.receive_json_from(RECEIVE_TIMEOUT)
        assert verified_frame(frame) == {
            "type": "answer",
            "answer": {"id": "watched", "ok": False, "reason": "declined"},
        }


async def test_host_socket_refuses_bad_frames_and_unknown_requests(svc_token):
    async with host_socket(svc_token) as (_, _, socket):
        await socket.send_json_to({"type": "watch", "request": "nobody-asked"})
        frame = await socket.receive_json_from(RECEIVE_TIMEOUT)
        assert (frame["type"], frame["error"]) == ("error", "not_found")
        await socket.send_json_to({"type": "answer", "request": "x"})
        frame = await socket.receive_json_from(RECEIVE_TIMEOUT)
        assert (frame["error"], "watch" in frame["message"]) == ("bad_frame", True)
        await socket.send_to(text_data="not json")
        assert (await socket.receive_json_from(RECEIVE_TIMEOUT))["error"] == "bad_frame"


async def test_host_socket_catches_up_on_a_dropped_notification(host_client, reviewer, svc_token, monkeypatch):
    """The channel layer only carries hints: a missed answer is read from the database at the next event."""
    await host_client.post("/api/v1/requests", new_request("dropped"))
    await host_client.post("/api/v1/requests", new_request("heard"))
    async with host_socket(svc_token) as (_, _, socket):
        real_publish = events.publish
        monkeypatch.setattr(events, "publish", lambda event, build_frame=None: None)
        await answer_as_reviewer(reviewer, "dropped", {"ok": True})
        monkeypatch.setattr(events, "publish", real_publish)
        await answer_as_reviewer(reviewer, "heard", {"ok": False})
        first = await socket.receive_json_from(RECEIVE_TIMEOUT)
        second = await socket.receive_json_from(RECEIVE_TIMEOUT)
        assert [first["answer"]["id"], second["answer"]["id"]] == ["dropped", "heard"]


@pytest.mark.parametrize("token", [None, "tnx_not-a-real-token"], ids=["no-token", "unknown-token"])
async def test_host_socket_is_refused_without_a_valid_token(token):
    async with host_socket(token) as (accepted, code, _):
        assert accepted is False
        assert code == 4401


async def test_host_socket_is_refused_with_a_revoked_token(svc, svc_token):
    row = await ApiToken.objects.aget(user=svc)
    await sync_to_async(tokens.revoke_token)(svc, row.pk)
    async with host_socket(svc_token) as (accepted, code, _):
        assert (accepted, code) == (False, 4401)


async def test_host_socket_closes_when_its_token_is_revoked(host_client, reviewer, svc, svc_token):
    async with host_socket(svc_token) as (_, _, socket):
        await host_client.post("/api/v1/requests", new_request())
        row = await ApiToken.objects.aget(user=svc)
        await sync_to_async(tokens.revoke_token)(svc, row.pk)
        await answer_as_reviewer(reviewer, "host-req-1", {"ok": True})
        assert await socket.receive_output(RECEIVE_TIMEOUT) == {"type": "websocket.close", "code": 4401}


async def test_host_socket_refuses_a_foreign_browser_origin_but_not_its_own(svc_token):
    async with host_socket(svc_token, origin="http://evil.example:8000") as (accepted, code, _):
        assert accepted is False and code != 4401  # refused for the origin, before the token is looked at
    async with host_socket(svc_token, origin="http://127.0.0.1:9999") as (accepted, _, _):
        assert accepted is False  # same host name, another port: another site
    async with host_socket(svc_token, origin=f"http://{HOST}") as (accepted, _, _):
        assert accepted is True  # the console's own page may use it


async def test_the_dashboard_socket_still_requires_an_origin(svc_token):
    communicator = WebsocketCommunicator(
        application,
        "/ws/console/",
        headers=[(b"host", HOST.encode()), (b"authorization", f"Bearer {svc_token}".encode())],
    )
    accepted, _ = await communicator.connect(timeout=RECEIVE_TIMEOUT)
    assert accepted is False
    await communicator.disconnect()
