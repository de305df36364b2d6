"""The JSON API under /api/v1/: session auth, CSRF, and 4xx (never 500) for bad input.

Requests go through django.test.AsyncClient inside async tests, so runs the API
starts are tasks on the test's own loop: tests await them with
``runner.wait_for_run`` and await their events with ``console_events``.
"""

import json

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from approvals.models import AuditEvent, Request, RequestStatus, Run, RunStatus
from approvals.runs import runner
from tests.support.api_client import logged_in, post_json
from tests.support.signatures import verified

pytestmark = pytest.mark.django_db(transaction=True)

WIRE_REQUEST_KEYS = {"id", "kind", "prompt", "url", "data", "expiresAt"}
REASON_EXPIRED_IS_THE_CONSOLES = (
    'Only the console marks a request expired, when its deadline passes; decline it (reason "declined") '
    'or withdraw it (reason "cancelled") instead.'
)


@pytest.fixture(autouse=True)
def _stop_leftover_runs(stop_leftover_runs):
    """Every test here cancels what it left running."""


async def start_deploy(api, console_events, service="web"):
    """Start a deploy run through the API and wait until it asks; returns (run body, request id)."""
    response = await post_json(api, "/api/v1/runs", {"tool": "deploy", "args": {"service": service}})
    assert response.status_code == 201, response.content
    run = response.json()
    opened = await console_events.next("request.opened", run_id=run["id"])
    return run, opened["request_id"]


# -- POST /api/v1/runs ---------------------------------------------------------------------


async def test_create_run_returns_201_with_the_run(api):
    response = await post_json(
        api, "/api/v1/runs", {"tool": "crunch", "args": {"steps": 2, "pause": 0.01}, "timeout": 5}
    )
    assert response.status_code == 201
    body = response.json()
    assert body["tool"] == "crunch"
    assert body["args"] == {"steps": 2, "pause": 0.01}
    assert body["timeout"] == 5.0
    assert body["status"] == "running"
    assert body["started_by"] == "alice"
    assert body["result"] is None and body["request"] is None
    row = await Run.objects.aget(pk=body["id"])
    assert (row.tool, row.args, row.timeout) == ("crunch", {"steps": 2, "pause": 0.01}, 5.0)

    await runner.wait_for_run(body["id"])
    row = await Run.objects.aget(pk=body["id"])
    assert (row.status, row.result_output) == (RunStatus.SUCCEEDED, "crunched 2 of 2 steps")


async def test_the_201_body_is_what_reading_the_new_run_back_gives(api):
    # The body is built from the row as created, not read back: the two must not differ.
    response = await post_json(
        api, "/api/v1/runs", {"tool": "crunch", "args": {"steps": 500, "pause": 0.05}, "timeout": 30}
    )
    body = response.json()
    read_back = await api.get(f"/api/v1/runs/{body['id']}")
    assert json.dumps(read_back.json(), sort_keys=True) == json.dumps(body, sort_keys=True)
    await api.post(f"/api/v1/runs/{body['id']}/cancel")
    await runner.wait_for_run(body["id"])


async def test_create_run_without_args_or_timeout(api):
    response = await post_json(api, "/api/v1/runs", {"tool": "crunch", "args": {"steps": 0}})
    assert response.status_code == 201
    assert response.json()["timeout"] is None
    await runner.wait_for_run(response.json()["id"])


async def test_create_run_unauthenticated_is_401_json():
    response = await post_json(AsyncClient(), "/api/v1/runs", {"tool": "crunch"})
    assert response.status_code == 401
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["error"] == "unauthenticated"
    assert await Run.objects.acount() == 0


async def test_create_run_without_csrf_token_is_403(alice):
    client = await logged_in(alice, enforce_csrf_checks=True)
    response = await post_json(client, "/api/v1/runs", {"tool": "crunch", "args": {"steps": 0}})
    assert response.status_code == 403
    assert await Run.objects.acount() == 0


async def test_create_run_with_csrf_token_is_accepted(alice):
    client = await logged_in(alice, enforce_csrf_checks=True)
    page = await client.get("/")  # the dashboard sets the CSRF cookie
    token = page.cookies["csrftoken"].value
    response = await post_json(
        client, "/api/v1/runs", {"tool": "crunch", "args": {"steps": 0}}, headers={"X-CSRFToken": token}
    )
    assert response.status_code == 201
    await runner.wait_for_run(response.json()["id"])


