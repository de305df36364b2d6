"""Every kind of request, answered through the one door (decisions), as the socket and the API do."""

import asyncio
import math
import time
from datetime import UTC, datetime, timedelta

import mcp.types as mcp_types
import pytest
from asgiref.sync import sync_to_async
from toolnexus import Request as WireRequest
from toolnexus import answer_to_elicit_result, elicitation_to_request

from approvals import moments, shapes
from approvals.models import AuditEvent, Request, RequestStatus, Run, RunStatus
from approvals.review import decisions
from approvals.runs import runner
from approvals.runs.waiting import console_wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
async def reviewer(make_user):
    return await sync_to_async(make_user)(password=None)


@pytest.fixture
async def starter(make_user):
    """Who starts the run an approval comes from: not the reviewer who answers it."""
    return await sync_to_async(make_user)("starter", password=None)


async def start_and_wait_for_request(console_events, tool, args=None, user=None):
    run = await runner.start_run(tool=tool, args=args or {}, user=user)
    opened = await console_events.next("request.opened", run_id=run.pk)
    return run, await Request.objects.aget(pk=opened["request_id"])


async def finished(run):
    await runner.wait_for_run(run.pk)
    return await Run.objects.aget(pk=run.pk)


def in_seconds(seconds):
    moment = datetime.now(UTC) + timedelta(seconds=seconds)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- approval ---------------------------------------------------------------------


async def test_approval_comment_travels_in_answer_data(console_events, reviewer, starter):
    run, request = await start_and_wait_for_request(console_events, "refund", {"amount": 10}, starter)
    answer = await decisions.aresolve_request(request.pk, ok=True, comment="checked the invoice", user=reviewer)
    assert answer.data == {"comment": "checked the invoice"}
    assert (await finished(run)).result_output == "refunded 10 EUR on order A-1001 (checked the invoice)"


async def test_approval_with_an_edited_amount_refunds_the_edited_amount(console_events, reviewer, starter):
    run, request = await start_and_wait_for_request(console_events, "refund", {"amount": 80.0}, starter)
    view = await sync_to_async(shapes.request_view)(request)
    assert view["form"]["renderable"] is True
    assert [f["name"] for f in view["form"]["fields"]] == ["amount"]
    answer = await decisions.aresolve_request(request.pk, ok=True, form={"amount": "45.5"}, user=reviewer)
    assert answer.data == {"args": {"amount": 45.5}}
    assert (await finished(run)).result_output == (
        "refunded 45.5 EUR on order A-1001"
        " (a reviewer changed amount 80 → 45.5 before approving; the call ran with the changed values)"
    )


async def test_approval_edit_that_fails_the_tools_schema_is_refused_and_stays_open(console_events, reviewer, starter):
    run, request = await start_and_wait_for_request(console_events, "refund", {"amount": 80.0}, starter)
    with pytest.raises(decisions.DecisionError) as refused:
        await decisions.aresolve_request(request.pk, ok=True, form={"amount": "a lot"}, user=reviewer)
    assert refused.value.code == "invalid"
    assert "amount" in refused.value.field_errors
    assert (await Request.objects.aget(pk=request.pk)).status == RequestStatus.OPEN
    await runner.cancel_run(run.pk)


async def test_an_approval_answer_carries_only_the_comment_and_the_editable_args(console_events, reviewer, starter):
    run, request = await start_and_wait_for_request(console_events, "refund", {"amount": 80.0}, starter)
    answer_with = {
        "args": {"amount": 1, "order": "HACKED-ORDER", "currency": "XXX"},
        "approved_by": "the CFO",
    }
    with pytest.raises(decisions.DecisionError) as refused:
        await decisions.aresolve_request(request.pk, ok=True, data=answer_with, comment="fine", user=reviewer)
    assert refused.value.code == "invalid"
    assert refused.value.field_errors == {
        "approved_by": ["An approval's answer carries only 'comment' and the editable 'args'."],
        "order": ["order is not editable in this request; only amount may be changed."],
        "currency": ["currency is not editable in this request; only amount may be changed."],
    }
    stored = await Request.objects.aget(pk=request.pk)
    assert (stored.status, stored.answer_data) == (RequestStatus.OPEN, None)
    assert not await AuditEvent.objects.filter(request_id=request.pk, action="request.answered").aexists()
    await runner.cancel_run(run.pk)


