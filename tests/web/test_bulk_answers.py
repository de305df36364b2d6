"""POST /api/v1/requests/bulk: many answers in one call, each through the one door with its own audit event.

A dry run answers nothing and says what would happen; the real call answers what it may,
skips (with the reason) what the reviewer may not answer or what needs more than a yes, and
lists what had already closed.
"""

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from approvals.models import AuditEvent, Policy, Request, RequestStatus
from approvals.review import decisions
from tests.support.dashboard import put_in_group, waiting_request
from tests.support.long_queue import open_requests_in_bulk

pytestmark = pytest.mark.django_db(transaction=True)

ENV_SCHEMA = {"type": "object", "properties": {"env": {"type": "string"}}, "required": ["env"]}
RESOLVING = ("request.answered", "request.declined", "request.cancelled", "request.expired")


def bulk(user, body, client=None):
    client = client or Client()
    if user is not None:
        client.force_login(user)
    response = client.post("/api/v1/requests/bulk", data=json.dumps(body), content_type="application/json")
    return response.status_code, response.json()


def statuses(*ids):
    return dict(Request.objects.filter(pk__in=ids).values_list("pk", "status"))


def resolving_events():
    return list(
        AuditEvent.objects.filter(action__in=RESOLVING).order_by("id").values_list("request_id", "action", "actor")
    )


@pytest.fixture
def refunds(bob):
    """Three refunds bob's runs wait on, and a deploy that asks for an environment."""
    for n in (1, 2, 3):
        waiting_request(f"refund-{n}", starter=bob, args={"order": f"A-{n}", "amount": 10 * n})
    waiting_request("deploy", starter=bob, tool="deploy", kind="input", data={"schema": ENV_SCHEMA})
    return ["refund-1", "refund-2", "refund-3"]


def test_a_bulk_decline_by_ids_declines_each_with_its_own_audit_event(alice, refunds):
    status, body = bulk(alice, {"ok": False, "comment": "duplicates", "ids": refunds})
    assert status == 200, body
    assert body == {
        "dry_run": False,
        "matched": 3,
        "tools": {"refund": 3},
        "answered": refunds,
        "recorded": [],
        "skipped": [],
        "closed": [],
    }
    assert statuses(*refunds) == dict.fromkeys(refunds, RequestStatus.DECLINED)
    assert resolving_events() == [(pk, "request.declined", "alice") for pk in refunds]
    for pk in refunds:
        row = Request.objects.select_related("answered_by").get(pk=pk)
        assert (row.comment, row.answered_by.username, row.answer_reason) == ("duplicates", "alice", "declined")


def test_a_bulk_approval_by_filter_skips_what_needs_its_own_answer(alice, refunds):
    status, body = bulk(alice, {"ok": True, "filter": {"starter": "bob"}})
    assert status == 200, body
    assert body["answered"] == refunds
    assert body["tools"] == {"refund": 3}
    assert body["skipped"] == [
        {
            "id": "deploy",
            "reason": "A bulk yes approves only approval requests; this input request needs its own answer: "
            "open it and fill in its form.",
        }
    ]
    assert statuses("deploy", *refunds) == {"deploy": "open", **dict.fromkeys(refunds, RequestStatus.ANSWERED)}
    assert [event[0] for event in resolving_events()] == refunds


def test_a_bulk_approval_approves_each_as_it_asked_never_with_edited_args(alice, bob):
    editable = {"editable": ["amount"]}
    waiting_request("edit-me", starter=bob, data=editable, args={"order": "A-9", "amount": 49.9})
    status, body = bulk(alice, {"ok": True, "comment": "fine", "ids": ["edit-me"]})
    assert status == 200 and body["answered"] == ["edit-me"], body
    row = Request.objects.get(pk="edit-me")
    assert row.answer_data == {"comment": "fine"}  # no "args": the tool runs with its own