async def test_create_run_unknown_tool_is_400_listing_known_tools(api):
    response = await post_json(api, "/api/v1/runs", {"tool": "rm-rf", "args": {}})
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "bad_request"
    assert "rm-rf" in body["message"]
    for name in ("deploy", "refund", "crunch", "fetchish", "balance"):
        assert name in body["message"]
    assert await Run.objects.acount() == 0


@pytest.mark.parametrize(
    "body",
    [
        '{"tool": "crunch",',
        "not json at all",
        b"\xff\xfe\x00",
        "[" * 20000 + "]" * 20000,
        "[]",
        '"crunch"',
        "null",
        '{"tool": "crunch", "timeout": NaN}',
        '{"tool": "crunch", "timeout": Infinity}',
        '{"tool": "crunch", "timeout": 1e400}',
        '{"tool": "crunch", "args": {"steps": -Infinity}}',
    ],
    ids=[
        "truncated",
        "not-json",
        "not-utf8",
        "deeply-nested",
        "array",
        "string",
        "null",
        "timeout-nan",
        "timeout-infinity",
        "timeout-overflow",
        "args-infinity",
    ],
)
async def test_create_run_malformed_body_is_400(api, body):
    response = await post_json(api, "/api/v1/runs", body)
    assert response.status_code == 400
    not_an_object = body in ("[]", '"crunch"', "null")  # JSON, but not the object a call takes
    assert response.json()["error"] == ("bad_request" if not_an_object else "bad_json")
    assert await Run.objects.acount() == 0


@pytest.mark.parametrize("args", [[], "service=web", 3, True], ids=["list", "string", "number", "bool"])
async def test_create_run_args_not_an_object_is_400(api, args):
    response = await post_json(api, "/api/v1/runs", {"tool": "deploy", "args": args})
    assert response.status_code == 400
    assert "'args'" in response.json()["message"]
    assert await Run.objects.acount() == 0


@pytest.mark.parametrize("timeout", ["10", -1, 0, True, [5]], ids=["string", "negative", "zero", "bool", "list"])
async def test_create_run_bad_timeout_is_400(api, timeout):
    response = await post_json(api, "/api/v1/runs", {"tool": "crunch", "args": {}, "timeout": timeout})
    assert response.status_code == 400
    assert "'timeout'" in response.json()["message"]
    assert await Run.objects.acount() == 0


async def test_create_run_missing_tool_is_400(api):
    response = await post_json(api, "/api/v1/runs", {"args": {}})
    assert response.status_code == 400
    assert response.json()["error"] == "bad_request"


async def test_create_run_with_get_is_405(api):
    response = await api.get("/api/v1/runs")
    assert response.status_code == 405


# -- GET /api/v1/runs/<id> ---------------------------------------------------------------------


async def test_get_run_while_waiting_and_after_answer(api, console_events):
    run, request_id = await start_deploy(api, console_events, service="api")

    response = await api.get(f"/api/v1/runs/{run['id']}")
    assert response.status_code == 200
    body = response.json()
    assert {"id", "tool", "args", "status", "result", "request"} <= set(body)
    assert (body["id"], body["tool"], body["args"]) == (run["id"], "deploy", {"service": "api"})
    assert body["status"] == "waiting"
    assert body["result"] is None
    assert WIRE_REQUEST_KEYS <= set(body["request"])
    assert body["request"]["id"] == request_id
    assert body["request"]["prompt"] == "Which environment should api be deployed to?"
    assert body["request"]["status"] == "open"

    answer = await post_json(api, f"/api/v1/requests/{request_id}/answer", {"ok": True, "data": {"env": "production"}})
    assert answer.status_code == 200
    await runner.wait_for_run(run["id"])

    body = (await api.get(f"/api/v1/runs/{run['id']}")).json()
    assert body["status"] == "succeeded"
    assert body["result"] == {"output": "deployed to production", "is_error": False}
    assert body["request"]["status"] == "answered"
    assert verified(body["request"]["answer"]) == {"id": request_id, "ok": True, "data": {"env": "production"}}