async def test_editable_args_are_held_to_their_declared_types_and_bounds(reviewer):
    schema = {"type": "object", "properties": {"amount": {"type": "number", "minimum": 1, "maximum": 100}}}
    wire = WireRequest(
        id="bounded-1", kind="approval", prompt="Pay?", data={"args": {"schema": schema, "values": {"amount": 10}}}
    )
    await decisions.aopen_request(wire, args={"amount": 10, "account": "acme"})
    for args, errors in (
        ({"amount": 99999}, {"amount": ["Enter a number less than or equal to 100."]}),
        ({"amount": "lots"}, {"amount": ["Enter a number."]}),
        (
            {"account": "attacker"},
            {"account": ["account is not editable in this request; only amount may be changed."]},
        ),
    ):
        with pytest.raises(decisions.DecisionError) as refused:
            await decisions.aresolve_request("bounded-1", ok=True, data={"args": args}, user=reviewer)
        assert refused.value.field_errors == errors, args
    assert (await Request.objects.aget(pk="bounded-1")).status == RequestStatus.OPEN
    answer = await decisions.aresolve_request("bounded-1", ok=True, data={"args": {"amount": 50}}, user=reviewer)
    assert answer.data == {"args": {"amount": 50}}


# -- input ------------------------------------------------------------------------


async def test_input_raw_form_values_are_converted_against_the_schema(console_events, reviewer):
    run, request = await start_and_wait_for_request(console_events, "signup", {}, reviewer)
    view = await sync_to_async(shapes.request_view)(request)
    fields = {f["name"]: f for f in view["form"]["fields"]}
    assert fields["regions"]["widget"] == "multiselect"
    assert fields["plan"]["widget"] == "select"
    eu, apac = (c["key"] for c in fields["regions"]["choices"] if c["label"] in ("eu", "apac"))
    enterprise = next(c["key"] for c in fields["plan"]["choices"] if c["label"] == "Enterprise")
    raw = {
        "name": "Ada Lovelace",
        "email": "ada@example.com",
        "seats": "12",
        "start": "",
        "plan": enterprise,
        "regions": [eu, apac],
        "invoice": False,
    }
    answer = await decisions.aresolve_request(request.pk, ok=True, form=raw, user=reviewer)
    assert answer.data == {
        "name": "Ada Lovelace",
        "email": "ada@example.com",
        "seats": 12,
        "plan": "enterprise",
        "regions": ["eu", "apac"],
        "invoice": False,
    }
    assert (await finished(run)).result_output == (
        "signed up Acme: Ada Lovelace <ada@example.com>, 12 seats on enterprise in eu/apac"
    )


async def test_input_bad_values_get_field_errors_and_the_request_stays_open(console_events, reviewer):
    run, request = await start_and_wait_for_request(console_events, "signup", {}, reviewer)
    raw = {"name": "A", "email": "not an email", "seats": "99", "plan": "", "regions": []}
    with pytest.raises(decisions.DecisionError) as refused:
        await decisions.aresolve_request(request.pk, ok=True, form=raw, user=reviewer)
    assert {"name", "email", "seats", "plan", "regions"} <= set(refused.value.field_errors)
    assert (await Request.objects.aget(pk=request.pk)).status == RequestStatus.OPEN
    await runner.cancel_run(run.pk)


async def test_input_typed_data_from_a_program_gets_the_same_validation(console_events, reviewer):
    run, request = await start_and_wait_for_request(console_events, "deploy", {}, reviewer)
    with pytest.raises(decisions.DecisionError) as refused:
        await decisions.aresolve_request(request.pk, ok=True, data={"env": "mars"}, user=reviewer)
    assert list(refused.value.field_errors) == ["env"]
    await decisions.aresolve_request(request.pk, ok=True, data={"env": "production"}, user=reviewer)
    assert (await finished(run)).result_output == "deployed to production"


