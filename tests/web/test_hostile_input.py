"""Hostile text and numbers: every one is a 400 with a message (an error frame on a socket that stays open),
and nothing a refused input carried is stored.

The first sections reproduce the attacks the security probe found (issue 19, point 5), one test each;
the last throws generated hostile JSON at every API endpoint and socket frame (hypothesis).
"""

import contextlib
import itertools
import json
from urllib.parse import quote

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from toolnexus import Request as WireRequest

from approvals.models import AuditEvent, Request, RequestApproval, RequestStatus, Run
from approvals.review import decisions
from approvals.runs import runner
from approvals.runs import services as runs
from approvals.web.api import document
from tests.support.api_routes import api_routes, documented_path
from tests.support.dashboard import async_waiting_request, dashboard_for, host_socket, session_key_for
from tests.support.users import bearer

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


async def test_an_expiry_longer_than_its_column_is_a_400(host_token):
    # RFC 3339 allows any number of fractional digits; Request.expires_at_wire keeps 64 characters.
    body = {
        "id": "long-expiry",
        "kind": "approval",
        "prompt": "Go?",
        "expiresAt": "2030-01-01T00:00:00." + "1" * 60 + "Z",
    }
    response = await post_text(AsyncClient(), "/api/v1/requests", json.dumps(body), headers=bearer(host_token))
    assert "at most 64" in assert_json_400(response)
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


# -- generated hostile JSON at every endpoint and frame ---------------------------------------------------------