async def test_get_unknown_run_is_404(api):
    response = await api.get("/api/v1/runs/424242")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


async def test_get_run_unauthenticated_is_401():
    response = await AsyncClient().get("/api/v1/runs/1")
    assert response.status_code == 401
    assert response.json()["error"] == "unauthenticated"


# -- POST /api/v1/runs/<id>/cancel ---------------------------------------------------------------


async def test_cancel_run_is_202_and_the_run_ends_cancelled(api, console_events):
    created = await post_json(api, "/api/v1/runs", {"tool": "crunch", "args": {"steps": 500, "pause": 0.05}})
    run_id = created.json()["id"]

    response = await api.post(f"/api/v1/runs/{run_id}/cancel")
    assert response.status_code == 202
    assert response.json() == {"id": run_id, "cancel_requested": True}

    finished = await console_events.next("run.finished", run_id=run_id)
    assert finished["payload"]["status"] == "cancelled"
    await runner.wait_for_run(run_id)
    row = await Run.objects.aget(pk=run_id)
    assert row.status == RunStatus.CANCELLED
    assert row.cancel_requested is True
    assert row.result_output.startswith("cancelled after ")


async def test_cancel_waiting_run_withdraws_its_request(api, console_events):
    run, request_id = await start_deploy(api, console_events)
    response = await api.post(f"/api/v1/runs/{run['id']}/cancel")
    assert response.status_code == 202
    await runner.wait_for_run(run["id"])
    assert (await Run.objects.aget(pk=run["id"])).status == RunStatus.CANCELLED
    assert (await Request.objects.aget(pk=request_id)).status == RequestStatus.CANCELLED


async def test_cancel_finished_run_is_409(api):
    created = await post_json(api, "/api/v1/runs", {"tool": "crunch", "args": {"steps": 0}})
    run_id = created.json()["id"]
    await runner.wait_for_run(run_id)
    response = await api.post(f"/api/v1/runs/{run_id}/cancel")
    assert response.status_code == 409
    assert response.json()["error"] == "not_open"


async def test_cancel_unknown_run_is_404(api):
    response = await api.post("/api/v1/runs/424242/cancel")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


# -- GET /api/v1/requests ----------------------------------------------------------------------


async def test_list_open_requests_in_wire_keys(api, console_events):
    run, request_id = await start_deploy(api, console_events, service="db")
    done = await post_json(api, "/api/v1/runs", {"tool": "crunch", "args": {"steps": 0}})
    await runner.wait_for_run(done.json()["id"])

    response = await api.get("/api/v1/requests?status=open")
    assert response.status_code == 200
    requests = response.json()["requests"]
    assert [r["id"] for r in requests] == [request_id]
    request = requests[0]
    assert WIRE_REQUEST_KEYS <= set(request)
    assert "expires_at" not in request
    assert request["kind"] == "input"
    assert request["prompt"] == "Which environment should db be deployed to?"
    assert request["url"] is None
    assert request["expiresAt"] is None
    assert request["data"]["schema"]["required"] == ["env"]
    assert request["run"] == run["id"]
    assert request["answer"] is None


async def test_one_request_as_the_caller_sees_it_open_then_resolved(api, console_events):
    run, request_id = await start_deploy(api, console_events, service="one")
    response = await api.get(f"/api/v1/requests/{request_id}")
    assert response.status_code == 200
    view = response.json()
    assert WIRE_REQUEST_KEYS <= set(view)
    assert (view["id"], view["status"], view["run"]) == (request_id, "open", run["id"])
    assert view["policy"]["may_answer"] is True  # what this caller may do, as the socket says it

    assert (await post_json(api, f"/api/v1/requests/{request_id}/answer", {"ok": False})).status_code == 200
    view = (await api.get(f"/api/v1/requests/{request_id}")).json()
    assert view["status"] == "declined"
    assert view["decision"]["text"] == "Declined by alice"


async def test_one_unknown_request_is_404(api):
    response = await api.get("/api/v1/requests/no-such-request")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