async def test_input_schema_the_form_cannot_render_says_why_and_takes_json(console_events, reviewer, extra_tools):
    from toolnexus import define_tool, pending

    nested = {
        "type": "object",
        "properties": {"address": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
        "required": ["address"],
    }

    def ship(ctx=None):
        if ctx is not None and ctx.answer is not None:
            return f"shipping to {ctx.answer.data['address']['city']}"
        return pending(kind="input", prompt="Where to?", data={"schema": nested})

    extra_tools(define_tool(ship, name="ship"))
    run, request = await start_and_wait_for_request(console_events, "ship", {}, reviewer)
    view = await sync_to_async(shapes.request_view)(request)
    assert view["form"]["renderable"] is False
    assert "address" in view["form"]["reason"]
    with pytest.raises(decisions.DecisionError):
        await decisions.aresolve_request(request.pk, ok=True, data={"address": {}}, user=reviewer)
    await decisions.aresolve_request(request.pk, ok=True, data={"address": {"city": "Lyon"}}, user=reviewer)
    assert (await finished(run)).result_output == "shipping to Lyon"


# -- question ---------------------------------------------------------------------


QUESTIONS = [
    {"question": "Which colour?", "header": "Colour", "options": ["red", "blue"]},
    {"question": "Which sizes?", "options": ["S", "M", "L"], "multiple": True},
    {"question": "Anything else?"},
]


async def test_builtin_question_answers_reach_the_tool_in_order(console_events, reviewer):
    run, request = await start_and_wait_for_request(console_events, "question", {"questions": QUESTIONS}, reviewer)
    assert request.kind == "question"
    answers = {"answers": [["blue"], ["S", "L"], ["gift wrap, please"]]}
    await decisions.aresolve_request(request.pk, ok=True, data=answers, user=reviewer)
    done = await finished(run)
    assert done.status == RunStatus.SUCCEEDED
    assert done.result_output == '{"answers": [["blue"], ["S", "L"], ["gift wrap, please"]]}'


async def test_question_answer_of_the_wrong_shape_is_refused_per_question(console_events, reviewer):
    run, request = await start_and_wait_for_request(console_events, "question", {"questions": QUESTIONS}, reviewer)
    with pytest.raises(decisions.DecisionError) as refused:
        await decisions.aresolve_request(request.pk, ok=True, data={"answers": [["red", "blue"], ["S"]]}, user=reviewer)
    assert "q0" in refused.value.field_errors  # two answers to a single-choice question
    assert (await Request.objects.aget(pk=request.pk)).status == RequestStatus.OPEN
    await runner.cancel_run(run.pk)


# -- credentials ------------------------------------------------------------------


async def test_input_asking_for_a_password_is_refused_audited_and_can_only_be_declined(console_events, reviewer):
    run, request = await start_and_wait_for_request(console_events, "ask_secret", {}, reviewer)
    view = await sync_to_async(shapes.request_view)(request)
    assert view["credentials"] and "password" in view["credentials"]
    assert view["form"] is None
    assert await AuditEvent.objects.filter(
        request_id=request.pk, action=AuditEvent.Action.REQUEST_CREDENTIALS_REFUSED
    ).aexists()
    with pytest.raises(decisions.DecisionError) as refused:
        await decisions.aresolve_request(request.pk, ok=True, form={"password": "hunter2"}, user=reviewer)
    assert "can only decline" in refused.value.message
    assert not await Request.objects.filter(answer_data__icontains="hunter2").aexists()
    await decisions.aresolve_request(request.pk, ok=False, reason="declined", user=reviewer)
    assert (await finished(run)).result_output == (
        "declined/expired: Enter the database password (declined by alice) "
        "Do not make the same call again; ask the user how to go on."
    )


async def test_question_asking_for_a_token_is_refused(console_events, reviewer):
    questions = [{"question": "What is your GitHub token?"}]
    run, request = await start_and_wait_for_request(console_events, "question", {"questions": questions}, reviewer)
    assert (await sync_to_async(shapes.request_view)(request))["credentials"]
    with pytest.raises(decisions.DecisionError):
        await decisions.aresolve_request(request.pk, ok=True, data={"answers": [["ghp_x"]]}, user=reviewer)
    await runner.cancel_run(run.pk)


# -- authorization and unknown kinds ----------------------------------------------


async def test_authorization_done_resumes_the_tool(console_events, reviewer):
    run, request = await start_and_wait_for_request(console_events, "balance", {"account": "globex"}, reviewer)
    assert request.kind == "authorization" and request.url.startswith("https://")
    await decisions.aresolve_request(request.pk, ok=True, user=reviewer)
    assert (await finished(run)).result_output == "balance of globex: 87.00 EUR"


async def test_an_authorization_answer_hands_nothing_over_but_a_comment(console_events, reviewer):
    run, request = await start_and_wait_for_request(console_events, "balance", {"account": "globex"}, reviewer)
    with pytest.raises(decisions.DecisionError) as refused:
        await decisions.aresolve_request(request.pk, ok=True, data={"token": "attacker"}, user=reviewer)
    assert "only 'comment'" in refused.value.field_errors["token"][0]
    assert (await Request.objects.aget(pk=request.pk)).status == RequestStatus.OPEN
    answer = await decisions.aresolve_request(request.pk, ok=True, data={"comment": "signed in"}, user=reviewer)
    assert answer.data == {"comment": "signed in"}
    assert (await finished(run)).result_output == "balance of globex: 87.00 EUR"


async def test_unknown_kind_takes_a_json_reply(console_events, reviewer):
    run, request = await start_and_wait_for_request(console_events, "confirm", {}, reviewer)
    assert request.kind == "confirmation"
    await decisions.aresolve_request(request.pk, ok=True, data={"ticket": 42}, user=reviewer)
    assert (await finished(run)).result_output == 'confirmed rotate the logs with {"ticket": 42}'


# -- decline versus cancel --------------------------------------------------------


@pytest.mark.parametrize(
    "reason, status", [("declined", RequestStatus.DECLINED), ("cancelled", RequestStatus.CANCELLED)]
)
async def test_request_cancel_is_distinct_from_decline(console_events, reviewer, starter, reason, status):
    run, request = await start_and_wait_for_request(console_events, "refund", {}, starter)
    answer = await decisions.aresolve_request(request.pk, ok=False, reason=reason, user=reviewer)
    assert answer.reason == reason
    stored = await Request.objects.aget(pk=request.pk)
    assert stored.status == status and stored.answer_reason == reason
    action = {"declined": "request.declined", "cancelled": "request.cancelled"}[reason]
    assert await AuditEvent.objects.filter(request_id=request.pk, action=action).aexists()
    assert (await finished(run)).result_output.startswith("declined/expired: ")


# -- expiry -----------------------------------------------------------------------


async def test_server_expires_a_request_at_its_deadline_with_no_dashboard(console_events, reviewer):
    run = await runner.start_run(tool="expiring", args={"seconds": 0.4}, user=reviewer)
    expired = await console_events.next("request.expired", run_id=run.pk)
    stored = await Request.objects.aget(pk=expired["request_id"])
    assert stored.status == RequestStatus.EXPIRED
    assert (stored.answer_ok, stored.answer_reason) == (False, "expired")
    # §10's exact prefix, then what happened: never worded as a person's refusal.
    expired_at = moments.readable_time(stored.answered_at)
    assert (await finished(run)).result_output == (
        f"declined/expired: Approve within 0.4 seconds? (expired at {expired_at}, nobody answered)"
    )


async def test_a_request_due_sooner_wakes_the_sleeping_expiry_timer(console_events, reviewer):
    # The timer sleeps until the first run's deadline (capped at EXPIRY_CHECK_SECONDS); a request
    # due before that must wake it, or it would expire seconds late.
    first = await runner.start_run(tool="expiring", args={"seconds": 60}, user=reviewer)
    await console_events.next("request.opened", run_id=first.pk)
    sooner = await runner.start_run(tool="expiring", args={"seconds": 0.3}, user=reviewer)
    await console_events.next("request.expired", run_id=sooner.pk, timeout=runner.EXPIRY_CHECK_SECONDS / 2)
    assert (await Request.objects.filter(run=first).aget()).status == RequestStatus.OPEN
    await runner.cancel_run(first.pk)
    await finished(first)


def test_only_a_request_due_before_the_timers_next_read_wakes_it():
    sup = runner.Supervisor(loop=None)
    sup.next_expiry_check = time.time() + 5
    assert not sup.expires_before_next_check({"expiresAt": None})  # no deadline: nothing to time
    assert not sup.expires_before_next_check({"expiresAt": in_seconds(60)})  # the timer reads before then
    assert sup.expires_before_next_check({"expiresAt": in_seconds(1)})
    assert sup.expires_before_next_check(None)  # a frame without its request: wake, to be safe
    sup.next_expiry_check = math.inf  # the timer is reading now and may have missed it
    assert sup.expires_before_next_check({"expiresAt": in_seconds(60)})


async def test_late_answer_gets_a_clear_expired_error(console_events, reviewer):
    run = await runner.start_run(tool="expiring", args={"seconds": 0.2}, user=reviewer)
    expired = await console_events.next("request.expired", run_id=run.pk)
    with pytest.raises(decisions.DecisionError) as refused:
        await decisions.aresolve_request(expired["request_id"], ok=True, user=reviewer)
    assert refused.value.code == "not_open"
    assert "expired" in refused.value.message


async def test_answer_arriving_after_the_deadline_but_before_the_timer_is_refused_as_expired(reviewer):
    wire = WireRequest(id="late-1", kind="approval", prompt="Late?", expiresAt=in_seconds(-1))
    await decisions.aopen_request(wire)
    with pytest.raises(decisions.DecisionError) as refused:
        await decisions.aresolve_request("late-1", ok=True, user=reviewer)
    assert "expired" in refused.value.message
    assert (await Request.objects.aget(pk="late-1")).status == RequestStatus.EXPIRED


async def test_default_expiry_per_kind_from_settings(settings, console_events, reviewer):
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "DEFAULT_EXPIRY_SECONDS": {"approval": 0.3}}
    run, request = await start_and_wait_for_request(console_events, "refund", {}, reviewer)
    assert request.expires_at_wire and request.expires_at is not None
    await console_events.next("request.expired", run_id=run.pk)
    assert (await finished(run)).status == RunStatus.FAILED
    deploy_run, deploy_request = await start_and_wait_for_request(console_events, "deploy", {}, reviewer)
    assert deploy_request.expires_at_wire is None  # input has no default here
    await runner.cancel_run(deploy_run.pk)


