"""Hostile text and numbers: every one is a 400 with a message (an error frame on a socket that stays open),
and nothing a refused input carried is stored.

The first sections reproduce the attacks the security probe found (issue 19, point 5), one test each;
the last throws generated hostile JSON at every API endpoint and socket frame (hypothesis).
"""
import json

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from toolnexus import Request as WireRequest

from approvals import decisions, runs
from approvals.models import AuditEvent, Request, RequestStatus, Run
from tests.conftest import bearer
from tests.team_helpers import async_waiting_request, dashboard_for
from tests.test_remote_requests import host_socket

pytestmark = pytest.mark.django_db(transaction=True)

RECEIVE_TIMEOUT = 5  # only reached when a test is about to fail
LONE_SURROGATE = "x\\ud800y"  # as JSON text: a valid escape that decodes to a string UTF-8 cannot encode


@pytest.fixture(autouse=True)
def _stop_leftover_runs(stop_leftover_runs):
    """Every test here cancels what it left running."""


@pytest.fixture
async def host_token(make_user, issue_token):
    svc = await sync_to_async(make_user)("svc", password=None)
    return await sync_to_async(issue_token)(svc, "billing")


@pytest.fixture
async def alice(make_user):
    return await sync_to_async(make_user)("alice")


@pytest.fixture
async def reviewer(alice):
    client = AsyncClient()
    await client.aforce_login(alice)
    return client


async def post_text(client, path, text, **kwargs):
    return await client.post(path, data=text, content_type="application/json", **kwargs)


def assert_json_400(response, error="bad_request"):
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["error"] == error and body["message"], body
    return body["message"]


async def stored_rows():
    return (await Run.objects.acount(), await Request.objects.acount(), await AuditEvent.objects.acount())


# -- lone surrogates ------------------------------------------------------------------------------------------


async def test_a_lone_surrogate_in_a_new_requests_prompt_is_a_bad_json_400_and_nothing_is_stored(host_token):
    before = await stored_rows()
    text = '{"id": "broken-text", "kind": "approval", "prompt": "%s"}' % LONE_SURROGATE
    response = await post_text(AsyncClient(), "/api/v1/requests", text, headers=bearer(host_token))
    message = assert_json_400(response, "bad_json")
    assert "surrogate" in message and "UTF-8" in message
    assert await stored_rows() == before


async def test_a_lone_surrogate_in_an_answers_comment_is_a_bad_json_400_and_the_request_stays_open(reviewer):
    request = await async_waiting_request("broken-comment")
    before = await stored_rows()
    text = '{"ok": true, "comment": "%s"}' % LONE_SURROGATE
    response = await post_text(reviewer, f"/api/v1/requests/{request.pk}/answer", text)
    assert_json_400(response, "bad_json")
    assert (await Request.objects.aget(pk=request.pk)).status == RequestStatus.OPEN
    assert await stored_rows() == before


@pytest.mark.parametrize("comment", [LONE_SURROGATE, "x\ud800y"], ids=["escaped", "raw"])
async def test_a_lone_surrogate_in_a_socket_answer_gets_an_error_frame_and_the_socket_stays_open(alice, comment):
    request = await async_waiting_request("broken-socket-comment")
    async with dashboard_for(alice) as dashboard:
        text = '{"type": "answer", "ref": "s", "request": "%s", "ok": true, "comment": "%s"}' % (request.pk, comment)
        await dashboard.communicator.send_to(text_data=text)
        error = await dashboard.next("error", ref=None)
        assert error["error"] == "bad_frame" and "surrogate" in error["message"]
        await dashboard.send({"type": "resync"})
        snapshot = await dashboard.next("snapshot")
        assert [r["id"] for r in snapshot["requests"]] == [request.pk]
    assert (await Request.objects.aget(pk=request.pk)).status == RequestStatus.OPEN


async def test_a_lone_surrogate_on_the_host_socket_gets_an_error_frame_and_the_socket_stays_open(host_token):
    async with host_socket(host_token) as (accepted, _, socket):
        assert accepted
        await socket.send_to(text_data='{"type": "watch", "request": "x\ud800y"}')
        error = await socket.receive_json_from(RECEIVE_TIMEOUT)
        assert error["type"] == "error" and error["error"] == "bad_frame"
        await socket.send_to(text_data='{"type": "watch", "request": "no-such-request"}')
        assert (await socket.receive_json_from(RECEIVE_TIMEOUT))["error"] == "not_found"