async def test_list_requests_filters_by_status(api, console_events):
    _, first = await start_deploy(api, console_events, service="one")
    _, second = await start_deploy(api, console_events, service="two")
    assert (await post_json(api, f"/api/v1/requests/{first}/answer", {"ok": False})).status_code == 200

    open_ids = [r["id"] for r in (await api.get("/api/v1/requests?status=open")).json()["requests"]]
    declined_ids = [r["id"] for r in (await api.get("/api/v1/requests?status=declined")).json()["requests"]]
    all_ids = [r["id"] for r in (await api.get("/api/v1/requests")).json()["requests"]]
    assert open_ids == [second]
    assert declined_ids == [first]
    assert sorted(all_ids) == sorted([first, second])


async def test_list_requests_bad_status_is_400(api):
    response = await api.get("/api/v1/requests?status=pending")
    assert response.status_code == 400
    assert response.json()["error"] == "bad_request"
    assert "open" in response.json()["message"]


async def test_list_pages_through_every_open_request_with_a_cursor_and_says_how_many(api):
    # The list used to stop at 500 rows, silently: no count, no way to ask for the rest.
    from tests.support.long_queue import open_requests_in_bulk

    ids = await sync_to_async(open_requests_in_bulk)(1200)
    loaded, url, pages = [], "/api/v1/requests?status=open&limit=500", 0
    while url:
        response = await api.get(url)
        assert response.status_code == 200, response.content
        body = response.json()
        assert body["count"] == 1200
        assert len(body["requests"]) <= 500
        loaded += [r["id"] for r in body["requests"]]
        url = f"/api/v1/requests?status=open&limit=500&after={body['next']}" if body["next"] else None
        pages += 1
    assert loaded == ids  # oldest first, every one once
    assert pages == 3

    first = (await api.get("/api/v1/requests?status=open")).json()
    assert [r["id"] for r in first["requests"]] == ids[:100]  # the default page
    # A request answered between two pages shifts nothing: the next page starts after the last one shown.
    await Request.objects.filter(pk__in=ids[:150]).aupdate(status=RequestStatus.DECLINED)
    second = (await api.get(f"/api/v1/requests?status=open&after={first['next']}")).json()
    assert [r["id"] for r in second["requests"]] == ids[150:250]
    assert second["count"] == 1050


@pytest.mark.parametrize(
    "query, message",
    [
        ("limit=0", "'limit' must be a whole number from 1 to 500"),
        ("limit=501", "'limit' must be a whole number from 1 to 500"),
        ("limit=ten", "'limit' must be a whole number from 1 to 500"),
        ("after=bm90LWEtY3Vyc29y", "not a cursor this console gave out"),
        ("after=", "not a cursor this console gave out"),
    ],
)
async def test_list_requests_refuses_a_bad_page_and_says_what_to_send(api, query, message):
    response = await api.get(f"/api/v1/requests?status=open&{query}")
    assert response.status_code == 400
    assert response.json()["error"] == "bad_request"
    assert message in response.json()["message"]


# -- POST /api/v1/requests/<id>/answer -------------------------------------------------------------


async def test_a_script_approves_the_refund_it_started_as_the_same_user(api, console_events):
    """The README's walkthrough from a script: no policy, so the run's starter may answer its approval."""
    response = await post_json(api, "/api/v1/runs", {"tool": "refund", "args": {"order": "A-7", "amount": 12}})
    assert response.status_code == 201, response.content
    run = response.json()
    opened = await console_events.next("request.opened", run_id=run["id"])
    answer = await post_json(api, f"/api/v1/requests/{opened['request_id']}/answer", {"ok": True})
    assert answer.status_code == 200, answer.content
    assert verified(answer.json()) == {"id": opened["request_id"], "ok": True}
    await runner.wait_for_run(run["id"])
    body = (await api.get(f"/api/v1/runs/{run['id']}")).json()
    assert (body["status"], body["result"]) == (
        "succeeded",
        {"output": "refunded 12 EUR on order A-7", "is_error": False},
    )