async def test_malformed_expires_at_is_refused_with_a_message():
    with pytest.raises(decisions.DecisionError) as refused:
        await decisions.aopen_request(WireRequest(id="bad-exp", kind="approval", prompt="?", expiresAt="tomorrow"))
    assert "RFC 3339" in refused.value.message


# -- MCP elicitation (toolnexus' own mapping functions) ---------------------------


SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "minLength": 2}}, "required": ["city"]}


async def test_form_mode_elicitation_renders_as_input_and_accepts(console_events, reviewer):
    await runner.ensure_started()  # the console's server starts its supervisor before anything waits
    params = mcp_types.ElicitRequestFormParams(message="Which city?", requestedSchema=SCHEMA)
    request = elicitation_to_request(params)
    waiting = asyncio.ensure_future(console_wait_for(request))
    opened = await console_events.next("request.opened", request_id=request.id)
    assert opened["request"]["kind"] == "input"
    assert opened["request"]["form"]["renderable"] is True
    with pytest.raises(decisions.DecisionError):
        await decisions.aresolve_request(request.id, ok=True, form={"city": "X"}, user=reviewer)
    await decisions.aresolve_request(request.id, ok=True, form={"city": "Oslo"}, user=reviewer)
    result = answer_to_elicit_result(await waiting)
    assert (result.action, result.content) == ("accept", {"city": "Oslo"})


