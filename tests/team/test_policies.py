"""Who may answer what: policies, four-eyes and quorum, through the one door, the API and the socket.

Each branch of ``policies.refusal`` and of the quorum in ``decisions.resolve_request``
is exercised here: no policy (the starter answers their own), not allowed, four-eyes
(opt-in, by a policy), the starter's decline and cancel, quorum reached, quorum
broken by a decline, and the same reviewer approving twice.
"""

import json

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.test import AsyncClient
from toolnexus import Answer

from approvals import checks, frames, shapes
from approvals.models import AuditEvent, Policy, Request, RequestApproval, RequestStatus, Run, RunStatus
from approvals.review import decisions
from approvals.runs import runner
from approvals.runs import services as runs
from approvals.team import policies
from tests.support.dashboard import async_waiting_request, dashboard_for, put_in_group, waiting_request
from tests.support.signatures import verified

UNBLOCK = (
    "To unblock it, ask another reviewer to approve (a new one: manage.py add_reviewer NAME), or set "
    "starter_may_answer on the policy (in the admin, Approvals > Policies)."
)
FOUR_EYES = (
    f'You started this run, and policy "four-eyes" is four-eyes: anyone but you may approve it. '
    f"You may still decline or cancel it. {UNBLOCK}"
)
FINANCE_ONLY = (
    'Only members of group finance may answer this (policy "refunds"). '
    "To answer it yourself, ask an admin: manage.py add_reviewer bob --group finance."
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def carol(make_user):
    carol = make_user("carol")
    put_in_group(carol, "finance")
    return carol


def refusals(request_id):
    return list(
        AuditEvent.objects.filter(request_id=request_id, action=AuditEvent.Action.REQUEST_ANSWER_REFUSED)
        .order_by("id")
        .values_list("actor", "payload")
    )


def status_of(request_id):
    return Request.objects.get(pk=request_id).status


def four_eyes_policy(**fields):
    """Four-eyes is a team's choice: this policy makes it for refunds."""
    return Policy.objects.create(name="four-eyes", tool_pattern="refund*", starter_may_answer=False, **fields)


def finance_policy(**fields):
    policy = Policy.objects.create(
        name=fields.pop("name", "refunds"), tool_pattern=fields.pop("tool_pattern", "refund*"), **fields
    )
    from django.contrib.auth.models import Group

    policy.allowed_groups.add(Group.objects.get_or_create(name="finance")[0])
    return policy


# -- four-eyes -----------------------------------------------------------------------------------


def test_with_no_policy_the_starter_may_approve_their_own_approval(alice):
    waiting_request("r-own", starter=alice)
    assert policies.rule_for("refund", "approval") is policies.DEFAULT_RULE
    answer = decisions.resolve_request("r-own", ok=True, user=alice)
    assert answer == Answer(id="r-own", ok=True, data=None, reason=None)
    assert Request.objects.get(pk="r-own").answered_by == alice
    assert refusals("r-own") == []


def test_a_policy_that_does_not_say_lets_the_starter_answer(alice):
    Policy.objects.create(name="refund reviewers", tool_pattern="refund*", quorum=1)
    waiting_request("r-unsaid", starter=alice)
    assert decisions.resolve_request("r-unsaid", ok=True, user=alice).ok


def test_under_four_eyes_the_starter_may_not_approve_their_own(alice, bob):
    four_eyes_policy()
    waiting_request("r-four", starter=alice)
    with pytest.raises(decisions.DecisionError) as refused:
        decisions.resolve_request("r-four", ok=True, user=alice)
    assert refused.value.code == "forbidden"
    assert refused.value.http_status == 403
    assert refused.value.message == FOUR_EYES
    assert status_of("r-four") == RequestStatus.OPEN
    assert refusals("r-four") == [
        ("alice", {"ok": True, "rule": "four_eyes", "reason": FOUR_EYES, "policy": "four-eyes"})
    ]

    answer = decisions.resolve_request("r-four", ok=True, user=bob)
    assert answer == Answer(id="r-four", ok=True, data=None, reason=None)
    assert Request.objects.get(pk="r-four").answered_by == bob


@pytest.mark.parametrize(
    "reason, status", [("declined", RequestStatus.DECLINED), ("cancelled", RequestStatus.CANCELLED)]
)
def test_the_starter_may_always_decline_or_cancel_their_own(alice, bob, reason, status):
    policy = four_eyes_policy()
    policy.allowed_users.add(bob)  # alice is not even among the answerers
    waiting_request("r-mine", starter=alice)
    answer = decisions.resolve_request("r-mine", ok=False, reason=reason, user=alice)
    assert answer.reason == reason
    assert status_of("r-mine") == status
    assert refusals("r-mine") == []


def test_a_policy_can_hold_other_kinds_to_four_eyes(alice):
    Policy.objects.create(name="deploys", tool_pattern="deploy*", starter_may_answer=False)
    waiting_request("r-deploy", starter=alice, tool="deploy", kind="confirmation")
    with pytest.raises(decisions.DecisionError, match=r"four-eyes"):
        decisions.resolve_request("r-deploy", ok=True, data={}, user=alice)


def test_four_eyes_for_a_host_request_names_the_request(alice, bob):
    from toolnexus import Request as WireRequest

    Policy.objects.create(name="ship with two", kind="approval", starter_may_answer=False)
    decisions.open_request(WireRequest(id="r-host", kind="approval", prompt="Ship?"), host="ci", opened_by=alice)
    with pytest.raises(decisions.DecisionError) as refused:
        decisions.resolve_request("r-host", ok=True, user=alice)
    assert refused.value.message.startswith('You opened this request, and policy "ship with two" is four-eyes')
    assert decisions.resolve_request("r-host", ok=True, user=bob).ok


# -- who may answer --------------------------------------------------------------------------------


def test_only_members_of_the_policys_group_may_answer(alice, bob, carol):
    finance_policy()
    waiting_request("r-group", starter=alice)
    with pytest.raises(decisions.DecisionError) as refused:
        decisions.resolve_request("r-group", ok=False, reason="declined", user=bob)
    assert (refused.value.code, refused.value.message) == ("forbidden", FINANCE_ONLY)
    assert refused.value.as_dict() == {"error": "forbidden", "message": FINANCE_ONLY}
    assert refusals("r-group") == [
        ("bob", {"ok": False, "rule": "not_allowed", "reason": FINANCE_ONLY, "policy": "refunds"})
    ]
    assert decisions.resolve_request("r-group", ok=True, user=carol).ok
    answered = AuditEvent.objects.get(request_id="r-group", action="request.answered")
    assert answered.payload["policy"] == "refunds" and answered.actor == "carol"


def test_named_users_may_answer(alice, bob, carol):
    policy = Policy.objects.create(name="bob only", tool_pattern="refund")
    policy.allowed_users.add(bob)
    waiting_request("r-named", starter=alice)
    with pytest.raises(decisions.DecisionError) as refused:
        decisions.resolve_request("r-named", ok=True, user=carol)
    assert refused.value.message == (
        'Only bob may answer this (policy "bob only"). To answer it yourself, ask an admin: '
        "add carol to the policy's users (in the admin, Approvals > Policies)."
    )
    assert decisions.resolve_request("r-named", ok=True, user=bob).ok


def test_refusal_messages_name_who_may_answer():
    assert policies.who_may_answer({"bob"}, set()) == "bob"
    assert policies.who_may_answer({"bob", "ann"}, set()) == "ann or bob"
    assert policies.who_may_answer(set(), {"ops", "finance"}) == "members of groups finance or ops"
    assert policies.who_may_answer({"bob"}, {"ops"}) == "bob or members of group ops"


@pytest.mark.parametrize(
    "users, groups, source, who, unblock",
    [
        ((), (), "database", "anyone but you", "manage.py add_reviewer NAME"),
        (
            ("alice", "bob"),
            (),
            "settings",
            "bob",
            """add NAME to the policy's users (in TOOLNEXUS["POLICIES"] or CONSOLE_POLICIES)""",
        ),
        (
            ("alice",),
            (),
            "database",
            "no one else (the policy names only you)",
            "add NAME to the policy's users (in the admin, Approvals > Policies)",
        ),
        (
            (),
            ("finance",),
            "database",
            "members of group finance, not you,",
            "manage.py add_reviewer NAME --group finance",
        ),
    ],
)
def test_four_eyes_says_who_else_may_approve_and_how_to_unblock(users, groups, source, who, unblock):
    facts = {
        "name": "p",
        "source": source,
        "users": list(users),
        "groups": list(groups),
        "starter": "alice",
        "started": "run",
        "starter_may_answer": False,
        "approvals": [],
        "quorum": 1,
    }
    refused = policies.refusal(facts, policies.Viewer("alice", frozenset(groups)))
    assert refused.rule == "four_eyes"
    assert f"is four-eyes: {who} may approve it. You may still decline or cancel it." in refused.message
    assert f"(a new one: {unblock}), or set starter_may_answer on the policy" in refused.message
    assert policies.refusal(facts, policies.Viewer("alice", frozenset(groups)), ok=False) is None


def test_the_console_itself_is_not_bound_by_policies(alice):
    finance_policy()
    waiting_request("r-system", starter=alice)
    assert decisions.expire_request("r-system", run_timed_out=True)
    assert Request.objects.get(pk="r-system").answer_reason == "expired"
    assert refusals("r-system") == []


# -- quorum ----------------------------------------------------------------------------------------


def test_quorum_is_reached_by_two_different_approvals(alice, bob, carol):
    Policy.objects.create(name="two keys", tool_pattern="refund*", quorum=2)
    waiting_request("r-quorum", starter=alice)

    first = decisions.resolve_request("r-quorum", ok=True, comment="looks right", user=bob)
    assert isinstance(first, decisions.ApprovalRecorded)
    assert (first.approvals, first.quorum) == (["bob"], 2)
    assert first.as_dict()["message"].startswith("Your approval is recorded: 1 of 2 approvals.")
    assert status_of("r-quorum") == RequestStatus.OPEN
    recorded = AuditEvent.objects.get(request_id="r-quorum", action="request.approval_recorded")
    assert (recorded.actor, recorded.payload["approvals"], recorded.payload["quorum"]) == ("bob", ["bob"], 2)

    second = decisions.resolve_request("r-quorum", ok=True, comment="agreed", user=carol)
    assert second == Answer(id="r-quorum", ok=True, data={"comment": "agreed"}, reason=None)
    row = Request.objects.get(pk="r-quorum")
    assert (row.status, row.answered_by, row.comment) == (RequestStatus.ANSWERED, carol, "agreed")
    assert list(RequestApproval.objects.filter(request=row).values_list("user__username", "comment")) == [
        ("bob", "looks right"),
        ("carol", "agreed"),
    ]
    answered = AuditEvent.objects.get(request_id="r-quorum", action="request.answered")
    assert answered.payload["approvals"] == ["bob", "carol"]
    assert answered.payload["policy"] == "two keys"


def test_quorum_is_broken_by_one_decline(alice, bob, carol):
    Policy.objects.create(name="two keys", tool_pattern="refund*", quorum=2)
    waiting_request("r-broken", starter=alice)
    assert isinstance(decisions.resolve_request("r-broken", ok=True, user=bob), decisions.ApprovalRecorded)
    answer = decisions.resolve_request("r-broken", ok=False, reason="declined", comment="wrong order", user=carol)
    assert answer == Answer(id="r-broken", ok=False, data={"comment": "wrong order"}, reason="declined")
    assert status_of("r-broken") == RequestStatus.DECLINED
    with pytest.raises(decisions.DecisionError) as late:
        decisions.resolve_request("r-broken", ok=True, user=carol)
    assert late.value.code == "not_open" and "declined by carol" in late.value.message


def test_the_same_reviewer_approving_twice_is_refused(alice, bob):
    Policy.objects.create(name="two keys", tool_pattern="refund*", quorum=2)
    waiting_request("r-twice", starter=alice)
    decisions.resolve_request("r-twice", ok=True, user=bob)
    with pytest.raises(decisions.DecisionError) as refused:
        decisions.resolve_request("r-twice", ok=True, user=bob)
    assert refused.value.code == "forbidden"
    assert refused.value.message == "You already approved this; it needs 1 more approval from someone else."
    assert [payload["rule"] for _, payload in refusals("r-twice")] == ["already_approved"]
    assert RequestApproval.objects.filter(request_id="r-twice").count() == 1
    assert status_of("r-twice") == RequestStatus.OPEN


def test_later_approvers_must_approve_the_same_values(alice, bob, carol):
    Policy.objects.create(name="two keys", kind="confirmation", quorum=2)
    waiting_request("r-values", starter=alice, tool="confirm", kind="confirmation")
    decisions.resolve_request("r-values", ok=True, data={"amount": 10}, user=bob)
    with pytest.raises(decisions.DecisionError) as differs:
        decisions.resolve_request("r-values", ok=True, data={"amount": 99}, user=carol)
    assert differs.value.code == "invalid" and differs.value.message.startswith("bob approved different values")
    assert decisions.resolve_request("r-values", ok=True, data={"amount": 10}, user=carol).data == {"amount": 10}


def test_the_next_approvers_form_opens_with_the_first_approvers_values(alice, bob):
    Policy.objects.create(name="two keys", tool_pattern="refund", quorum=2)
    request = waiting_request("r-prefill", starter=alice, data={"editable": ["amount"]})
    Request.objects.filter(pk=request.pk).update(args={"order": "A-1", "amount": 25.0})

    def amount_shown():
        view = next(v for v in frames.snapshot()["requests"] if v["id"] == "r-prefill")
        return next(f["default"] for f in view["form"]["fields"] if f["name"] == "amount")

    assert amount_shown() == "25.0"
    decisions.resolve_request("r-prefill", ok=True, form={"amount": "20"}, comment="less", user=bob)
    assert amount_shown() == "20"


# -- which policy applies --------------------------------------------------------------------------


def test_the_first_matching_policy_by_priority_wins(alice, bob):
    Policy.objects.create(name="everything", priority=500, quorum=3)
    Policy.objects.create(name="refunds", priority=10, tool_pattern="ref*", kind="approval", quorum=2)
    Policy.objects.create(name="switched off", priority=1, tool_pattern="refund", enabled=False)
    Policy.objects.create(name="other kind", priority=5, tool_pattern="refund", kind="input")
    assert policies.rule_for("refund", "approval").name == "refunds"
    assert policies.rule_for("deploy", "approval").name == "everything"
    assert policies.rule_for("refund", "input").name == "other kind"


def test_settings_policies_apply_when_no_database_policy_matches(settings, alice, bob, carol):
    settings.TOOLNEXUS = {
        **settings.TOOLNEXUS,
        "POLICIES": [{"name": "from settings", "tool": "refund*", "groups": ["finance"]}],
    }
    assert policies.rule_for("refund", "approval").name == "from settings"
    assert policies.rule_for("deploy", "approval") is policies.DEFAULT_RULE
    waiting_request("r-settings", starter=alice)
    with pytest.raises(
        decisions.DecisionError, match=r'^Only members of group finance may answer this \(policy "from settings"\)'
    ):
        decisions.resolve_request("r-settings", ok=True, user=bob)
    Policy.objects.create(name="in the admin", tool_pattern="refund")  # a database policy wins over settings
    assert policies.rule_for("refund", "approval").name == "in the admin"
    assert decisions.resolve_request("r-settings", ok=True, user=bob).ok


@pytest.mark.parametrize(
    "entry, complaint",
    [
        ("refund*", "must be a dict"),
        ({"tool": "x", "quorom": 2}, "unknown keys"),
        ({"quorum": 0}, "at least 1"),
        ({"groups": "ops"}, "list of names"),
        ({"starter_may_answer": "no"}, "true or false"),
        ({"confirm_approval": "yes"}, "true or false"),
    ],
)
def test_a_bad_settings_policy_is_named(settings, entry, complaint):
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "POLICIES": [entry]}
    with pytest.raises(ImproperlyConfigured, match=complaint):
        policies.settings_rules()