def test_requests_the_reviewer_may_not_answer_are_skipped_with_the_reason_and_left_alone(alice, bob, make_user):
    carol = make_user("carol")
    put_in_group(carol, "finance")
    policy = Policy.objects.create(name="refunds", tool_pattern="refund")
    policy.allowed_groups.add(put_in_group(carol, "finance"))
    waiting_request("own", starter=alice, tool="deploy", kind="approval")
    Policy.objects.create(name="four-eyes", tool_pattern="deploy", starter_may_answer=False)
    waiting_request("refund-1", starter=bob)

    status, body = bulk(alice, {"ok": True, "ids": ["refund-1", "own"]})
    assert status == 200
    assert [item["id"] for item in body["skipped"]] == ["refund-1", "own"]
    assert body["skipped"][0]["reason"].startswith('Only members of group finance may answer this (policy "refunds").')
    assert body["skipped"][1]["reason"].startswith('You started this run, and policy "four-eyes" is four-eyes')
    assert body["answered"] == []
    assert statuses("refund-1", "own") == {"refund-1": "open", "own": "open"}
    assert resolving_events() == []
    # Declining her own run's request is hers to do, four-eyes or not.
    status, body = bulk(alice, {"ok": False, "ids": ["refund-1", "own"]})
    assert (body["answered"], [item["id"] for item in body["skipped"]]) == (["own"], ["refund-1"])


def test_closed_and_unknown_requests_are_listed_apart(alice, bob, refunds):
    decisions.resolve_request("refund-1", ok=False, user=bob)
    Request.objects.filter(pk="refund-2").update(expires_at=timezone.now() - timedelta(seconds=1))
    status, body = bulk(alice, {"ok": True, "ids": ["refund-1", "refund-2", "refund-3", "nope"]})
    assert status == 200
    assert body["closed"] == ["refund-1", "refund-2"]
    assert body["answered"] == ["refund-3"]
    assert body["skipped"] == [{"id": "nope", "reason": "There is no request with id 'nope'."}]
    assert body["matched"] == 4
    # The one past its deadline was expired on the way, by the console, as the timer would have.
    assert statuses("refund-2") == {"refund-2": RequestStatus.EXPIRED}
    assert ("refund-2", "request.expired", "system") in resolving_events()


def test_a_dry_run_changes_nothing_and_says_what_the_call_would_do(alice, bob, refunds):
    decisions.resolve_request("refund-1", ok=False, user=bob)
    before = AuditEvent.objects.count()
    ask = {"ok": True, "comment": "go", "filter": {"status": "all", "starter": "bob"}}

    status, plan = bulk(alice, {**ask, "dry_run": True})
    assert status == 200
    assert plan["dry_run"] is True
    assert (plan["answered"], plan["closed"], [s["id"] for s in plan["skipped"]]) == (
        ["refund-2", "refund-3"],
        ["refund-1"],
        ["deploy"],
    )
    assert AuditEvent.objects.count() == before
    assert statuses("refund-2", "refund-3", "deploy") == dict.fromkeys(["refund-2", "refund-3", "deploy"], "open")

    status, done = bulk(alice, ask)
    assert {**done, "dry_run": True} == plan


def test_an_approval_under_a_quorum_is_recorded_and_the_request_stays_open(alice, bob, refunds):
    Policy.objects.create(name="two", tool_pattern="refund", quorum=2)
    status, plan = bulk(alice, {"ok": True, "ids": ["refund-1"], "dry_run": True})
    assert (plan["answered"], plan["recorded"]) == ([], ["refund-1"])
    status, body = bulk(alice, {"ok": True, "ids": ["refund-1"]})
    assert (body["answered"], body["recorded"]) == ([], ["refund-1"])
    assert statuses("refund-1") == {"refund-1": "open"}
    assert AuditEvent.objects.filter(request_id="refund-1", action="request.approval_recorded").count() == 1


def test_a_filter_matching_more_than_500_is_refused_naming_how_many(alice):
    open_requests_in_bulk(501)
    status, body = bulk(alice, {"ok": False, "filter": {"tool": "refund"}})
    assert status == 400
    assert body == {
        "error": "bad_request",
        "field": "filter",
        "message": "The filter matches 501 requests; a bulk answer takes at most 500. "
        "Narrow it (a kind, a tool, a search) and answer them in parts.",
    }
    assert resolving_events() == []


