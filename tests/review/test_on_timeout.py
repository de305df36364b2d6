"""What a request's passed deadline does, by its policy's ``on_timeout`` (issue 35): decline (the default),
keep it open, escalate it to fallback answerers, or approve it with its defaults; the request may only ask
for a stricter outcome. Driven through the API and the expiry timer (``expire_due_requests``) with the
deadline moved into the past, as time passing would: no sleeps.
"""

import json
from datetime import UTC, datetime, timedelta

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.test import AsyncClient
from django.utils import timezone
from toolnexus import define_tool, pending

from approvals import checks, moments
from approvals.models import AuditEvent, Policy, Request, RequestStatus, Run, RunStatus
from approvals.review import decisions
from approvals.runs import runner
from approvals.team import policies
from tests.support.api_client import logged_in, post_json
from tests.support.dashboard import dashboard_for
from tests.support.signatures import verified
from tests.support.users import bearer

pytestmark = pytest.mark.django_db(transaction=True)

IN_AN_HOUR = (datetime.now(UTC) + timedelta(hours=1)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@pytest.fixture(autouse=True)
def _stop_leftover_runs(stop_leftover_runs):
    """Every test here cancels what it left running (the fixture is in tests/conftest.py)."""


@pytest.fixture
async def host_token(make_user, issue_token):
    svc = await sync_to_async(make_user)("svc", password=None)
    return await sync_to_async(issue_token)(svc, "billing")


async def host_opens(token, request_id, **fields):
    """A remote host opens an approval of tool "transfer" due in an hour, with its bearer token."""
    body = {
        "id": request_id,
        "kind": "approval",
        "prompt": "Transfer 12.50 EUR to ACME?",
        "expiresAt": IN_AN_HOUR,
        "host": "billing-worker-3",
        "tool": "transfer",
        **fields,
    }
    response = await post_json(AsyncClient(), "/api/v1/requests", body, headers=bearer(token))
    assert response.status_code == 201, response.content
    return response.json()


async def deadline_passes(request_id):
    """It was opened two hours ago, its deadline is a minute ago, and the console's expiry timer runs once."""
    await deadline_passed(request_id)
    await decisions.aexpire_due_requests()


async def deadline_passed(request_id):
    """It was opened two hours ago and its deadline is a minute ago; nothing has acted on it yet."""
    now = timezone.now()
    await Request.objects.filter(pk=request_id).aupdate(
        created_at=now - timedelta(hours=2), expires_at=now - timedelta(minutes=1)
    )


async def view_of(client, request_id):
    response = await client.get(f"/api/v1/requests/{request_id}")
    assert response.status_code == 200, response.content
    return response.json()


async def actions_of(request_id):
    return [
        action
        async for action in AuditEvent.objects.filter(request_id=request_id)
        .order_by("id")
        .values_list("action", flat=True)
    ]


def escalating_policy(**fields):
    policy = Policy.objects.create(
        name="transfers", tool_pattern="transfer", on_timeout="escalate", escalation_step_minutes=30, **fields
    )
    return policy


# -- decline, the default ------------------------------------------------------------------------------------


async def test_by_default_a_request_nobody_answered_expires_credited_to_the_timeout(api, host_token):
    await host_opens(host_token, "t-default")
    await deadline_passes("t-default")

    view = await view_of(api, "t-default")
    assert (view["status"], verified(view["answer"])) == (
        "expired",
        {"id": "t-default", "ok": False, "reason": "expired"},
    )
    assert (view["decided_by"], view["answered_by"]) == ("timeout", None)
    row = await Request.objects.aget(pk="t-default")
    when = moments.readable_time(row.answered_at)
    assert view["decision"]["decided_by"] == "timeout"
    assert view["decision"]["text"] == f"Expired at {when}, nobody answered"
    event = await AuditEvent.objects.aget(request_id="t-default", action="request.expired")
    assert (event.actor, event.payload["decided_by"], event.payload["on_timeout"]) == ("system", "timeout", "decline")


async def test_a_remote_host_asking_to_approve_by_waiting_under_the_default_policy_is_declined(api, host_token):
    # A tool or a host never approves its own request by waiting: the request may only ask for stricter.
    await host_opens(host_token, "t-sneaky", data={"on_timeout": "apply_defaults"})
    await deadline_passes("t-sneaky")

    view = await view_of(api, "t-sneaky")
    assert (view["status"], view["answer"]["ok"], view["answer"]["reason"]) == ("expired", False, "expired")
    event = await AuditEvent.objects.aget(request_id="t-sneaky", action="request.expired")
    assert event.payload["on_timeout"] == "decline"


async def test_a_request_may_ask_for_stricter_than_its_policy(api, host_token):
    await sync_to_async(Policy.objects.create)(name="lenient", tool_pattern="transfer", on_timeout="keep_open")
    await host_opens(host_token, "t-strict", data={"on_timeout": "decline"})
    await deadline_passes("t-strict")
    assert (await view_of(api, "t-strict"))["status"] == "expired"


# -- keep_open -----------------------------------------------------------------------------------------------


async def test_keep_open_leaves_it_answerable_audited_once(api, host_token):
    await sync_to_async(Policy.objects.create)(name="patient", tool_pattern="transfer", on_timeout="keep_open")
    await host_opens(host_token, "t-open")
    await deadline_passes("t-open")
    await decisions.aexpire_due_requests()  # the timer again: nothing expires it by that deadline
    assert await decisions.aexpire_request("t-open") is False

    view = await view_of(api, "t-open")
    assert (view["status"], view["kept_open"], view["expiresAt"]) == ("open", True, IN_AN_HOUR)
    assert await actions_of("t-open") == ["request.opened", "request.kept_open"]
    kept = await AuditEvent.objects.aget(request_id="t-open", action="request.kept_open")
    assert kept.payload["note"] == "deadline passed, kept open"

    answered = await post_json(api, "/api/v1/requests/t-open/answer", {"ok": True})
    assert answered.status_code == 200, answered.content
    view = await view_of(api, "t-open")
    assert (view["status"], view["decided_by"], view["answered_by"]) == ("answered", "person", "alice")


# -- escalate ------------------------------------------------------------------------------------------------


async def test_escalation_lets_the_fallback_answerers_answer_and_moves_the_deadline(alice, bob, host_token):
    policy = await sync_to_async(escalating_policy)()
    await sync_to_async(policy.allowed_users.add)(alice)
    await sync_to_async(policy.fallback_users.add)(bob)
    as_bob = await logged_in(bob)
    await host_opens(host_token, "t-esc")
    refused = await post_json(as_bob, "/api/v1/requests/t-esc/answer", {"ok": True})
    assert refused.status_code == 403, refused.content

    before = timezone.now()
    await deadline_passes("t-esc")
    view = await view_of(as_bob, "t-esc")
    assert (view["status"], view["escalations"]) == ("open", 1)
    assert view["policy"]["users"] == ["alice", "bob"] and view["policy"]["may_answer"] is True
    moved = datetime.fromisoformat(view["expiresAt"].replace("Z", "+00:00"))
    assert before + timedelta(minutes=30) <= moved <= timezone.now() + timedelta(minutes=30)
    event = await AuditEvent.objects.aget(request_id="t-esc", action="request.escalated")
    assert (event.payload["escalations"], event.payload["to"], event.payload["expiresAt"]) == (
        1,
        ["bob"],
        view["expiresAt"],
    )

    answered = await post_json(as_bob, "/api/v1/requests/t-esc/answer", {"ok": True})
    assert answered.status_code == 200, answered.content
    assert (await view_of(as_bob, "t-esc"))["decision"]["text"] == "Approved by bob"


async def test_a_request_asking_to_escalate_under_an_apply_defaults_policy_reaches_its_fallback_answerers(
    alice, bob, host_token
):
    # The request's own on_timeout is stricter than its policy's: the policy's fallback answerers get it.
    policy = await sync_to_async(Policy.objects.create)(
        name="auto", tool_pattern="transfer", on_timeout="apply_defaults", escalation_step_minutes=30
    )
    await sync_to_async(policy.allowed_users.add)(alice)
    await sync_to_async(policy.fallback_users.add)(bob)
    await host_opens(host_token, "t-ask-esc", data={"on_timeout": "escalate"})
    await deadline_passes("t-ask-esc")
    event = await AuditEvent.objects.aget(request_id="t-ask-esc", action="request.escalated")
    assert event.payload["to"] == ["bob"]
    answered = await post_json(await logged_in(bob), "/api/v1/requests/t-ask-esc/answer", {"ok": True})
    assert answered.status_code == 200, answered.content


async def test_escalating_twice_then_declines_as_expired(api, host_token):
    await sync_to_async(escalating_policy)()
    await host_opens(host_token, "t-twice")
    await deadline_passes("t-twice")
    await deadline_passes("t-twice")
    assert (await view_of(api, "t-twice"))["escalations"] == 2
    await deadline_passes("t-twice")

    view = await view_of(api, "t-twice")
    assert (view["status"], view["answer"]["reason"], view["decided_by"]) == ("expired", "expired", "timeout")
    assert await actions_of("t-twice") == [
        "request.opened",
        "request.escalated",
        "request.escalated",
        "request.expired",
    ]
    expired = await AuditEvent.objects.aget(request_id="t-twice", action="request.expired")
    assert (expired.payload["on_timeout"], expired.payload["escalations"]) == ("escalate", 2)


async def test_a_dashboard_sees_the_escalation_live_and_counts_it_for_the_fallback_answerer(alice, bob, host_token):
    policy = await sync_to_async(escalating_policy)()
    await sync_to_async(policy.allowed_users.add)(alice)
    await sync_to_async(policy.fallback_users.add)(bob)
    await host_opens(host_token, "t-live")
    async with dashboard_for(bob) as dashboard:
        await deadline_passes("t-live")
        frame = await dashboard.next("event", action="request.escalated")
    assert frame["request"]["id"] == "t-live"
    assert (frame["request"]["status"], frame["request"]["escalations"]) == ("open", 1)
    assert frame["request"]["policy"]["may_answer"] is True
    assert frame["count_change"] == {"for_me": 1}
    assert frame["words"].startswith("Deadline passed, escalated to bob until ")


# -- apply_defaults ------------------------------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {
        "env": {"type": "string", "enum": ["staging", "production"], "default": "staging"},
        "replicas": {"type": "integer", "default": 2},
    },
    "required": ["env", "replicas"],
}