def test_a_policy_that_asks_for_a_confirmation_says_so_in_every_view(settings):
    settings.TOOLNEXUS = {
        **settings.TOOLNEXUS,
        "POLICIES": [{"name": "prod deploys", "tool": "deploy", "confirm_approval": True, "starter_may_answer": True}],
    }
    waiting_request("r-deploy", tool="deploy")
    waiting_request("r-refund", tool="refund")
    assert policies.facts(Request.objects.get(pk="r-deploy"))["confirm_approval"] is True
    assert policies.facts(Request.objects.get(pk="r-refund"))["confirm_approval"] is False
    Policy.objects.create(name="admin deploys", tool_pattern="refund", confirm_approval=True)
    policies.forget_cached_policies()
    assert policies.facts(Request.objects.get(pk="r-refund"))["confirm_approval"] is True


def test_upgrading_keeps_four_eyes_on_the_policies_it_applied_to():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before = [("approvals", "0009_audit_lockout_action")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    OldPolicy = executor.loader.project_state(before).apps.get_model("approvals", "Policy")
    for name, kind in (("approvals", "approval"), ("everything", ""), ("inputs", "input")):
        OldPolicy.objects.create(name=name, kind=kind, starter_may_answer=None)
    OldPolicy.objects.create(name="said yes", kind="approval", starter_may_answer=True)
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())  # through 0010, back to where the other tests expect it
    assert dict(Policy.objects.values_list("name", "starter_may_answer")) == {
        "approvals": False,
        "everything": False,
        "inputs": True,
        "said yes": True,
    }