async def test_answer_is_200_with_the_stored_answer_in_wire_keys(api, console_events):
    run, request_id = await start_deploy(api, console_events)
    response = await post_json(
        api, f"/api/v1/requests/{request_id}/answer", {"ok": True, "data": {"env": "staging"}, "comment": "go"}
    )
    assert response.status_code == 200
    assert verified(response.json()) == {"id": request_id, "ok": True, "data": {"env": "staging"}}

    row = await Request.objects.select_related("answered_by").aget(pk=request_id)
    assert (row.status, row.answer_ok, row.answer_data, row.answer_reason) == (
        RequestStatus.ANSWERED,
        True,
        {"env": "staging"},
        None,
    )
    assert row.comment == "go"
    assert row.answered_by.username == "alice"
    await runner.wait_for_run(run["id"])
    assert (await Run.objects.aget(pk=run["id"])).result_output == "deployed to staging"


async def test_second_answer_is_409_naming_who_answered(api, bob, console_events):
    run, request_id = await start_deploy(api, console_events)
    first = await post_json(api, f"/api/v1/requests/{request_id}/answer", {"ok": True, "data": {"env": "staging"}})
    assert first.status_code == 200

    bob_api = await logged_in(bob)
    second = await post_json(
        bob_api, f"/api/v1/requests/{request_id}/answer", {"ok": True, "data": {"env": "production"}}
    )
    assert second.status_code == 409
    body = second.json()
    assert body["error"] == "not_open"
    assert "alice" in body["message"]
    assert "answered" in body["message"]

    await runner.wait_for_run(run["id"])
    assert (await Run.objects.aget(pk=run["id"])).result_output == "deployed to staging"
    assert (await Request.objects.aget(pk=request_id)).answer_data == {"env": "staging"}


@pytest.mark.parametrize(
    "data, field",
    [({"env": "mars"}, "env"), ({}, "env"), ({"env": 7}, "env")],
    ids=["not-in-enum", "missing", "wrong-type"],
)
async def test_invalid_answer_data_is_400_with_field_errors_and_the_request_stays_open(
    api, console_events, data, field
):
    run, request_id = await start_deploy(api, console_events)
    response = await post_json(api, f"/api/v1/requests/{request_id}/answer", {"ok": True, "data": data})
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "invalid"
    assert list(body["field_errors"]) == [field]
    assert body["field_errors"][field]

    row = await Request.objects.aget(pk=request_id)
    assert row.status == RequestStatus.OPEN and row.answer_ok is None
    assert (await Run.objects.aget(pk=run["id"])).status == RunStatus.WAITING
    listed = (await api.get("/api/v1/requests?status=open")).json()["requests"]
    assert [r["id"] for r in listed] == [request_id]


async def test_answer_data_not_an_object_is_400(api, console_events):
    _, request_id = await start_deploy(api, console_events)
    response = await post_json(api, f"/api/v1/requests/{request_id}/answer", {"ok": True, "data": ["staging"]})
    assert response.status_code == 400
    assert response.json()["error"] == "invalid"
    assert (await Request.objects.aget(pk=request_id)).status == RequestStatus.OPEN


@pytest.mark.parametrize("number", ["NaN", "Infinity", "1e400"])
async def test_answer_with_a_non_finite_number_is_400_and_the_request_stays_open(api, console_events, number):
    _, request_id = await start_deploy(api, console_events)
    body = '{"ok": true, "data": {"env": "staging", "n": %s}}' % number
    response = await post_json(api, f"/api/v1/requests/{request_id}/answer", body)
    assert response.status_code == 400
    assert response.json()["error"] == "bad_json"
    assert (await Request.objects.aget(pk=request_id)).status == RequestStatus.OPEN


async def test_decline_with_reason_stores_ok_false_reason_declined(api, console_events):
    run, request_id = await start_deploy(api, console_events)
    response = await post_json(api, f"/api/v1/requests/{request_id}/answer", {"ok": False, "reason": "declined"})
    assert response.status_code == 200
    assert verified(response.json()) == {"id": request_id, "ok": False, "reason": "declined"}

    row = await Request.objects.aget(pk=request_id)
    assert (row.status, row.answer_ok, row.answer_reason) == (RequestStatus.DECLINED, False, "declined")
    await runner.wait_for_run(run["id"])
    run_row = await Run.objects.aget(pk=run["id"])
    assert run_row.status == RunStatus.FAILED
    assert run_row.result_is_error is True
    assert run_row.result_output.startswith("declined/expired: ")