def asking_tool(schema):
    """A tool that asks for input under ``schema`` and returns exactly the answer's data it was run with."""

    async def execute(ctx=None):
        if ctx is not None and ctx.answer is not None:
            return json.dumps(ctx.answer.data, sort_keys=True)
        return pending(kind="input", prompt="Where to?", data={"schema": schema})

    return define_tool(execute, name="rollout")


async def start_rollout(api, console_events):
    started = await post_json(api, "/api/v1/runs", {"tool": "rollout", "args": {}})
    assert started.status_code == 201, started.content
    run_id = started.json()["id"]
    opened = await console_events.next("request.opened", run_id=run_id)
    return run_id, opened["request_id"]


async def test_a_run_with_a_timeout_is_not_left_waiting_without_end_by_keep_open(api, console_events, extra_tools):
    # Under human-aware time the run's timeout does not count the wait: kept open, nothing would ever end it.
    extra_tools(asking_tool(SCHEMA))
    await sync_to_async(Policy.objects.create)(name="patient", tool_pattern="rollout", on_timeout="keep_open")
    started = await post_json(api, "/api/v1/runs", {"tool": "rollout", "args": {}, "timeout": 60})
    assert started.status_code == 201, started.content
    run_id = started.json()["id"]
    request_id = (await console_events.next("request.opened", run_id=run_id))["request_id"]
    await deadline_passes(request_id)
    await runner.wait_for_run(run_id)

    view = await view_of(api, request_id)
    assert (view["status"], view["kept_open"], view["comment"]) == (
        "expired",
        False,
        "not kept open: its run has a timeout, and would wait without end",
    )
    assert (await Run.objects.aget(pk=run_id)).result_output.startswith("declined/expired: Where to?")


