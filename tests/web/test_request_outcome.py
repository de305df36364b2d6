"""Issue 36: a remote host reports how its tool ended after an approval (``POST /api/v1/requests/<id>/outcome``),
the request view's ``execution`` key, and the dashboard frame that shows the report.

HTTP goes through django.test.AsyncClient; the socket through the real ``toolnexus_site.asgi.application``.
"""

import json

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from approvals.models import AuditEvent, Request
from approvals.runs import runner
from tests.support.api_client import post_json
from tests.support.dashboard import dashboard_for
from tests.support.users import bearer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _stop_leftover_runs(stop_leftover_runs):
    """Every test here cancels what it left running."""


@pytest.fixture
async def svc(make_user):
    return await sync_to_async(make_user)("svc", password=None)


@pytest.fixture
async def svc_token(svc, issue_token):
    return await sync_to_async(issue_token)(svc, "billing")


@pytest.fixture
async def erin(make_user):
    return await sync_to_async(make_user)("erin")


@pytest.fixture
async def reviewer(erin):
    client = AsyncClient()
    await client.aforce_login(erin)
    return client


async def host_post(token, path, body):
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return await AsyncClient().post(path, data=data, content_type="application/json", headers=bearer(token))


async def opened(token, request_id="host-pay-1"):
    body = {"id": request_id, "kind": "approval", "prompt": "Pay 12 EUR?", "host": "billing", "tool": "pay"}
    response = await host_post(token, "/api/v1/requests", body)
    assert response.status_code == 201, response.content
    return request_id


async def approved(token, reviewer, request_id="host-pay-1"):
    await opened(token, request_id)
    answer = await post_json(reviewer, f"/api/v1/requests/{request_id}/answer", {"ok": True})
    assert answer.status_code == 200, answer.content
    return request_id


async def report(token, request_id, body):
    return await host_post(token, f"/api/v1/requests/{request_id}/outcome", body)


async def test_an_approved_host_request_reads_unreported_until_the_host_reports(svc_token, reviewer):
    request_id = await opened(svc_token)
    assert (await reviewer.get(f"/api/v1/requests/{request_id}")).json()["execution"] is None  # open
    await post_json(reviewer, f"/api/v1/requests/{request_id}/answer", {"ok": True})
    view = (await reviewer.get(f"/api/v1/requests/{request_id}")).json()
    assert view["execution"] == {"state": "unreported", "outcome": None, "message": "", "at": None}

    response = await report(svc_token, request_id, {"ok": True, "message": "paid 12 EUR, receipt R-9"})
    assert response.status_code == 200, response.content
    execution = response.json()["execution"]
    assert (execution["state"], execution["outcome"], execution["message"]) == (
        "succeeded",
        "succeeded",
        "paid 12 EUR, receipt R-9",
    )
    assert execution["at"]
    assert (await reviewer.get(f"/api/v1/requests/{request_id}")).json()["execution"] == execution
    event = await AuditEvent.objects.aget(request_id=request_id, action=AuditEvent.Action.REQUEST_EXECUTED)
    assert (event.actor, event.payload) == (
        "svc",
        {"outcome": "succeeded", "message": "paid 12 EUR, receipt R-9", "via": "api"},
    )


async def test_a_failure_is_reported_failed_and_the_message_may_be_left_out(svc_token, reviewer):
    request_id = await approved(svc_token, reviewer)
    response = await report(svc_token, request_id, {"ok": False})
    assert response.status_code == 200, response.content
    assert response.json()["execution"]["state"] == "failed"
    assert response.json()["execution"]["message"] == ""


async def test_the_same_report_again_is_200_and_recorded_once(svc_token, reviewer):
    request_id = await approved(svc_token, reviewer)
    first = await report(svc_token, request_id, {"ok": True, "message": "done"})
    again = await report(svc_token, request_id, {"ok": True, "message": "done"})
    assert (first.status_code, again.status_code) == (200, 200)
    assert again.json()["execution"] == first.json()["execution"]
    assert await AuditEvent.objects.filter(request_id=request_id, action="request.executed").acount() == 1