HOSTILE = settings(
    max_examples=60,
    deadline=None,
    database=None,  # each run explores afresh; a failure prints its example
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class Raw(str):
    """JSON text written as it is: tokens json.dumps never writes (NaN, 1e400, 5,000 digits, deep nesting)."""


def to_json(value, ascii_only=True):
    """``value`` as JSON text. With ``ascii_only`` a lone surrogate travels as a \\uD800 escape (all HTTP can
    carry); without, as the raw character, as a socket frame's text can reach a consumer."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, dict):
        return (
            "{"
            + ", ".join(
                f"{json.dumps(key, ensure_ascii=ascii_only)}: {to_json(item, ascii_only)}"
                for key, item in value.items()
            )
            + "}"
        )
    if isinstance(value, list):
        return "[" + ", ".join(to_json(item, ascii_only) for item in value) + "]"
    return json.dumps(value, ensure_ascii=ascii_only)


def nested(depth):
    value = {}
    for _ in range(depth - 1):
        value = {"n": value}
    return value


# Values the console must decode, judge and refuse (or take) on their merits.
ODD_TEXT = st.sampled_from(
    [
        "\ud83d\ude00",
        "\x1b[31mred",
        "\u2028\u2029",
        "\u202eevil",
        "\ufeff",
        "",
        " ",
        "\t\r\n",
        "<script>alert(1)</script>",
        '=HYPERLINK("x")',
        "²",
        "١٢",
        "1_000",
        "x" * 5000,
        "../../etc/passwd",
        "%00",
        "null",
        "approval",
        "scripted",
    ]
) | st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=12)
ODD_DATES = st.sampled_from(
    [
        "9999-12-31T23:59:59-23:59",
        "0001-01-01T00:00:00+14:00",
        "9999-12-31T23:59:59Z",
        "0001-01-01T00:00:00Z",
        "2030-02-30T00:00:00Z",
        "2030-01-01T24:00:00Z",
        "2030-01-01T23:59:60Z",
        "2030-01-01T00:00:00+99:99",
        "0000-01-01T00:00:00Z",
        "9999-12-31",
        "2030-01-01t00:00:00z",
        "2030-01-01T00:00:00." + "9" * 60 + "Z",
        "+275760-09-13T00:00:00Z",
        "9999-12-31T23:59:60+00:00",
    ]
)
ODD_NUMBERS = (
    st.sampled_from(
        [
            0,
            -1,
            2**63 - 1,
            2**63,
            -(2**63) - 1,
            10**400,
            1e308,
            -1e308,
            5e-324,
            -0.0,
            runs.MAX_RUN_TIMEOUT_SECONDS + 1,
        ]
    )
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
)
ODD_NESTING = st.sampled_from([nested(9), nested(10), nested(11), nested(40)])
# Values no JSON string or number the console stores can hold: every one is a bad_json / bad_frame.
UNDECODABLE = st.sampled_from(
    [
        "x\ud800y",
        "\udfff",
        "\ud83d",
        "\x00",
        "a\x00b",
        Raw("NaN"),
        Raw("Infinity"),
        Raw("-Infinity"),
        Raw("1e400"),
        Raw("-1e400"),
        Raw("1" * 5000),
        Raw("[" * 100_000 + "]" * 100_000),
        Raw('{"a":' * 5000 + "1" + "}" * 5000),
    ]
)
ANY_TEXT = ODD_TEXT | ODD_DATES


def hostile_values(leaves):
    """JSON values built from ``leaves``: lists and objects (with odd keys) a few levels deep."""
    return st.recursive(
        leaves,
        lambda children: st.lists(children, max_size=3) | st.dictionaries(ANY_TEXT, children, max_size=3),
        max_leaves=8,
    )


DECODABLE = hostile_values(ANY_TEXT | ODD_NUMBERS | ODD_NESTING | st.booleans() | st.none())
HOSTILE_VALUES = hostile_values(ANY_TEXT | ODD_NUMBERS | ODD_NESTING | st.booleans() | st.none() | UNDECODABLE)


@st.composite
def body_of(draw, fields, required=()):
    """An object whose fields are mostly valid, else hostile or (unless required) missing, now and then with an
    extra hostile field.

    One body in four holds something undecodable; the rest decode, so their fields reach the checks behind.
    """
    body = {}
    for name, valid in fields.items():
        if name in required or draw(st.integers(0, 3)):
            body[name] = draw(valid if draw(st.integers(0, 3)) else DECODABLE)
    if draw(st.integers(0, 4)) == 0:
        body[draw(ANY_TEXT)] = draw(DECODABLE)
    if draw(st.integers(0, 3)) == 0:
        spoiled = draw(st.sampled_from([*fields, "extra"]))
        body[spoiled] = draw(UNDECODABLE | st.dictionaries(ANY_TEXT, UNDECODABLE, min_size=1, max_size=2))
    return body


NEW_REQUEST_FIELDS = {
    "id": st.just("ID"),  # replaced by a fresh id per example
    "kind": st.sampled_from(["approval", "input", "authorization", "confirmation"]),
    "prompt": st.just("Go ahead?"),
    "url": st.just("https://example.com/a"),
    "data": st.just({"schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}),
    "expiresAt": ODD_DATES | st.just("2031-01-01T00:00:00Z"),
    "host": st.just("worker-1"),
    "tool": st.just("transfer"),
    "args": st.just({"amount": 1}),
}
ANSWER_FIELDS = {
    "ok": st.booleans(),
    "data": st.sampled_from([{"comment": "fine"}, {"args": {"amount": 1}}, {"n": 3}, {}]),
    "reason": st.sampled_from(["declined", "cancelled", "expired"]),
    "comment": st.just("looks right"),
}
TIMEOUT = st.sampled_from([1, 0.5, runs.MAX_RUN_TIMEOUT_SECONDS])
TOOL_RUN_FIELDS = {
    "tool": st.sampled_from(["confirm", "refund", "no-such-tool"]),
    "args": st.just({}),
    "timeout": TIMEOUT,
}
AGENT_RUN_FIELDS = {"agent": body_of({"prompt": st.just("hello"), "model": st.just("scripted")}), "timeout": TIMEOUT}
BODIES = {
    "/requests": body_of(NEW_REQUEST_FIELDS, required=("id", "kind", "prompt")),
    "/requests/{request_id}/answer": body_of(ANSWER_FIELDS, required=("ok",)),
    "/runs": body_of(TOOL_RUN_FIELDS, required=("tool",)) | body_of(AGENT_RUN_FIELDS, required=("agent",)),
}
ODD_QUERY = st.sampled_from(
    ["", "open", "²", "1e400", "nan", "-0", "0.0001", "99999999999999999999", "x\x00y", "x\ud800y", "%ff"]
)
ODD_RUN_IDS = st.sampled_from([0, 2**63 - 1, 2**63, 10**30])
ODD_REQUEST_IDS = ODD_TEXT | st.sampled_from(["no-such-request", "a" * 201, "a/b", "..", " ", "x\ud800y", "a\x00b"])


def api_calls():
    """(method, documented path) for every API endpoint, read from the URLconf and the OpenAPI document."""
    paths = document()["paths"]
    return sorted(
        (method.upper(), documented_path(route)) for route in api_routes() for method in paths[documented_path(route)]
    )


def url_part(text):
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


def utf8(text):
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@sync_to_async
def footprint(run_id, request_id):
    """What a refused call must leave as it was: the runs, the targeted run, and the targeted request."""
    if request_id and not utf8(request_id):
        request_id = None  # a lone surrogate: no row can have this id
    requests = Request.objects.filter(pk=request_id)
    return (
        Run.objects.count(),
        Run.objects.filter(pk=run_id).values("status", "cancel_requested").first() if run_id else None,
        requests.values("status", "answer_ok", "answer_data", "answer_reason", "comment", "answered_by").first(),
        AuditEvent.objects.filter(request_id=request_id).count() if request_id else None,
        RequestApproval.objects.filter(request_id=request_id).count() if request_id else None,
    )


async def settle(run_id):
    """A run an example started is cancelled and awaited, so nothing writes behind the next example's back."""
    with contextlib.suppress(decisions.DecisionError):
        await runner.cancel_run(run_id)
    await runner.wait_for_run(run_id)


example_ids = itertools.count()


@pytest.fixture
async def finished_run(alice):
    run = await runner.start_run(tool="crunch", args={"steps": 0}, user=alice)
    await runner.wait_for_run(run.pk)
    return run.pk


@pytest.mark.parametrize("call", api_calls(), ids=" ".join)
@HOSTILE
@given(data=st.data())
async def test_hostile_json_at_an_api_endpoint_is_never_a_5xx_and_a_refusal_stores_nothing(
    call, data, host_token, finished_run
):
    method, path = call
    n = next(example_ids)
    target = await async_waiting_request(
        f"target-{n}", tool="refund", data={"order": "A-1", "amount": 5, "editable": ["amount"]}
    )
    mostly_real = data.draw(st.integers(0, 3), label="real ids") > 0
    run_id = data.draw(st.sampled_from([target.run_id, finished_run]) if mostly_real else ODD_RUN_IDS, label="run_id")
    request_id = data.draw(st.just(target.pk) if mostly_real else ODD_REQUEST_IDS, label="request_id")
    url = "/api/v1" + path.replace("{run_id}", str(run_id)).replace("{request_id}", url_part(request_id))
    headers = bearer(host_token)
    if method == "GET":
        status, wait = data.draw(ODD_QUERY), data.draw(ODD_QUERY.filter(lambda q: q != "0.0001"))  # no long-polls
        response = await AsyncClient().get(f"{url}?status={url_part(status)}&wait={url_part(wait)}", headers=headers)
    else:
        body = data.draw(BODIES.get(path, HOSTILE_VALUES), label="body")
        if path == "/requests" and isinstance(body, dict):
            if body.get("id") == "ID":
                body["id"] = f"new-{n}"
            request_id = body.get("id") if isinstance(body.get("id"), str) else None  # what it would open
        before = await footprint(run_id, request_id)
        response = await post_text(AsyncClient(), url, to_json(body), headers=headers)
    event(f"{response.status_code} {response.json().get('error', '')}" if response.status_code < 500 else "5xx")
    assert response.status_code < 500, response.content[:500]
    assert response["Content-Type"] == "application/json", response.content[:500]
    if method == "POST" and response.status_code >= 400:
        assert await footprint(run_id, request_id) == before
    if path in ("/runs", "/runs/{run_id}/retry") and response.status_code == 201:
        await settle(response.json()["id"])


FRAME_FIELDS = {  # a frame type's fields (valid values) and the ones it needs
    "answer": (
        {
            "request": st.just("TARGET"),
            "ok": st.booleans(),
            "data": ANSWER_FIELDS["data"],
            "form": st.just({"amount": "3"}),
            "reason": ANSWER_FIELDS["reason"],
            "comment": st.just("ok"),
        },
        ("request", "ok"),
    ),
    "cancel_run": ({"run": st.just("RUN")}, ("run",)),
    "viewing": ({"request": st.just("TARGET")}, ("request",)),
    "resync": ({}, ()),
    "page": (
        {
            "of": st.sampled_from(["requests", "runs"]),
            "after": ANY_TEXT,
            "run": st.one_of(st.just("RUN"), st.integers(min_value=-(2**70), max_value=2**70)),
        },
        (),
    ),
    "timeline": (
        {
            "run": st.one_of(st.just("RUN"), st.integers(min_value=-(2**70), max_value=2**70)),
            "after": st.one_of(st.integers(min_value=-(2**70), max_value=2**70), ANY_TEXT),
            "before": st.integers(min_value=-(2**70), max_value=2**70),
        },
        (),
    ),
}


@st.composite
def console_frames(draw):
    known = draw(st.integers(0, 3))
    frame_type = draw(st.sampled_from(list(FRAME_FIELDS)) if known else ANY_TEXT)
    fields, required = FRAME_FIELDS.get(frame_type, ({}, ()))
    frame = draw(body_of(fields, required=required))
    if draw(st.integers(0, 5)):
        frame["type"] = frame_type
    if draw(st.booleans()):
        frame["ref"] = draw(HOSTILE_VALUES)
    return frame


async def replies_until_snapshot(dashboard):
    """Ask for a snapshot and return every frame before it; a closed socket fails the receive."""
    await dashboard.send({"type": "resync"})
    replies = []
    while (frame := await dashboard.receive())["type"] != "snapshot":
        replies.append(frame)
    return replies


@pytest.fixture
async def alice_session(alice):
    return await session_key_for(alice)


@HOSTILE
@given(frame=console_frames(), ascii_only=st.booleans())
async def test_hostile_frames_on_the_dashboard_socket_get_a_reply_and_never_close_it(
    alice, alice_session, frame, ascii_only
):
    target = await async_waiting_request(
        f"frame-{next(example_ids)}", tool="refund", data={"amount": 5, "editable": ["amount"]}
    )
    if frame.get("request") == "TARGET":
        frame["request"] = target.pk
    if frame.get("run") == "RUN":
        frame["run"] = target.run_id
    async with dashboard_for(alice, session_key=alice_session) as dashboard:
        before = await footprint(target.run_id, target.pk)
        await dashboard.communicator.send_to(text_data=to_json(frame, ascii_only))
        replies = await replies_until_snapshot(dashboard)
        event(" ".join(reply.get("error") or reply["type"] for reply in replies[:1]) or "no reply")
        if any(reply["type"] == "error" for reply in replies):
            assert await footprint(target.run_id, target.pk) == before


@HOSTILE
@given(request_id=HOSTILE_VALUES, ref=HOSTILE_VALUES, ascii_only=st.booleans())
async def test_hostile_frames_on_the_host_socket_get_a_reply_and_never_close_it(
    host_token, request_id, ref, ascii_only
):
    async with host_socket(host_token) as (accepted, _, socket):
        assert accepted
        await socket.send_to(text_data=to_json({"type": "watch", "request": request_id, "ref": ref}, ascii_only))
        reply = await socket.receive_json_from(RECEIVE_TIMEOUT)
        assert reply["type"] in ("error", "watching", "answer"), reply
        await socket.send_to(text_data='{"type": "watch", "request": "no-such-request"}')
        assert (await socket.receive_json_from(RECEIVE_TIMEOUT))["error"] == "not_found"


@HOSTILE
@given(
    query=st.dictionaries(
        st.sampled_from(
            ["user", "tool", "kind", "action", "since", "until", "run", "request", "before", "after", "limit"]
        ),
        ANY_TEXT | ODD_QUERY,
        max_size=4,
    )
)
async def test_hostile_audit_filters_are_a_page_or_a_400_and_the_export_never_starts_on_a_400(reviewer, query):
    query_string = "&".join(f"{name}={url_part(value)}" for name, value in query.items())
    page = await reviewer.get(f"/audit/?{query_string}")
    assert page.status_code in (200, 400)
    export = await reviewer.get(f"/audit/export.jsonl?{query_string}")
    if page.status_code == 400:
        assert export.status_code == 400 and not export.streaming
    else:
        assert export.status_code == 200
        body = b"".join([chunk async for chunk in export.streaming_content])
        assert all(json.loads(line) for line in body.splitlines())  # streams to the end, a JSON object a line