async def test_apply_defaults_runs_the_tool_with_exactly_the_defaults(api, console_events, extra_tools):
    extra_tools(asking_tool(SCHEMA))
    await sync_to_async(Policy.objects.create)(name="rollouts", tool_pattern="rollout", on_timeout="apply_defaults")
    run_id, request_id = await start_rollout(api, console_events)
    await deadline_passes(request_id)
    await runner.wait_for_run(run_id)

    run = await Run.objects.aget(pk=run_id)
    assert (run.status, run.result_output) == (RunStatus.SUCCEEDED, '{"env": "staging", "replicas": 2}')
    view = await view_of(api, request_id)
    assert verified(view["answer"]) == {"id": request_id, "ok": True, "data": {"env": "staging", "replicas": 2}}
    assert view["answer"]["signature"]["decided_by"] == "timeout"
    assert (view["decided_by"], view["answered_by"]) == ("timeout", None)
    row = await Request.objects.aget(pk=request_id)
    assert (
        view["decision"]["text"]
        == f"Answered with its defaults when it expired at {moments.readable_time(row.answered_at)}"
    )
    event = await AuditEvent.objects.aget(request_id=request_id, action="request.answered")
    assert (event.actor, event.payload["decided_by"], event.payload["on_timeout"]) == (
        "system",
        "timeout",
        "apply_defaults",
    )


