"""An answer may name the call digest of the request view it was made on (``call_digest``): the API's body and the
dashboard socket's answer frame carry it to the door, which refuses an answer made for another call (409
``conflict``), so a page showing an old call never approves a new one under the same id (ids are used again after
``prune_runs``). Without a digest an answer works as before."""

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from approvals.models import AuditEvent, Request, RequestStatus
from approvals.review import decisions
from approvals.runs import runner
from console_remote import call_digest
from tests.support.api_client import post_json
from tests.support.dashboard import async_waiting_request, dashboard_for, waiting_request

pytestmark = pytest.mark.django_db(transaction=True)
WEB = {"service": "web"}
API = {"service": "api"}


@pytest.fixture(autouse=True)
def _stop_leftover_runs(stop_leftover_runs):
    """Every test here cancels what it left running."""


async def view_of(api, request_id):
    response = await api.get(f"/api/v1/requests/{request_id}")
    assert response.status_code == 200
    return response.json()


@sync_to_async
def reopened_with(request_id, args, starter):
    """The request gone (as prune_runs deletes it, once archive_audit took its events) and its id opened again by a
    new run with ``args``."""
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {AuditEvent._meta.db_table} WHERE request_id = %s", [request_id])
        cursor.execute(f"DELETE FROM {Request._meta.db_table} WHERE id = %s", [request_id])
    return waiting_request(request_id, starter=starter, tool="deploy", args=args)


async def test_an_api_answer_made_for_another_call_is_refused_with_409(api, alice):
    await async_waiting_request("dig-api-1", starter=alice, tool="deploy", args=WEB)
    shown = (await view_of(api, "dig-api-1"))["call_digest"]
    assert shown == call_digest("deploy", WEB)
    await reopened_with("dig-api-1", API, alice)

    refused = await post_json(api, "/api/v1/requests/dig-api-1/answer", {"ok": True, "digest": shown})
    assert refused.status_code == 409
    body = refused.json()
    assert body["error"] == "conflict"
    assert "made for a different call" in body["message"] and "reload it" in body["message"]
    assert (await Request.objects.aget(pk="dig-api-1")).status == RequestStatus.OPEN

    now = (await view_of(api, "dig-api-1"))["call_digest"]
    assert now == call_digest("deploy", API)
    accepted = await post_json(api, "/api/v1/requests/dig-api-1/answer", {"ok": True, "digest": now})
    assert accepted.status_code == 200, accepted.content
    assert accepted.json()["ok"] is True


async def test_an_api_answer_without_a_digest_works_as_before(api, alice):
    await async_waiting_request("dig-api-2", starter=alice, tool="deploy", args=WEB)
    answered = await post_json(api, "/api/v1/requests/dig-api-2/answer", {"ok": False, "reason": "declined"})
    assert answered.status_code == 200, answered.content
    assert (await Request.objects.aget(pk="dig-api-2")).status == RequestStatus.DECLINED


async def test_a_decline_made_for_another_call_is_refused_too(api, alice):
    await async_waiting_request("dig-api-3", starter=alice, tool="deploy", args=WEB)
    stale = call_digest("deploy", API)
    refused = await post_json(
        api, "/api/v1/requests/dig-api-3/answer", {"ok": False, "reason": "declined", "digest": stale}
    )
    assert refused.status_code == 409 and refused.json()["error"] == "conflict"


@pytest.mark.parametrize("digest", [7, ["sha256:00"], {"digest": "x"}, True])
async def test_a_digest_that_is_not_text_is_refused_naming_the_field(api, alice, digest):
    await async_waiting_request("dig-api-4", starter=alice, tool="deploy", args=WEB)
    refused = await post_json(api, "/api/v1/requests/dig-api-4/answer", {"ok": True, "digest": digest})
    assert refused.status_code == 400
    assert refused.json()["field"] == "digest"
    assert (await Request.objects.aget(pk="dig-api-4")).status == RequestStatus.OPEN


@pytest.mark.parametrize("digest", ["abc", "", "sha256:" + "A" * 64, "sha1:" + "0" * 40, "sha256:" + "0" * 63])
async def test_a_digest_that_is_no_call_digest_is_refused_as_invalid_not_as_another_call(api, alice, digest):
    await async_waiting_request("dig-api-5", starter=alice, tool="deploy", args=WEB)
    refused = await post_json(api, "/api/v1/requests/dig-api-5/answer", {"ok": True, "digest": digest})
    assert refused.status_code == 400, refused.json()
    assert refused.json()["error"] == "invalid" and "digest" in refused.json()["field_errors"]
    assert "sha256:" in refused.json()["message"]  # says what a digest looks like
    assert (await Request.objects.aget(pk="dig-api-5")).status == RequestStatus.OPEN


async def test_a_dashboard_answer_made_for_another_call_gets_an_error_frame(alice):
    await runner.ensure_started()
    await async_waiting_request("dig-ws-1", starter=alice, tool="deploy", args=WEB)
    async with dashboard_for(alice) as dashboard:
        [shown] = [r for r in dashboard.snapshot["requests"] if r["id"] == "dig-ws-1"]
        await reopened_with("dig-ws-1", API, alice)
        await dashboard.send(
            {"type": "answer", "ref": "stale", "request": "dig-ws-1", "ok": True, "digest": shown["call_digest"]}
        )
        error = await dashboard.next("error", ref="stale")
        assert error["error"] == "conflict" and "made for a different call" in error["message"]
        assert (await Request.objects.aget(pk="dig-ws-1")).status == RequestStatus.OPEN

        now = call_digest("deploy", API)
        await dashboard.send({"type": "answer", "ref": "fresh", "request": "dig-ws-1", "ok": True, "digest": now})
        answered = await dashboard.next("answered", ref="fresh")
        assert answered["answer"]["ok"] is True


async def test_the_door_refuses_another_calls_digest_before_anything_is_written(alice):
    await async_waiting_request("dig-door-1", starter=alice, tool="deploy", args=WEB)
    with pytest.raises(decisions.DecisionError) as refused:
        await decisions.aresolve_request("dig-door-1", ok=True, digest=call_digest("deploy", API), user=alice)
    assert refused.value.code == "conflict"
    assert (await Request.objects.aget(pk="dig-door-1")).answered_at is None