def test_a_policy_edited_in_this_process_applies_at_once(alice, bob):
    assert policies.rule_for("refund", "approval").name == "default"
    policy = Policy.objects.create(name="fresh", tool_pattern="refund")
    assert policies.rule_for("refund", "approval").name == "fresh"  # the cache was forgotten on save
    policy.allowed_users.add(bob)
    assert policies.rule_for("refund", "approval").users == frozenset({"bob"})


# -- what each viewer sees ------------------------------------------------------------------------


def test_the_request_view_says_what_each_viewer_may_do(alice, bob, carol):
    four_eyes_policy(quorum=2)
    request = waiting_request("r-view", starter=alice)
    decisions.resolve_request("r-view", ok=True, user=bob)
    view = frames.request_detail("r-view")
    assert view["policy"]["quorum"] == 2 and view["policy"]["approvals"] == ["bob"]
    assert "may_answer" not in view["policy"]  # the shared view is the same for everyone

    as_alice = shapes.for_user(view, policies.viewer_of(alice))["policy"]
    as_bob = shapes.for_user(view, policies.viewer_of(bob))["policy"]
    as_carol = shapes.for_user(view, policies.viewer_of(carol))["policy"]
    assert (as_alice["may_answer"], as_alice["may_decline"], as_alice["why_not"]) == (False, True, FOUR_EYES)
    assert (as_bob["may_answer"], as_bob["may_decline"], as_bob["approved_by_me"]) == (False, True, True)
    assert as_bob["why_not"] == "You already approved this; it needs 1 more approval from someone else."
    assert (as_carol["may_answer"], as_carol["why_not"], as_carol["approvals"]) == (True, None, ["bob"])
    assert request.pk == "r-view"