async def test_decline_without_reason_defaults_to_declined(api, console_events):
    _, request_id = await start_deploy(api, console_events)
    response = await post_json(api, f"/api/v1/requests/{request_id}/answer", {"ok": False})
    assert response.status_code == 200
    assert verified(response.json()) == {"id": request_id, "ok": False, "reason": "declined"}


async def test_decline_with_bogus_reason_is_400(api, console_events):
    _, request_id = await start_deploy(api, console_events)
    response = await post_json(api, f"/api/v1/requests/{request_id}/answer", {"ok": False, "reason": "bogus"})
    assert response.status_code == 400
    assert response.json()["error"] == "invalid"
    assert "bogus" in response.json()["message"]
    assert (await Request.objects.aget(pk=request_id)).status == RequestStatus.OPEN


async def test_a_reviewer_may_not_mark_a_request_expired(api, bob):
    opened = await post_json(
        await logged_in(bob),
        "/api/v1/requests",
        {"id": "due-2031", "kind": "approval", "prompt": "Ship?", "expiresAt": "2031-01-01T00:00:00Z"},
    )
    assert opened.status_code == 201, opened.json()
    response = await post_json(api, "/api/v1/requests/due-2031/answer", {"ok": False, "reason": "expired"})
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid",
        "message": REASON_EXPIRED_IS_THE_CONSOLES,
        "field_errors": {"reason": [REASON_EXPIRED_IS_THE_CONSOLES]},
    }
    row = await Request.objects.aget(pk="due-2031")
    assert (row.status, row.answer_ok) == (RequestStatus.OPEN, None)
    assert not await AuditEvent.objects.filter(request_id="due-2031", action="request.expired").aexists()

    response = await post_json(api, "/api/v1/requests/due-2031/answer", {"ok": False, "reason": "declined"})
    assert response.status_code == 200 and response.json()["reason"] == "declined"


async def test_a_refund_answer_may_change_only_the_amount_it_offers(api, bob, console_events):
    started = await post_json(
        await logged_in(bob), "/api/v1/runs", {"tool": "refund", "args": {"order": "A-7", "amount": 80}}
    )
    run_id = started.json()["id"]
    request_id = (await console_events.next("request.opened", run_id=run_id))["request_id"]
    hacked = {"ok": True, "data": {"args": {"amount": 1, "order": "HACKED-ORDER", "currency": "XXX"}}}
    response = await post_json(api, f"/api/v1/requests/{request_id}/answer", hacked)
    assert response.status_code == 400
    assert response.json()["field_errors"] == {
        "order": ["order is not editable in this request; only amount may be changed."],
        "currency": ["currency is not editable in this request; only amount may be changed."],
    }
    row = await Request.objects.aget(pk=request_id)
    assert (row.status, row.answer_data) == (RequestStatus.OPEN, None)

    response = await post_json(
        api, f"/api/v1/requests/{request_id}/answer", {"ok": True, "data": {"args": {"amount": 1}}}
    )
    assert response.status_code == 200
    await runner.wait_for_run(run_id)
    assert (await Run.objects.aget(pk=run_id)).result_output == (
        "refunded 1 EUR on order A-7 (a reviewer changed amount 80 → 1 before approving; the call ran with the changed values)"
    )


async def test_a_host_approval_with_nothing_editable_takes_no_args(api, bob):
    opened = await post_json(
        await logged_in(bob),
        "/api/v1/requests",
        {
            "id": "pay-acme",
            "kind": "approval",
            "prompt": "Pay acme 10?",
            "args": {"amount": 10, "account": "acme"},
        },
    )
    assert opened.status_code == 201, opened.json()
    hacked = {"ok": True, "data": {"args": {"amount": 99999, "account": "attacker"}}}
    response = await post_json(api, "/api/v1/requests/pay-acme/answer", hacked)
    assert response.status_code == 400
    assert response.json()["field_errors"] == {
        "args": ["Nothing in this request is editable: approve it as asked, without 'args'."]
    }
    row = await Request.objects.aget(pk="pay-acme")
    assert (row.status, row.answer_data) == (RequestStatus.OPEN, None)


