"""A comment is at most 4000 characters, whichever way an answer comes (issue 36, review fix).

On a decline the model reads the comment, so the door holds it to the message's length: the API and the socket
get 400 ``invalid`` with ``field_errors.comment`` (a frame: an error frame), a bulk answer is refused before it
answers anything (``field``: comment), and the request stays open. 4000 characters are taken.
"""

import json

import pytest
from django.test import Client
from toolnexus import Request as WireRequest

from approvals.models import Request, RequestStatus
from approvals.review import decisions
from tests.support.api_client import post_json
from tests.support.dashboard import dashboard_for

pytestmark = pytest.mark.django_db(transaction=True)

LONGEST = "x" * 4000
TOO_LONG = "x" * 4001
SAID = "The comment is 4001 characters long; at most 4000 are allowed."


async def opened(request_id):
    await decisions.aopen_request(WireRequest(id=request_id, kind="approval", prompt="Refund 500 EUR?"), tool="refund")


@pytest.mark.parametrize("ok", [True, False])
async def test_the_api_refuses_a_comment_over_4000_characters(api, ok):
    await opened("r-1")
    reply = await post_json(api, "/api/v1/requests/r-1/answer", {"ok": ok, "comment": TOO_LONG})

    assert reply.status_code == 400, reply.content
    assert (reply.json()["error"], reply.json()["field_errors"]) == ("invalid", {"comment": [SAID]})
    assert (await Request.objects.aget(pk="r-1")).status == RequestStatus.OPEN

    taken = await post_json(api, "/api/v1/requests/r-1/answer", {"ok": ok, "comment": LONGEST})
    assert taken.status_code == 200, taken.content
    assert (await Request.objects.aget(pk="r-1")).comment == LONGEST


async def test_the_api_refuses_a_comment_that_is_not_text(api):
    await opened("r-1")
    reply = await post_json(api, "/api/v1/requests/r-1/answer", {"ok": False, "comment": 7})
    assert reply.status_code == 400, reply.content
    assert list(reply.json()["field_errors"]) == ["comment"]


async def test_the_socket_refuses_a_comment_over_4000_characters(alice):
    await opened("r-1")
    async with dashboard_for(alice) as dashboard:
        frame = {"type": "answer", "ref": "long", "request": "r-1", "ok": False, "comment": TOO_LONG}
        await dashboard.send(frame)
        refused = await dashboard.next("error", ref="long")

    assert (refused["error"], refused["field_errors"]) == ("invalid", {"comment": [SAID]})
    assert (await Request.objects.aget(pk="r-1")).status == RequestStatus.OPEN


def test_a_bulk_answer_with_a_comment_over_4000_characters_answers_nothing(alice):
    decisions.open_request(WireRequest(id="r-1", kind="approval", prompt="Refund 500 EUR?"), tool="refund")
    client = Client()
    client.force_login(alice)
    body = {"ok": False, "comment": TOO_LONG, "ids": ["r-1"]}
    reply = client.post("/api/v1/requests/bulk", data=json.dumps(body), content_type="application/json")

    assert reply.status_code == 400, reply.content
    assert (reply.json()["field"], reply.json()["message"]) == ("comment", SAID)
    assert Request.objects.get(pk="r-1").status == RequestStatus.OPEN


def test_the_openapi_document_declares_the_limit():
    document = Client().get("/api/v1/openapi.json").json()
    schemas = document["components"]["schemas"]
    for body in ("AnswerBody", "BulkBody"):
        comment = schemas[body]["properties"]["comment"]
        lengths = [branch.get("maxLength") for branch in comment.get("anyOf", [comment])]
        assert 4000 in lengths, (body, comment)