def test_a_reviewer_the_policy_does_not_name_may_neither_answer_nor_decline(alice, bob):
    finance_policy()
    waiting_request("r-outsider", starter=alice)
    as_bob = shapes.for_user(frames.request_detail("r-outsider"), policies.viewer_of(bob))["policy"]
    assert (as_bob["may_answer"], as_bob["may_decline"], as_bob["why_not"]) == (False, False, FINANCE_ONLY)
    as_alice = shapes.for_user(frames.request_detail("r-outsider"), policies.viewer_of(alice))["policy"]
    assert (as_alice["may_answer"], as_alice["may_decline"]) == (False, True)
    assert "You may still decline or cancel it." in as_alice["why_not"]


def test_assignees_come_from_the_request_or_else_the_policy(alice, bob, carol):
    from django.contrib.auth.models import Group

    policy = Policy.objects.create(name="refunds", tool_pattern="refund*")
    policy.assigned_groups.add(Group.objects.get(name="finance"))
    waiting_request("r-policy-assigned", starter=alice)
    waiting_request("r-own-assignees", starter=alice, data={"assignees": ["bob", "group:nobody"]})

    def assigned(request_id, user):
        return shapes.for_user(frames.request_detail(request_id), policies.viewer_of(user))["policy"]["assigned_to_me"]

    assert frames.request_detail("r-policy-assigned")["policy"]["assignees"] == ["group:finance"]
    assert (assigned("r-policy-assigned", carol), assigned("r-policy-assigned", bob)) == (True, False)
    assert (assigned("r-own-assignees", carol), assigned("r-own-assignees", bob)) == (False, True)