# -- date-times and numbers that overflow -----------------------------------------------------------------------


OVERFLOWING_MOMENTS = ["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+14:00"]


@pytest.mark.parametrize("expires_at", OVERFLOWING_MOMENTS)
async def test_an_expiry_outside_what_utc_can_hold_is_a_400_and_nothing_is_stored(host_token, expires_at):
    before = await stored_rows()
    body = {"id": "far-future", "kind": "approval", "prompt": "Go?", "expiresAt": expires_at}
    response = await post_text(AsyncClient(), "/api/v1/requests", json.dumps(body), headers=bearer(host_token))
    assert "'expiresAt'" in assert_json_400(response)
    assert await stored_rows() == before


@pytest.mark.parametrize("expires_at", OVERFLOWING_MOMENTS)
async def test_a_tools_expiry_outside_what_utc_can_hold_is_refused_with_a_message(expires_at):
    with pytest.raises(decisions.DecisionError) as refused:
        await decisions.aopen_request(WireRequest(id="tool-far", kind="approval", prompt="?", expiresAt=expires_at))
    assert refused.value.code == "invalid" and "expiresAt" in refused.value.message
    assert await Request.objects.acount() == 0


@pytest.mark.parametrize("timeout", ["1" + "0" * 400, str(runs.MAX_RUN_TIMEOUT_SECONDS + 1), "1e308"])
async def test_a_run_timeout_above_the_maximum_is_a_400_naming_it(reviewer, timeout):
    text = '{"tool": "crunch", "args": {"steps": 0}, "timeout": %s}' % timeout
    response = await post_text(reviewer, "/api/v1/runs", text)
    assert str(runs.MAX_RUN_TIMEOUT_SECONDS) in assert_json_400(response)
    assert await Run.objects.acount() == 0


async def test_a_run_timeout_of_exactly_the_maximum_is_accepted(reviewer):
    body = {"tool": "crunch", "args": {"steps": 0}, "timeout": runs.MAX_RUN_TIMEOUT_SECONDS}
    response = await post_text(reviewer, "/api/v1/runs", json.dumps(body))
    assert response.status_code == 201, response.content
    assert response.json()["timeout"] == runs.MAX_RUN_TIMEOUT_SECONDS


# -- audit filters ----------------------------------------------------------------------------------------------


BAD_AUDIT_FILTERS = {
    "superscript-run": ({"run": "²"}, "run"),  # '²'.isdigit() is true, int('²') fails
    "huge-run": ({"run": "99999999999999999999999999"}, "run"),
    "last-day": ({"since": "9999-12-31", "until": "9999-12-31"}, "until"),
    "nul-in-user": ({"user": "a\x00b"}, "user"),
}


@pytest.mark.parametrize("case", list(BAD_AUDIT_FILTERS), ids=list(BAD_AUDIT_FILTERS))
async def test_a_bad_audit_filter_is_a_400_page_that_names_it(reviewer, case):
    query, field = BAD_AUDIT_FILTERS[case]
    response = await reviewer.get("/audit/", query)
    assert response.status_code == 400
    assert f'data-field="{field}"' in response.content.decode()


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
@pytest.mark.parametrize("case", list(BAD_AUDIT_FILTERS), ids=list(BAD_AUDIT_FILTERS))
async def test_a_bad_audit_filter_refuses_the_export_before_it_streams(reviewer, case, fmt):
    query, field = BAD_AUDIT_FILTERS[case]
    response = await reviewer.get(f"/audit/export.{fmt}", query)
    assert response.status_code == 400 and not response.streaming
    assert field in response.json()["field_errors"]


@pytest.mark.parametrize("cursor", ["before", "after"])
@pytest.mark.parametrize("value", ["²", "99999999999999999999999999"])
async def test_a_bad_audit_page_cursor_is_ignored(reviewer, cursor, value):
    response = await reviewer.get("/audit/", {cursor: value})
    assert response.status_code == 200
