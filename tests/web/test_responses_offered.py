"""Which requests take a reply (respond) or a request for changes, through the API (issue 36, review fix).

Respond goes to an approval, an input or a question; request changes to an approval; neither to an
authorization, a request for a secret, or a request asked from inside a running call (its tool is already
running: there is no call to answer instead of). The door refuses the rest with ``field_errors.response`` and
the request stays open; its view's ``responses`` says what the card offers.
"""

import asyncio

import pytest
from toolnexus import Request as WireRequest
from toolnexus import define_tool

from approvals.models import AuditEvent, Request, RequestStatus, Run, RunStatus
from approvals.runs import runner
from approvals.runs.waiting import console_wait_for
from tests.support.api_client import post_json

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = {"schema": {"type": "object", "properties": {"api_key": {"type": "string", "format": "password"}}}}
ASKED = {
    "r-approval": {"kind": "approval", "prompt": "Refund 500 EUR?"},
    "r-input": {"kind": "input", "prompt": "Which order?", "data": {"schema": {"type": "object"}}},
    "r-question": {"kind": "question", "prompt": "Go on?", "data": {"questions": [{"question": "Go on?"}]}},
    "r-authorization": {"kind": "authorization", "prompt": "Sign in", "url": "https://example.com/login"},
    "r-secret": {"kind": "input", "prompt": "Your API key?", "data": SECRET},
}
OFFERED = {
    "r-approval": ["respond", "request_changes"],
    "r-input": ["respond"],
    "r-question": ["respond"],
    "r-authorization": [],
    "r-secret": [],
}


@pytest.fixture(autouse=True)
def _stop_leftover_runs(stop_leftover_runs):
    """Every test here cancels what it left running (the fixture is in tests/conftest.py)."""


async def host_asks(api, request_id, like=None):
    """A host asks ``ASKED[like]`` (``like`` defaults to ``request_id``) under the id ``request_id``."""
    asked = ASKED[like or request_id]
    reply = await post_json(api, "/api/v1/requests", {"id": request_id, "tool": "refund", **asked})
    assert reply.status_code == 201, reply.content


async def answer(api, request_id, response):
    return await post_json(
        api, f"/api/v1/requests/{request_id}/answer", {"ok": False, "response": response, "message": "Use a voucher."}
    )


async def test_each_host_request_offers_the_responses_it_takes(api):
    for request_id in ASKED:
        await host_asks(api, request_id)
    views = {request_id: (await api.get(f"/api/v1/requests/{request_id}")).json() for request_id in ASKED}
    assert {request_id: view["responses"] for request_id, view in views.items()} == OFFERED


@pytest.mark.parametrize(
    ("request_id", "response", "said"),
    [
        ("r-authorization", "respond", "A reply (respond) does not go to an authorization request"),
        ("r-secret", "respond", "A reply (respond) does not go to a request that asks for a secret"),
        ("r-input", "request_changes", "Changes are asked of an approval, not of an input request"),
        ("r-question", "request_changes", "Changes are asked of an approval, not of a question request"),
        ("r-authorization", "request_changes", "Changes are asked of an approval, not of an authorization request"),
    ],
)
async def test_the_api_refuses_a_response_the_request_does_not_take(api, request_id, response, said):
    await host_asks(api, request_id)
    reply = await answer(api, request_id, response)

    assert reply.status_code == 400, reply.content
    assert reply.json()["error"] == "invalid"
    assert list(reply.json()["field_errors"]) == ["response"]
    assert reply.json()["field_errors"]["response"][0].startswith(said)
    assert (await Request.objects.aget(pk=request_id)).status == RequestStatus.OPEN


async def test_the_api_takes_the_responses_each_request_offers(api):
    for like, offered in OFFERED.items():
        for response in offered:
            await host_asks(api, f"{like}-{response}", like=like)
            reply = await answer(api, f"{like}-{response}", response)
            assert reply.status_code == 200, reply.content
            assert reply.json()["data"]["response"] == response


def asks_from_inside(asked):
    """A tool that, while it runs, asks a reviewer itself (console_wait_for, as an MCP elicitation does)."""

    async def execute(ctx=None):
        answer = await console_wait_for(WireRequest(id="r-inside", kind="approval", prompt="Also delete the logs?"))
        asked.append(answer)
        return f"ran; the reviewer said ok={answer.ok}"

    return define_tool(execute, name="asks_from_inside")


async def test_a_request_asked_from_inside_a_running_call_takes_neither_response(api, extra_tools, console_events):
    asked = []
    extra_tools(asks_from_inside(asked))
    run = await runner.start_run(tool="asks_from_inside", args={})
    await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk)
    assert (await api.get("/api/v1/requests/r-inside")).json()["responses"] == []

    for response in ("respond", "request_changes"):
        reply = await answer(api, "r-inside", response)
        assert reply.status_code == 400, reply.content
        assert list(reply.json()["field_errors"]) == ["response"]
        assert "asked from inside a running call" in reply.json()["field_errors"]["response"][0]
    assert (await Request.objects.aget(pk="r-inside")).status == RequestStatus.OPEN

    declined = await post_json(api, "/api/v1/requests/r-inside/answer", {"ok": False, "comment": "keep the logs"})
    assert declined.status_code == 200
    await asyncio.wait_for(runner.wait_for_run(run.pk), 15)
    done = await Run.objects.aget(pk=run.pk)
    assert (done.status, done.result_output) == (RunStatus.SUCCEEDED, "ran; the reviewer said ok=False")
