"""A decline's reasons, respond and request changes through the JSON API and the dashboard's socket (issue 36).

``POST /api/v1/requests/<id>/answer`` takes ``option``, ``response`` and ``message`` beside ``ok`` and
``comment``; the socket's ``answer`` frame takes the same keys. Both go through the one door, which refuses what
does not fit with ``field_errors``; the request's view says what was decided.
"""

import pytest
from toolnexus import Request as WireRequest

from approvals.models import AuditEvent, Request, RequestStatus
from approvals.review import decisions
from tests.support.api_client import post_json
from tests.support.dashboard import dashboard_for
from tests.support.signatures import verified

pytestmark = pytest.mark.django_db(transaction=True)

TOO_LARGE = {"key": "too_large", "label": "Too large", "text": "Refunds above 100 EUR need a manager."}


async def host_asks(api, request_id="r-1", **data):
    reply = await post_json(
        api,
        "/api/v1/requests",
        {
            "id": request_id,
            "kind": "approval",
            "prompt": "Refund 500 EUR?",
            "tool": "refund",
            "data": {"reject_options": [TOO_LARGE], **data},
        },
    )
    assert reply.status_code == 201, reply.content
    return reply.json()


async def test_the_api_declines_with_an_option_and_a_comment(api):
    await host_asks(api)
    assert (await api.get("/api/v1/requests/r-1")).json()["policy"]["reject_options"] == [TOO_LARGE]

    reply = await post_json(
        api, "/api/v1/requests/r-1/answer", {"ok": False, "option": "too_large", "comment": "split it"}
    )

    assert reply.status_code == 200
    assert verified(reply.json()) == {
        "id": "r-1",
        "ok": False,
        "data": {"comment": "split it", "option": TOO_LARGE},
        "reason": "declined",
    }
    decision = (await api.get("/api/v1/requests/r-1")).json()["decision"]
    assert (decision["option"], decision["response"], decision["message"]) == (TOO_LARGE, None, None)
    assert decision["text"] == "Declined by alice (Too large): split it"
    # What the host long-polls for is the same stored Answer.
    assert (await api.get("/api/v1/requests/r-1/answer")).json() == reply.json()


async def test_the_api_refuses_an_unknown_option_with_field_errors(api):
    await host_asks(api)

    reply = await post_json(api, "/api/v1/requests/r-1/answer", {"ok": False, "option": "no_such"})

    assert reply.status_code == 400
    assert reply.json()["error"] == "invalid"
    assert reply.json()["field_errors"] == {
        "option": ["There is no reject option 'no_such' for this request; the options are too_large."]
    }
    assert (await Request.objects.aget(pk="r-1")).status == RequestStatus.OPEN


async def test_the_api_responds_and_requests_changes(api):
    await host_asks(api, "r-reply")
    await host_asks(api, "r-change")

    replied = await post_json(
        api, "/api/v1/requests/r-reply/answer", {"ok": False, "response": "respond", "message": "Use a voucher."}
    )
    changed = await post_json(
        api,
        "/api/v1/requests/r-change/answer",
        {"ok": False, "response": "request_changes", "message": "At most 100 EUR.", "option": "too_large"},
    )

    assert verified(replied.json()) == {
        "id": "r-reply",
        "ok": False,
        "data": {"response": "respond", "message": "Use a voucher."},
        "reason": "declined",
    }
    assert changed.json()["data"] == {"response": "request_changes", "message": "At most 100 EUR.", "option": TOO_LARGE}
    view = (await api.get("/api/v1/requests/r-reply")).json()
    assert view["decision"]["text"] == "Responded by alice: Use a voucher."
    event = await AuditEvent.objects.aget(request_id="r-change", action=AuditEvent.Action.REQUEST_DECLINED)
    assert (event.payload["response"], event.payload["message"], event.payload["via"]) == (
        "request_changes",
        "At most 100 EUR.",
        "api",
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"ok": False, "response": "respond"}, "message"),
        ({"ok": False, "response": "respond", "message": " "}, "message"),
        ({"ok": False, "response": "escalate", "message": "x"}, "response"),
        ({"ok": False, "response": 7, "message": "x"}, "response"),
        ({"ok": True, "response": "respond", "message": "x"}, "response"),
    ],
)
async def test_the_api_refuses_a_response_that_does_not_fit(api, body, field):
    await host_asks(api)
    reply = await post_json(api, "/api/v1/requests/r-1/answer", body)
    assert reply.status_code == 400, reply.content
    assert list(reply.json()["field_errors"]) == [field]
    assert (await Request.objects.aget(pk="r-1")).status == RequestStatus.OPEN


async def test_a_stale_answer_is_409_and_changes_nothing(api):
    """mastra#19633: the decision stands; a second answer, whatever it says, is refused naming who decided."""
    await host_asks(api)
    first = await post_json(api, "/api/v1/requests/r-1/answer", {"ok": False, "response": "respond", "message": "no"})
    again = await post_json(api, "/api/v1/requests/r-1/answer", {"ok": True})

    assert again.status_code == 409
    assert "already declined by alice" in again.json()["message"]
    assert (await api.get("/api/v1/requests/r-1/answer")).json() == first.json()


async def test_a_host_request_with_bad_reject_options_is_refused(api):
    reply = await post_json(
        api,
        "/api/v1/requests",
        {"id": "r-bad", "kind": "approval", "prompt": "Refund?", "data": {"reject_options": [{"key": "A B"}]}},
    )
    assert reply.status_code == 400
    assert "data.reject_options[0].key must be 1-40 characters" in reply.json()["message"]
    assert not await Request.objects.filter(pk="r-bad").aexists()


# -- the dashboard's socket ---------------------------------------------------------------------------


async def socket_request(request_id):
    wire = WireRequest(id=request_id, kind="approval", prompt="Refund 500 EUR?", data={"reject_options": [TOO_LARGE]})
    await decisions.aopen_request(wire, tool="refund")


async def test_the_socket_answers_with_a_response_and_an_option(alice):
    await socket_request("r-1")
    async with dashboard_for(alice) as dashboard:
        await dashboard.send(
            {
                "type": "answer",
                "ref": "a",
                "request": "r-1",
                "ok": False,
                "response": "request_changes",
                "message": "At most 100 EUR.",
                "option": "too_large",
            }
        )
        answered = await dashboard.next("answered", ref="a")
        event = await dashboard.expect_event("request.declined", request_id="r-1")

    said = {"response": "request_changes", "message": "At most 100 EUR.", "option": TOO_LARGE}
    assert verified(answered["answer"]) == {"id": "r-1", "ok": False, "data": said, "reason": "declined"}
    assert event["request"]["decision"]["text"] == "Changes requested by alice (Too large): At most 100 EUR."
    assert event["request"]["decision"]["response"] == "request_changes"


async def test_the_socket_refuses_an_unknown_option_with_an_error_frame(alice):
    await socket_request("r-1")
    async with dashboard_for(alice) as dashboard:
        await dashboard.send({"type": "answer", "ref": "bad", "request": "r-1", "ok": False, "option": "nope"})
        error = await dashboard.next("error", ref="bad")

    assert (error["error"], list(error["field_errors"])) == ("invalid", ["option"])
    assert (await Request.objects.aget(pk="r-1")).status == RequestStatus.OPEN