@pytest.mark.parametrize("reason, action", [("declined", "decline"), ("cancelled", "cancel")])
async def test_elicitation_decline_and_cancel_map_back_to_mcp(console_events, reviewer, reason, action):
    await runner.ensure_started()  # the console's server starts its supervisor before anything waits
    params = mcp_types.ElicitRequestFormParams(message="Which city?", requestedSchema=SCHEMA)
    request = elicitation_to_request(params)
    waiting = asyncio.ensure_future(console_wait_for(request))
    await console_events.next("request.opened", request_id=request.id)
    await decisions.aresolve_request(request.id, ok=False, reason=reason, user=reviewer)
    assert answer_to_elicit_result(await waiting).action == action


async def test_url_mode_elicitation_renders_as_authorization(console_events, reviewer):
    params = mcp_types.ElicitRequestURLParams(
        message="Connect your calendar", url="https://calendar.example.com/connect", elicitationId="e-1"
    )
    request = elicitation_to_request(params)
    waiting = asyncio.ensure_future(console_wait_for(request))
    opened = await console_events.next("request.opened", request_id=request.id)
    assert (opened["request"]["kind"], opened["request"]["url"]) == (
        "authorization",
        "https://calendar.example.com/connect",
    )
    await decisions.aresolve_request(request.id, ok=True, user=reviewer)
    assert answer_to_elicit_result(await waiting).action == "accept"


async def test_expired_elicitation_maps_to_cancel(console_events):
    await runner.ensure_started()  # the console's server starts its supervisor before anything waits
    params = mcp_types.ElicitRequestFormParams(message="Quick!", requestedSchema=SCHEMA)
    request = elicitation_to_request(params)
    request.expiresAt = in_seconds(0.2)
    answer = await console_wait_for(request)
    assert (answer.ok, answer.reason) == (False, "expired")
    assert answer_to_elicit_result(answer).action == "cancel"