async def test_an_approval_under_apply_defaults_is_approved_as_asked(api, host_token):
    await sync_to_async(Policy.objects.create)(name="auto", tool_pattern="transfer", on_timeout="apply_defaults")
    await host_opens(host_token, "t-auto")
    await deadline_passes("t-auto")
    view = await view_of(api, "t-auto")
    assert (view["status"], verified(view["answer"]), view["decided_by"]) == (
        "answered",
        {"id": "t-auto", "ok": True},
        "timeout",
    )
    assert view["decision"]["text"].startswith("Approved with its defaults when it expired at ")


async def test_an_answer_after_the_defaults_were_applied_is_told_so(api, host_token):
    await sync_to_async(Policy.objects.create)(name="auto", tool_pattern="transfer", on_timeout="apply_defaults")
    await host_opens(host_token, "t-told")
    await deadline_passes("t-told")
    late = await post_json(api, "/api/v1/requests/t-told/answer", {"ok": False})
    assert late.status_code == 409, late.content
    assert late.json()["message"].startswith("This request was approved with its defaults when it expired at ")


async def test_defaults_that_do_not_fit_decline_and_the_record_says_so(api, console_events, extra_tools):
    # "replicas" is required and has no default: the defaults are no valid answer.
    schema = {**SCHEMA, "properties": {**SCHEMA["properties"], "replicas": {"type": "integer"}}}
    extra_tools(asking_tool(schema))
    await sync_to_async(Policy.objects.create)(name="rollouts", tool_pattern="rollout", on_timeout="apply_defaults")
    run_id, request_id = await start_rollout(api, console_events)
    await deadline_passes(request_id)
    await runner.wait_for_run(run_id)

    view = await view_of(api, request_id)
    assert (view["status"], view["answer"]["reason"], view["comment"]) == ("expired", "expired", "defaults did not fit")
    row = await Request.objects.aget(pk=request_id)
    when = moments.readable_time(row.answered_at)
    assert view["decision"]["text"] == f"Expired at {when}, nobody answered; defaults did not fit"
    run = await Run.objects.aget(pk=run_id)
    assert (
        run.result_output == f"declined/expired: Where to? (expired at {when}, nobody answered; defaults did not fit)"
    )
    event = await AuditEvent.objects.aget(request_id=request_id, action="request.expired")
    assert event.payload["note"] == "defaults did not fit"


# -- saving a policy -----------------------------------------------------------------------------------------


async def test_a_host_sending_a_deadline_already_passed_under_apply_defaults_gets_a_decline(api, host_token):
    # Silence is consent only after people had the time to look: a passed deadline approves nothing.
    await sync_to_async(Policy.objects.create)(name="auto", tool_pattern="transfer", on_timeout="apply_defaults")
    await host_opens(host_token, "t-self", expiresAt="2000-01-01T00:00:00.000Z")
    polled = await AsyncClient().get("/api/v1/requests/t-self/answer?wait=0", headers=bearer(host_token))
    assert (polled.json()["ok"], polled.json()["reason"]) == (False, "expired")
    view = await view_of(api, "t-self")
    assert (view["status"], view["decided_by"]) == ("expired", "timeout")
    assert view["comment"].startswith("defaults not applied: open ")
    assert view["comment"].endswith(" s, under the 5 min people must have")