# -- through a real run ----------------------------------------------------------------------------


async def test_a_run_resumes_once_its_quorum_is_reached(make_user, console_events, stop_leftover_runs):
    alice, bob, carol = [await sync_to_async(make_user)(name) for name in ("alice", "bob", "carol")]
    await Policy.objects.acreate(name="two keys", tool_pattern="refund", quorum=2)
    run = await runner.start_run(tool="refund", args={"amount": 12}, user=alice)
    opened = await console_events.next("request.opened", run_id=run.pk)
    recorded = await decisions.aresolve_request(opened["request_id"], ok=True, user=bob)
    assert isinstance(recorded, decisions.ApprovalRecorded)
    assert (await Run.objects.aget(pk=run.pk)).status == RunStatus.WAITING
    await decisions.aresolve_request(opened["request_id"], ok=True, user=carol)
    await runner.wait_for_run(run.pk)
    done = await Run.objects.aget(pk=run.pk)
    assert (done.status, done.result_output) == (RunStatus.SUCCEEDED, "refunded 12 EUR on order A-1001")


# -- the API ---------------------------------------------------------------------------------------


async def api_as(user):
    client = AsyncClient()
    await client.aforce_login(user)
    return client


async def post_answer(client, request_id, body):
    return await client.post(
        f"/api/v1/requests/{request_id}/answer", data=json.dumps(body), content_type="application/json"
    )


async def test_the_api_refuses_the_starter_with_403(make_user):
    alice, bob = [await sync_to_async(make_user)(name) for name in ("alice", "bob")]
    await sync_to_async(four_eyes_policy)()
    await async_waiting_request("api-four", starter=alice)
    response = await post_answer(await api_as(alice), "api-four", {"ok": True})
    assert response.status_code == 403
    assert response.json() == {"error": "forbidden", "message": FOUR_EYES}
    response = await post_answer(await api_as(bob), "api-four", {"ok": True})
    assert response.status_code == 200 and verified(response.json()) == {"id": "api-four", "ok": True}


async def test_the_api_refuses_a_reviewer_outside_the_group_with_403(make_user):
    alice, bob = [await sync_to_async(make_user)(name) for name in ("alice", "bob")]
    await sync_to_async(finance_policy)()
    await async_waiting_request("api-group", starter=alice)
    response = await post_answer(await api_as(bob), "api-group", {"ok": False, "reason": "declined"})
    assert response.status_code == 403
    assert response.json() == {"error": "forbidden", "message": FINANCE_ONLY}
    assert (await Request.objects.aget(pk="api-group")).status == RequestStatus.OPEN


async def test_the_api_counts_approvals_towards_the_quorum(make_user):
    alice, bob, carol = [await sync_to_async(make_user)(name) for name in ("alice", "bob", "carol")]
    await Policy.objects.acreate(name="two keys", tool_pattern="refund*", quorum=2)
    await async_waiting_request("api-quorum", starter=alice)
    as_bob = await api_as(bob)
    first = await post_answer(as_bob, "api-quorum", {"ok": True})
    assert first.status_code == 202
    assert first.json()["approvals"] == ["bob"] and first.json()["quorum"] == 2 and first.json()["status"] == "open"
    again = await post_answer(as_bob, "api-quorum", {"ok": True})
    assert again.status_code == 403
    assert again.json() == {
        "error": "forbidden",
        "message": "You already approved this; it needs 1 more approval from someone else.",
    }
    listed = (await as_bob.get("/api/v1/requests?status=open")).json()["requests"]
    assert listed[0]["policy"]["approvals"] == ["bob"] and listed[0]["policy"]["may_answer"] is False
    done = await post_answer(await api_as(carol), "api-quorum", {"ok": True})
    assert done.status_code == 200 and verified(done.json()) == {"id": "api-quorum", "ok": True}


# -- the socket --------------------------------------------------------------------------------------