@pytest.mark.parametrize(
    "body, field, words",
    [
        ({"ids": ["a"]}, "ok", "'ok' is required: true to approve every request, false to decline them."),
        ({"ok": True}, "ids", "Name the requests by 'ids' (a list), by 'filter' (inbox filters), or by both"),
        ({"ok": True, "ids": [], "filter": {}}, "ids", "'ids' must be a list of request ids (text), at least one."),
        ({"ok": True, "ids": []}, "ids", "'ids' must be a list of request ids (text), at least one."),
        ({"ok": True, "ids": [f"r{n}" for n in range(501)]}, "ids", "At most 500 requests at once; 'ids' lists 501."),
        ({"ok": True, "ids": ["a"], "data": {"args": {}}}, "data", "A bulk answer sends no data"),
        ({"ok": True, "ids": ["a"], "dry_run": "yes"}, "dry_run", "'dry_run' is true"),
        ({"ok": True, "ids": ["a"], "comment": 5}, "comment", "'comment' must be text."),
        ({"ok": True, "filter": "tool=refund"}, "filter", "'filter' must be an object of inbox filters"),
        ({"ok": True, "filter": {"tools": "refund"}}, "filter.tools", "A bulk filter takes only q, status, kind"),
        ({"ok": True, "filter": {"sort": "best"}}, "filter.sort", "Unknown 'filter.sort' 'best'"),
        ({"ok": True, "filter": {"q": None}}, "filter.q", "'filter.q' must be text; got null."),
        ({"ok": True, "filter": {"limit": 5}}, "filter.limit", "A bulk filter takes only"),
        ({"ok": True, "filter": {"policy": "nope"}}, "policy", "There is no policy named 'nope'"),
    ],
)
def test_a_bulk_answer_it_cannot_take_is_a_400_naming_the_field(alice, body, field, words):
    status, answer = bulk(alice, body)
    assert status == 400, answer
    assert answer["error"] == "bad_request" and answer["field"] == field
    assert words in answer["message"]


def test_a_misspelt_filter_name_is_refused_and_answers_nothing(alice, refunds):
    # Before: the unknown "tools" was ignored, the filter matched every open request and all were declined.
    status, body = bulk(alice, {"ok": False, "filter": {"tools": "refund"}})
    assert (status, body["field"]) == (400, "filter.tools")
    assert statuses("deploy", *refunds) == dict.fromkeys(["deploy", *refunds], "open")
    assert resolving_events() == []


def test_a_bulk_filter_takes_flags_as_true_or_false_and_kinds_as_a_list(alice, refunds):
    status, body = bulk(alice, {"ok": False, "dry_run": True, "filter": {"kind": ["input"], "may_answer": True}})
    assert status == 200 and body["answered"] == ["deploy"]


def test_bulk_answers_need_a_login_and_the_csrf_token(alice, refunds):
    status, body = bulk(None, {"ok": False, "ids": refunds})
    assert (status, body["error"]) == (401, "unauthenticated")
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    response = strict.post(
        "/api/v1/requests/bulk", data=json.dumps({"ok": False, "ids": refunds}), content_type="application/json"
    )
    assert response.status_code == 403
    assert statuses(*refunds) == dict.fromkeys(refunds, "open")


def test_the_real_call_with_the_dry_runs_ids_answers_only_what_the_dry_run_named(alice, bob):
    waiting_request("a1", starter=bob, prompt="Refund order A-1?")
    waiting_request("a2", starter=bob, prompt="Refund order A-2?")
    waiting_request("deploy", starter=bob, tool="deploy", prompt="Ship it?")
    ask = {"ok": True, "filter": {"status": "open", "q": "refund"}}
    status, plan = bulk(alice, {**ask, "dry_run": True})
    assert (status, plan["answered"]) == (200, ["a1", "a2"]), plan
    # While the confirmation is open: another matching request arrives, and a2 is answered elsewhere.
    waiting_request("late", starter=bob, tool="refund_all", prompt="Refund every order?")
    decisions.resolve_request("a2", ok=False, user=bob)

    status, done = bulk(alice, {**ask, "ids": plan["answered"] + plan["recorded"]})
    assert status == 200, done
    assert (done["answered"], done["closed"], done["tools"]) == (["a1"], ["a2"], {"refund": 1})
    assert statuses("a1", "late") == {"a1": RequestStatus.ANSWERED, "late": "open"}
    # The ids narrow the filter, never widen it: a request it does not match is left alone.
    status, done = bulk(alice, {**ask, "ids": ["late", "deploy"]})
    assert (done["answered"], done["skipped"]) == (
        ["late"],
        [{"id": "deploy", "reason": "It does not match the filter any more; it was left as it is."}],
    )
    assert statuses("deploy") == {"deploy": "open"}