async def test_a_different_second_report_is_409_and_the_first_stands(svc_token, reviewer):
    request_id = await approved(svc_token, reviewer)
    await report(svc_token, request_id, {"ok": True, "message": "done"})
    response = await report(svc_token, request_id, {"ok": False, "message": "it failed after all"})
    assert response.status_code == 409
    assert response.json() == {
        "error": "not_open",
        "message": f"Request {request_id} was already reported succeeded; the first report stands.",
    }
    assert (await Request.objects.aget(pk=request_id)).execution_message == "done"


@pytest.mark.parametrize(
    "body",
    [{}, {"ok": "yes"}, {"ok": 1}, {"ok": True, "message": 5}, {"ok": True, "message": "x" * 2001}, "[1]", "{"],
)
async def test_bad_input_is_400(svc_token, reviewer, body):
    request_id = await approved(svc_token, reviewer)
    response = await report(svc_token, request_id, body)
    assert response.status_code == 400, response.content
    assert (await Request.objects.aget(pk=request_id)).execution_state is None


async def test_a_message_of_2000_characters_is_accepted(svc_token, reviewer):
    request_id = await approved(svc_token, reviewer)
    response = await report(svc_token, request_id, {"ok": True, "message": "x" * 2000})
    assert response.status_code == 200
    assert len(response.json()["execution"]["message"]) == 2000


async def test_only_the_token_that_opened_it_may_report(svc_token, reviewer, make_user, issue_token):
    request_id = await approved(svc_token, reviewer)
    other = await sync_to_async(make_user)("other-host", password=None)
    other_token = await sync_to_async(issue_token)(other)
    response = await report(other_token, request_id, {"ok": True})
    assert response.status_code == 403
    assert response.json()["message"] == "Only the token that opened a request may report its outcome."
    assert (await post_json(reviewer, f"/api/v1/requests/{request_id}/outcome", {"ok": True})).status_code == 403


async def test_an_unknown_request_is_404(svc_token):
    response = await report(svc_token, "no-such-request", {"ok": True})
    assert response.status_code == 404


async def test_an_open_or_declined_request_is_409(svc_token, reviewer):
    open_id = await opened(svc_token, "host-open-1")
    response = await report(svc_token, open_id, {"ok": True})
    assert response.status_code == 409
    assert "was not approved (open)" in response.json()["message"]
    declined_id = await opened(svc_token, "host-declined-1")
    await post_json(reviewer, f"/api/v1/requests/{declined_id}/answer", {"ok": False, "reason": "declined"})
    response = await report(svc_token, declined_id, {"ok": True})
    assert response.status_code == 409
    assert "was not approved (declined)" in response.json()["message"]


async def test_a_console_runs_request_is_409_the_console_records_it(alice, issue_token, console_events):
    token = await sync_to_async(issue_token)(alice, "host")
    started = await host_post(token, "/api/v1/runs", {"tool": "deploy", "args": {"service": "web"}})
    run_id = started.json()["id"]
    frame = await console_events.next("request.opened", run_id=run_id)
    await host_post(token, f"/api/v1/requests/{frame['request_id']}/answer", {"ok": True, "data": {"env": "staging"}})
    await runner.wait_for_run(run_id)
    response = await report(token, frame["request_id"], {"ok": False})
    assert response.status_code == 403  # the run's request was opened by no token


async def test_a_dashboard_sees_the_report_in_an_event_frame(svc_token, reviewer, erin):
    request_id = await approved(svc_token, reviewer)
    async with dashboard_for(erin) as dashboard:
        await report(svc_token, request_id, {"ok": False, "message": "card declined"})
        frame = await dashboard.next("event", action="request.executed")
    assert frame["request"]["id"] == request_id
    assert frame["request"]["execution"]["state"] == "failed"
    assert frame["request"]["execution"]["message"] == "card declined"
    assert frame["words"] == "Execution failed, reported by svc"


async def test_a_tool_runs_request_view_shows_its_execution(api, console_events):
    response = await post_json(api, "/api/v1/runs", {"tool": "deploy", "args": {"service": "web"}})
    run_id = response.json()["id"]
    frame = await console_events.next("request.opened", run_id=run_id)
    await post_json(api, f"/api/v1/requests/{frame['request_id']}/answer", {"ok": True, "data": {"env": "staging"}})
    await runner.wait_for_run(run_id)
    view = (await api.get(f"/api/v1/requests/{frame['request_id']}")).json()
    assert view["execution"]["state"] == "succeeded"
    assert view["execution"]["message"] == "deployed to staging"