async def test_the_socket_refuses_with_a_forbidden_error_frame(make_user):
    alice = await sync_to_async(make_user)("alice")
    await sync_to_async(four_eyes_policy)()
    await async_waiting_request("ws-four", starter=alice)
    async with dashboard_for(alice) as dashboard:
        [request] = dashboard.snapshot["requests"]
        assert request["policy"]["may_answer"] is False and request["policy"]["why_not"] == FOUR_EYES
        await dashboard.send({"type": "answer", "request": "ws-four", "ok": True, "ref": "7"})
        error = await dashboard.next("error")
        assert error == {"type": "error", "ref": "7", "error": "forbidden", "message": FOUR_EYES}
        refused = await dashboard.next("event", action="request.answer_refused")
        assert refused["actor"] == "alice" and refused["request"]["status"] == "open"
    assert (await Request.objects.aget(pk="ws-four")).status == RequestStatus.OPEN


async def test_each_socket_is_told_what_its_own_viewer_may_answer(make_user):
    alice, bob, carol = [await sync_to_async(make_user)(name) for name in ("alice", "bob", "carol")]
    for member in (alice, carol):  # alice may answer refunds in general, just not her own (four-eyes)
        await sync_to_async(put_in_group)(member, "finance")
    await sync_to_async(finance_policy)(quorum=2, starter_may_answer=False)
    async with dashboard_for(alice) as as_alice, dashboard_for(bob) as as_bob, dashboard_for(carol) as as_carol:
        await async_waiting_request("ws-policy", starter=alice)
        seen = {
            name: (await board.next("event", action="request.opened"))["request"]["policy"]
            for name, board in (("alice", as_alice), ("bob", as_bob), ("carol", as_carol))
        }
        assert (seen["alice"]["may_answer"], seen["alice"]["may_decline"]) == (False, True)
        assert seen["alice"]["why_not"].startswith(
            'You started this run, and policy "refunds" is four-eyes: members of group finance, not you, may approve it.'
        )
        assert (seen["bob"]["may_answer"], seen["bob"]["may_decline"], seen["bob"]["why_not"]) == (
            False,
            False,
            FINANCE_ONLY,
        )
        assert (seen["carol"]["may_answer"], seen["carol"]["quorum"]) == (True, 2)

        await as_carol.send({"type": "answer", "request": "ws-policy", "ok": True, "ref": "1"})
        recorded = await as_carol.next("approval_recorded")
        assert (recorded["ref"], recorded["approvals"], recorded["quorum"]) == ("1", ["carol"], 2)
        update = await as_carol.next("event", action="request.approval_recorded")
        assert (
            update["request"]["policy"]["approved_by_me"] is True and update["request"]["policy"]["may_answer"] is False
        )
        update = await as_bob.next("event", action="request.approval_recorded")
        assert update["request"]["policy"]["approvals"] == ["carol"]
        assert update["request"]["status"] == "open"


# -- the frames a change carries ---------------------------------------------------------------


def as_sent(frame):
    """The text a socket would carry (60 and 60.0 differ here, as they do on the wire)."""
    return json.dumps(frame, sort_keys=True)


@pytest.fixture
def frames_at_commit(monkeypatch):
    """For each event whose frame is built from the rows as written: that frame and the one read back, both at its commit."""
    from approvals import events

    compared = []

    def publish(event, build_frame=None):
        if build_frame is not None:
            compared.append((event.action, event.request_id, build_frame(), frames.event_frame(event)))

    monkeypatch.setattr(events, "publish", publish)
    return compared


def test_frames_built_from_the_rows_as_written_are_the_frames_read_back_after_the_commit(
    alice, bob, carol, frames_at_commit
):
    from toolnexus import Request as WireRequest

    Policy.objects.create(name="two keys", tool_pattern="refund*", quorum=2)
    waiting_request("r-two-keys", starter=alice)  # opened: its run turns waiting
    waiting_request("r-declined", starter=alice, tool="deploy")
    waiting_request(
        "r-form",
        starter=alice,
        tool="deploy",
        kind="input",
        data={"schema": {"type": "object", "properties": {"env": {"type": "string"}}}},
    )
    waiting_request(
        "r-secret",
        starter=alice,
        tool="deploy",
        kind="input",
        data={"schema": {"type": "object", "properties": {"password": {"type": "string"}}}},
    )
    decisions.open_request(WireRequest(id="r-host", kind="approval", prompt="Ship it?"), host="ci", opened_by=bob)
    decisions.resolve_request("r-two-keys", ok=True, user=bob)  # recorded under the quorum
    decisions.resolve_request("r-two-keys", ok=True, comment="agreed", user=carol)  # the quorum: answered
    decisions.resolve_request("r-declined", ok=False, comment="not today", user=bob)
    decisions.resolve_request("r-form", ok=True, data={"env": "prod"}, user=bob)
    decisions.resolve_request("r-host", ok=True, user=alice)

    # 5 opened, 1 credentials refused, 4 resolved; the approval counted under the quorum is read back.
    assert sorted((action, request_id) for action, request_id, _, _ in frames_at_commit) == [
        ("request.answered", "r-form"),
        ("request.answered", "r-host"),
        ("request.answered", "r-two-keys"),
        ("request.credentials_refused", "r-secret"),
        ("request.declined", "r-declined"),
        ("request.opened", "r-declined"),
        ("request.opened", "r-form"),
        ("request.opened", "r-host"),
        ("request.opened", "r-secret"),
        ("request.opened", "r-two-keys"),
    ]
    for action, request_id, built, read_back in frames_at_commit:
        assert as_sent(built) == as_sent(read_back), (action, request_id)
    answered = next(
        built
        for action, request_id, built, _ in frames_at_commit
        if (action, request_id) == ("request.answered", "r-two-keys")
    )
    assert answered["request"]["policy"]["approvals"] == ["bob", "carol"]
    assert (answered["run"]["status"], answered["request"]["answered_by"]) == ("running", "carol")
    opened = next(
        built
        for action, request_id, built, _ in frames_at_commit
        if (action, request_id) == ("request.opened", "r-form")
    )
    assert (opened["run"]["status"], opened["run"]["started_by"], opened["request"]["form"] is not None) == (
        "waiting",
        "alice",
        True,
    )