@pytest.mark.parametrize(
    "body", [{}, {"ok": "yes"}, {"ok": 1}, {"ok": None}], ids=["missing", "string", "number", "null"]
)
async def test_answer_without_a_boolean_ok_is_400(api, console_events, body):
    _, request_id = await start_deploy(api, console_events)
    response = await post_json(api, f"/api/v1/requests/{request_id}/answer", body)
    assert response.status_code == 400
    assert response.json()["error"] == "bad_request"
    assert "'ok'" in response.json()["message"]
    assert (await Request.objects.aget(pk=request_id)).status == RequestStatus.OPEN


@pytest.mark.parametrize(
    "path, field", [("/api/v1/runs", "'tool'"), ("/api/v1/requests", "'id'"), ("/api/v1/requests/any/answer", "'ok'")]
)
async def test_no_body_at_all_is_judged_as_an_empty_object(api, path, field):
    # Found comparing the API before and after django-ninja: it refused a call with no body as a missing 'body'.
    response = await api.post(path, data=b"", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"] == "bad_request" and field in response.json()["message"]


@pytest.mark.parametrize(
    "body, field",
    [({"ok": "true"}, "ok"), ({"ok": True, "comment": 5}, "comment")],
    ids=["ok-as-text", "comment-number"],
)
async def test_an_answer_field_of_the_wrong_type_is_a_400_naming_it_in_field_errors(api, console_events, body, field):
    # Strict: "true" is not true and 5 is not text. Refused by the declared shape with the console's error body,
    # never ninja's 422 {"detail"}; before, a number as the comment was stored as its text.
    _, request_id = await start_deploy(api, console_events)
    response = await post_json(api, f"/api/v1/requests/{request_id}/answer", body)
    assert response.status_code == 400
    refusal = response.json()
    assert (refusal["error"], refusal["field"], list(refusal["field_errors"])) == ("bad_request", field, [field])
    assert refusal["message"] == refusal["field_errors"][field][0] and f"'{field}'" in refusal["message"]
    assert (await Request.objects.aget(pk=request_id)).status == RequestStatus.OPEN


async def test_answer_malformed_json_is_400(api, console_events):
    _, request_id = await start_deploy(api, console_events)
    response = await post_json(api, f"/api/v1/requests/{request_id}/answer", '{"ok": tru')
    assert response.status_code == 400
    assert response.json()["error"] == "bad_json"


async def test_answer_unknown_request_is_404(api):
    response = await post_json(api, "/api/v1/requests/no-such-request/answer", {"ok": True})
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


async def test_answer_unauthenticated_is_401(api, console_events):
    _, request_id = await start_deploy(api, console_events)
    response = await post_json(
        AsyncClient(), f"/api/v1/requests/{request_id}/answer", {"ok": True, "data": {"env": "staging"}}
    )
    assert response.status_code == 401
    assert (await Request.objects.aget(pk=request_id)).status == RequestStatus.OPEN


async def test_answer_without_csrf_token_is_403(alice, api, console_events):
    _, request_id = await start_deploy(api, console_events)
    strict = await logged_in(alice, enforce_csrf_checks=True)
    response = await post_json(
        strict, f"/api/v1/requests/{request_id}/answer", {"ok": True, "data": {"env": "staging"}}
    )
    assert response.status_code == 403
    assert (await Request.objects.aget(pk=request_id)).status == RequestStatus.OPEN


@pytest.mark.parametrize("args", [[1, 2], {"service": "web"}, "x"], ids=["list", "object", "string"])
async def test_an_agent_run_with_args_is_400(api, args):
    """Found by the OpenAPI fuzzing: an agent run silently ignored any 'args' it was sent."""
    response = await post_json(api, "/api/v1/runs", {"agent": {"prompt": "call deploy"}, "args": args})
    assert response.status_code == 400
    assert "An agent run takes no 'args'" in response.json()["message"]
    assert await Run.objects.acount() == 0


async def test_an_api_call_to_a_host_the_console_does_not_serve_is_refused_in_json(api):
    response = await post_json(api, "/api/v1/runs", {"tool": "crunch"}, headers={"Host": "evil.example"})
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["error"] == "bad_request" and "evil.example" in body["message"]
    assert not await Run.objects.aexists()  # refused before anything ran


async def test_a_page_for_a_host_the_console_does_not_serve_is_still_djangos_400():
    response = await AsyncClient().get("/accounts/login/", headers={"Host": "evil.example"})
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