def test_a_plain_filter_call_answers_what_matches_at_the_time_of_the_call(alice, bob):
    waiting_request("a1", starter=bob, prompt="Refund order A-1?")
    ask = {"ok": False, "filter": {"q": "refund"}}
    assert bulk(alice, {**ask, "dry_run": True})[1]["answered"] == ["a1"]
    waiting_request("late", starter=bob, tool="refund_all", prompt="Refund every order?")
    assert bulk(alice, ask)[1]["answered"] == ["a1", "late"]


OPTIONAL_NOTE = {"schema": {"type": "object", "properties": {"note": {"type": "string"}}}}
NEEDS_ITS_OWN = {
    "form": "A bulk yes approves only approval requests; this input request needs its own answer: "
    "open it and fill in its form.",
    "sign-in": "A bulk yes approves only approval requests; this authorization request needs its own answer: "
    "open it and sign in at its link, then mark it done.",
    "confirm": "A bulk yes approves only approval requests; this confirmation request needs its own answer: "
    "open it and answer it there.",
}


def test_a_bulk_yes_answers_only_approvals_and_skips_every_other_kind_saying_why(alice, bob):
    waiting_request("form", starter=bob, tool="note", kind="input", data=OPTIONAL_NOTE)
    waiting_request("sign-in", starter=bob, tool="github", kind="authorization")
    waiting_request("confirm", starter=bob, tool="logs", kind="confirmation", data={"action": "rotate"})
    waiting_request("refund", starter=bob)
    ask = {"ok": True, "ids": ["form", "sign-in", "confirm", "refund"]}
    skipped = [{"id": pk, "reason": reason} for pk, reason in NEEDS_ITS_OWN.items()]

    status, plan = bulk(alice, {**ask, "dry_run": True})
    assert (plan["answered"], plan["skipped"], plan["tools"]) == (["refund"], skipped, {"refund": 1})
    status, done = bulk(alice, ask)
    assert {**done, "dry_run": True} == plan
    assert statuses(*NEEDS_ITS_OWN) == dict.fromkeys(NEEDS_ITS_OWN, "open")
    assert resolving_events() == [("refund", "request.answered", "alice")]
    # A bulk no declines any kind.
    status, done = bulk(alice, {"ok": False, "ids": list(NEEDS_ITS_OWN)})
    assert (done["answered"], done["skipped"]) == (list(NEEDS_ITS_OWN), [])


def test_tools_count_only_what_will_be_answered(alice, bob):
    Policy.objects.create(name="four-eyes", tool_pattern="refund", starter_may_answer=False)
    waiting_request("bobs", starter=bob)
    waiting_request("alices", starter=alice)
    ask = {"ok": True, "ids": ["bobs", "alices"]}
    status, plan = bulk(alice, {**ask, "dry_run": True})
    assert (plan["matched"], plan["tools"], [s["id"] for s in plan["skipped"]]) == (2, {"refund": 1}, ["alices"])
    status, done = bulk(alice, ask)
    assert {**done, "dry_run": True} == plan


@pytest.mark.parametrize("quorum", [2, 3])  # alice's approval would complete it, or only be recorded
def test_under_a_quorum_the_dry_run_skips_what_differs_from_the_first_approval(alice, bob, make_user, quorum):
    Policy.objects.create(name="many", tool_pattern="refund", quorum=quorum)
    waiting_request("edited", starter=bob, data={"editable": ["amount"]}, args={"order": "A-1", "amount": 40})
    decisions.resolve_request("edited", ok=True, data={"args": {"amount": 5}}, user=make_user("carol"))
    ask = {"ok": True, "ids": ["edited"]}
    status, plan = bulk(alice, {**ask, "dry_run": True})
    assert (plan["answered"], plan["recorded"], plan["tools"]) == ([], [], {}), plan
    assert plan["skipped"] == [
        {
            "id": "edited",
            "reason": "carol approved different values ({'args': {'amount': 5}}); approve the same values, or decline.",
        }
    ]
    status, done = bulk(alice, ask)
    assert {**done, "dry_run": True} == plan
    assert statuses("edited") == {"edited": "open"}