def test_a_runs_start_and_finish_frames_built_from_its_row_are_the_frames_read_back(alice, frames_at_commit):
    from approvals.runs import services as runs

    run = runs.create_run(tool="deploy", args={"service": "api"}, timeout=60, user=alice, owner=runner.PROCESS_ID)
    runs.create_run(tool="", agent_prompt="tidy up", agent_model="scripted", timeout=None, user=None, owner="elsewhere")
    assert runs.finish_run(run.pk, RunStatus.SUCCEEDED, "deployed", False)

    assert [(action, request_id) for action, request_id, _, _ in frames_at_commit] == [
        ("run.started", None),
        ("run.started", None),
        ("run.finished", None),
    ]
    for action, _, built, read_back in frames_at_commit:
        assert as_sent(built) == as_sent(read_back), action
    started, _, finished = (built for _, _, built, _ in frames_at_commit)
    assert (started["run"]["started_by"], started["run"]["timeout"], started["run"]["status"]) == (
        "alice",
        60.0,
        "running",
    )
    assert (finished["run"]["status"], finished["run"]["result"]["output"]) == ("succeeded", "deployed")


# -- who may cancel a run ----------------------------------------------------------------------------


def cancel_refusals(run_id):
    return list(
        AuditEvent.objects.filter(run_id=run_id, action="run.cancel_refused")
        .order_by("id")
        .values_list("actor", "payload")
    )


async def browser_session(user):
    """A logged-in client that must send the CSRF token, as a browser does; returns (client, CSRF header)."""
    client = AsyncClient(enforce_csrf_checks=True)
    await client.aforce_login(user)
    page = await client.get("/")  # the dashboard sets the CSRF cookie
    return client, {"X-CSRFToken": page.cookies["csrftoken"].value}


async def test_a_reviewer_the_policy_refuses_may_not_cancel_another_users_run(
    make_user, console_events, stop_leftover_runs
):
    alice, bob = [await sync_to_async(make_user)(name) for name in ("alice", "bob")]
    await sync_to_async(finance_policy)()
    run = await runner.start_run(tool="refund", args={"amount": 5}, user=alice)
    opened = await console_events.next("request.opened", run_id=run.pk)

    client, csrf = await browser_session(bob)
    response = await client.post(f"/api/v1/runs/{run.pk}/cancel", headers=csrf)
    assert response.status_code == 403
    assert response.json() == {
        "error": "forbidden",
        "message": (
            f"You may not cancel run {run.pk}: it waits on a request you may not answer. {FINANCE_ONLY} "
            "Its starter (alice), staff or whoever may answer that request can cancel the run."
        ),
    }
    refused = await console_events.next("run.cancel_refused", run_id=run.pk)
    assert (refused["actor"], refused["payload"]["rule"]) == ("bob", "not_allowed")
    row = await Run.objects.aget(pk=run.pk)
    assert (row.status, row.cancel_requested) == (RunStatus.WAITING, False)
    assert (await Request.objects.aget(pk=opened["request_id"])).status == RequestStatus.OPEN

    # The starter may: the run ends cancelled and its request is withdrawn.
    client, csrf = await browser_session(alice)
    assert (await client.post(f"/api/v1/runs/{run.pk}/cancel", headers=csrf)).status_code == 202
    await runner.wait_for_run(run.pk)
    assert (await Run.objects.aget(pk=run.pk)).status == RunStatus.CANCELLED
    assert (await Request.objects.aget(pk=opened["request_id"])).status == RequestStatus.CANCELLED


@pytest.mark.parametrize("who", ["the starter", "staff", "whoever may answer its request"])
async def test_who_may_cancel_a_run(make_user, who):
    alice = await sync_to_async(make_user)("alice")
    canceller = {
        "the starter": lambda: alice,
        "staff": lambda: make_user("dana", is_staff=True),
        "whoever may answer its request": lambda: make_user("carol"),
    }[who]
    canceller = await sync_to_async(canceller)()
    if who == "whoever may answer its request":
        await sync_to_async(put_in_group)(canceller, "finance")
    await sync_to_async(finance_policy)()
    request = await async_waiting_request("cancel-ok", starter=alice)
    client, csrf = await browser_session(canceller)
    response = await client.post(f"/api/v1/runs/{request.run_id}/cancel", headers=csrf)
    assert response.status_code == 202, response.json()
    row = await Run.objects.select_related("cancel_requested_by").aget(pk=request.run_id)
    assert row.cancel_requested and row.cancel_requested_by == canceller
    assert await sync_to_async(cancel_refusals)(request.run_id) == []