async def test_a_late_decline_under_apply_defaults_stands_and_never_becomes_an_approval(api, host_token):
    # The deadline passed a minute ago and the timer has not acted yet when a reviewer declines.
    await sync_to_async(Policy.objects.create)(name="auto", tool_pattern="transfer", on_timeout="apply_defaults")
    await host_opens(host_token, "t-late")
    await deadline_passed("t-late")
    declined = await post_json(api, "/api/v1/requests/t-late/answer", {"ok": False, "comment": "not this one"})
    assert declined.status_code == 200, declined.content
    view = await view_of(api, "t-late")
    assert (view["status"], view["answer"]["ok"], view["decided_by"]) == ("declined", False, "person")


async def test_an_extension_committed_while_the_timeout_acts_stands(api, host_token, monkeypatch):
    # The timer read the passed deadline; a reviewer's extension commits before the timer's decision does.
    await sync_to_async(Policy.objects.create)(name="auto", tool_pattern="transfer", on_timeout="apply_defaults")
    await host_opens(host_token, "t-race")
    await deadline_passed("t-race")
    later = timezone.now() + timedelta(hours=1)
    decide = decisions.on_timeout_of

    def extended_meanwhile(request, rule):
        Request.objects.filter(pk=request.pk).update(expires_at=later, expires_at_wire=later.isoformat())
        return decide(request, rule)

    monkeypatch.setattr(decisions, "on_timeout_of", extended_meanwhile)
    assert await decisions.aexpire_request("t-race") is False
    view = await view_of(api, "t-race")
    assert (view["status"], view["answer"]) == ("open", None)
    assert await actions_of("t-race") == ["request.opened"]


async def test_extending_at_the_deadline_under_escalate_extends_the_escalated_deadline(alice, host_token):
    await sync_to_async(escalating_policy)()
    await host_opens(host_token, "t-esc-ext")
    await deadline_passed("t-esc-ext")
    response = await post_json(await logged_in(alice), "/api/v1/requests/t-esc-ext/extend", {"minutes": 10})
    assert response.status_code == 200, response.content
    assert await actions_of("t-esc-ext") == ["request.opened", "request.escalated", "request.extended"]


@pytest.mark.parametrize("fields", [{"quorum": 2}, {"starter_may_answer": False}])
def test_a_policy_may_not_approve_with_defaults_under_a_quorum_or_four_eyes(fields, client, make_user):
    policy = Policy(name="risky", on_timeout="apply_defaults", **fields)
    with pytest.raises(ValidationError) as refused:
        policy.full_clean()
    assert "on_timeout" in refused.value.message_dict

    admin = make_user("root", is_staff=True, is_superuser=True)
    client.force_login(admin)
    form = {
        "name": "risky",
        "enabled": "on",
        "priority": "100",
        "quorum": str(fields.get("quorum", 1)),
        "on_timeout": "apply_defaults",
        "escalation_step_minutes": "60",
        "max_escalations": "2",
        **({"starter_may_answer": "on"} if fields.get("starter_may_answer", True) else {}),
    }
    response = client.post("/admin/approvals/policy/add/", form)
    assert response.status_code == 200
    assert "may not approve with defaults on expiry" in response.content.decode()
    assert not Policy.objects.filter(name="risky").exists()


def test_a_settings_policy_approving_with_defaults_under_a_quorum_is_refused_at_start_up(settings):
    settings.TOOLNEXUS = {
        **settings.TOOLNEXUS,
        "POLICIES": [{"tool": "x", "quorum": 2, "on_timeout": "apply_defaults"}],
    }
    with pytest.raises(ImproperlyConfigured, match="may not approve with defaults on expiry"):
        policies.settings_rules()
    [refused] = checks.policy_settings(None)
    assert refused.id == "approvals.E001" and "may not approve with defaults on expiry" in refused.msg


def test_a_settings_policy_may_escalate_to_fallback_answerers(settings, alice, bob):
    settings.TOOLNEXUS = {
        **settings.TOOLNEXUS,
        "POLICIES": [{"tool": "transfer", "users": ["alice"], "on_timeout": "escalate", "fallback_users": ["bob"]}],
    }
    rule = policies.rule_for("transfer", "approval")
    assert (rule.on_timeout, rule.fallback_users, rule.max_escalations, rule.escalation_step_minutes) == (
        "escalate",
        frozenset({"bob"}),
        2,
        60,
    )
    request = Request(id="x", kind="approval", tool="transfer", status=RequestStatus.OPEN, escalations=1)
    assert policies.facts(request, rule, approvals=())["users"] == ["alice", "bob"]