def test_a_run_not_waiting_on_anyone_is_cancelled_only_by_its_starter_or_staff(alice, bob, carol):
    run = runs.create_run(tool="crunch", args={}, timeout=None, user=alice, owner=runner.PROCESS_ID)
    with pytest.raises(decisions.DecisionError) as refused:
        runs.request_cancel_run(run.pk, user=carol)
    assert (refused.value.code, refused.value.message) == (
        "forbidden",
        (
            f"You may not cancel run {run.pk}: only its starter (alice) or staff may cancel it while it waits on no request."
        ),
    )
    assert cancel_refusals(run.pk) == [
        ("carol", {"rule": "not_starter", "reason": refused.value.message, "by_token": False})
    ]
    assert not Run.objects.get(pk=run.pk).cancel_requested
    assert runs.request_cancel_run(run.pk, user=alice).cancel_requested


def test_the_console_itself_may_cancel_any_run(alice):
    run = runs.create_run(tool="crunch", args={}, timeout=None, user=alice, owner=runner.PROCESS_ID)
    assert runs.request_cancel_run(run.pk).cancel_requested  # no user: a stopping console, a test, a script
    assert cancel_refusals(run.pk) == []


async def test_the_socket_refuses_a_cancel_frame_from_who_may_not_cancel(make_user):
    alice, bob = [await sync_to_async(make_user)(name) for name in ("alice", "bob")]
    await sync_to_async(finance_policy)()
    request = await async_waiting_request("ws-cancel", starter=alice)
    async with dashboard_for(bob) as dashboard:
        await dashboard.send({"type": "cancel_run", "run": request.run_id, "ref": "c9"})
        error = await dashboard.next("error")
        assert (error["ref"], error["error"]) == ("c9", "forbidden")
        assert FINANCE_ONLY in error["message"]
        refused = await dashboard.next("event", action="run.cancel_refused")
        assert refused["actor"] == "bob" and refused["run"]["cancel_requested"] is False
    assert not (await Run.objects.aget(pk=request.run_id)).cancel_requested


async def test_each_dashboard_is_told_whether_its_viewer_may_cancel_each_run(make_user):
    alice, bob, carol = [await sync_to_async(make_user)(name) for name in ("alice", "bob", "carol")]
    dana = await sync_to_async(make_user)("dana", is_staff=True)
    await sync_to_async(put_in_group)(carol, "finance")
    await sync_to_async(finance_policy)()
    request = await async_waiting_request("bits-cancel", starter=alice)
    seen = {}
    for user in (alice, bob, carol, dana):
        async with dashboard_for(user) as dashboard:
            [run] = dashboard.snapshot["runs"]
            seen[user.username] = (run["cancel"]["may_cancel"], run["cancel"]["why_not"])
    assert seen["alice"] == seen["carol"] == seen["dana"] == (True, None)
    assert seen["bob"][0] is False and FINANCE_ONLY in seen["bob"][1]

    # The same verdict the server gives: bob's cancel is refused with the reason his dashboard was told.
    with pytest.raises(decisions.DecisionError) as refused:
        await runs.arequest_cancel_run(request.run_id, user=bob)
    assert refused.value.message == seen["bob"][1]


async def test_the_run_api_tells_each_caller_whether_they_may_cancel(make_user):
    """The run page reads runs past the snapshot's first page from here: the verdict must be the caller's."""
    alice, bob = [await sync_to_async(make_user)(name) for name in ("alice", "bob")]
    await sync_to_async(finance_policy)()
    request = await async_waiting_request("api-bits-cancel", starter=alice)
    seen = {}
    for user in (alice, bob):
        client = AsyncClient()
        await client.aforce_login(user)
        response = await client.get(f"/api/v1/runs/{request.run_id}")
        assert response.status_code == 200
        seen[user.username] = response.json()["cancel"]
    assert (seen["alice"]["may_cancel"], seen["alice"]["why_not"]) == (True, None)
    assert seen["bob"]["may_cancel"] is False and FINANCE_ONLY in seen["bob"]["why_not"]


def test_a_settings_policy_that_does_not_parse_fails_the_start_up_checks(settings):
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "POLICIES": [{"tool": "refund*", "starter_may_answer": None}]}
    [error] = checks.policy_settings(None)
    assert error.id == "approvals.E001" and "must be true or false" in error.msg


def test_an_approvals_policy_silent_on_four_eyes_is_named_at_start_up(settings):
    settings.TOOLNEXUS = {
        **settings.TOOLNEXUS,
        "POLICIES": [
            {"name": "refunds", "tool": "refund*"},
            {"name": "inputs", "kind": "input"},
            {"name": "payouts", "tool": "payout*", "starter_may_answer": False},
        ],
    }
    [warning] = checks.policy_settings(None)
    assert warning.id == "approvals.W001" and 'Policy "refunds"' in warning.msg
