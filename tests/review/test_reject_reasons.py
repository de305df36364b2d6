"""Reasons a decline carries, and the two answers that are declines too (issue 36, parts 1, 2 and 5).

A decline may name one reject option (its policy's first, then the request's ``data.reject_options``) and carry a
comment; "respond" and "request changes" are refusals (ok false, reason declined) with a message. Everything goes
through the one door (``decisions.resolve_request``); a plain decline's Answer is exactly what it always was.
"""

import pytest
import toolnexus
from django.core.exceptions import ImproperlyConfigured, ValidationError
from toolnexus import Answer

from approvals.audit.pages import event_row
from approvals.models import AuditEvent, Policy, Request, RequestStatus
from approvals.review import decisions, intake, outcomes
from approvals.shapes import request_view
from approvals.team import policies
from tests.support.signatures import verified

pytestmark = pytest.mark.django_db

TOO_LARGE = {"key": "too_large", "label": "Too large", "text": "Refunds above 100 EUR need a manager."}
WRONG_ORDER = {"key": "wrong_order", "label": "Wrong order", "text": "Look the order up again first."}
POLICY_OPTIONS = [
    {"key": "too_large", "label": "Over the limit", "text": "The policy's own words."},
    {"key": "duplicate", "label": "Duplicate", "text": "It was refunded already."},
]


def open_refund(request_id="r-1", *, data=None):
    wire = toolnexus.Request(
        id=request_id, kind="approval", prompt="Refund 500 EUR?", data=data if data is not None else {}
    )
    return decisions.open_request(wire, tool="refund", args={"amount": 500})


def the_event(request_id, action=AuditEvent.Action.REQUEST_DECLINED):
    return AuditEvent.objects.get(request_id=request_id, action=action)


@pytest.fixture
def bob(make_user):
    return make_user("bob", password=None)


@pytest.fixture
def refund_policy():
    return Policy.objects.create(name="refunds", tool_pattern="refund", reject_options=POLICY_OPTIONS)


# -- a plain decline is as it was ---------------------------------------------------------------


def test_a_plain_declines_answer_data_is_exactly_todays(bob):
    open_refund("r-plain")
    open_refund("r-comment")

    assert decisions.resolve_request("r-plain", ok=False, user=bob) == Answer("r-plain", False, None, "declined")
    assert decisions.resolve_request("r-comment", ok=False, comment="too much", user=bob) == Answer(
        "r-comment", False, {"comment": "too much"}, "declined"
    )
    view = request_view(Request.objects.get(pk="r-comment"))
    assert verified(view["answer"]) == {
        "id": "r-comment",
        "ok": False,
        "data": {"comment": "too much"},
        "reason": "declined",
    }
    assert (view["decision"]["response"], view["decision"]["message"], view["decision"]["option"]) == (None,) * 3
    assert view["decision"]["text"] == "Declined by bob: too much"


# -- reject options ---------------------------------------------------------------------------------


def test_a_decline_names_an_option_and_carries_a_comment(bob, refund_policy):
    open_refund(data={"reject_options": [TOO_LARGE, WRONG_ORDER]})

    answer = decisions.resolve_request("r-1", ok=False, option="too_large", comment="split it in two", user=bob)

    # The policy's option wins over the request's of the same key (the admin's words), and is stored whole.
    assert answer == Answer("r-1", False, {"comment": "split it in two", "option": POLICY_OPTIONS[0]}, "declined")
    stored = Request.objects.get(pk="r-1")
    assert (stored.status, stored.answer_data) == (RequestStatus.DECLINED, answer.data)
    decision = request_view(stored)["decision"]
    assert decision["option"] == POLICY_OPTIONS[0]
    assert decision["text"] == "Declined by bob (Over the limit): split it in two"
    payload = the_event("r-1").payload
    assert payload["option"] == POLICY_OPTIONS[0] and "response" not in payload and "message" not in payload


def test_a_requests_own_option_may_be_picked(bob, refund_policy):
    open_refund(data={"reject_options": [TOO_LARGE, WRONG_ORDER]})
    answer = decisions.resolve_request("r-1", ok=False, option="wrong_order", user=bob)
    assert answer.data == {"option": WRONG_ORDER}


def test_the_offered_options_are_the_policys_then_the_requests_unused_keys(refund_policy):
    """The admin's words win: the request's ``too_large`` is dropped (not refused) for the policy's."""
    request = open_refund(data={"reject_options": [TOO_LARGE, WRONG_ORDER]})

    offered = request_view(Request.objects.get(pk=request.pk))["policy"]["reject_options"]

    assert offered == [*POLICY_OPTIONS, WRONG_ORDER]


def test_a_policys_option_may_be_picked(bob, refund_policy):
    open_refund()
    answer = decisions.resolve_request("r-1", ok=False, option="duplicate", user=bob)
    assert answer.data == {"option": POLICY_OPTIONS[1]}


def test_an_unknown_option_is_refused_and_nothing_changes(bob, refund_policy):
    open_refund()

    with pytest.raises(decisions.DecisionError) as refused:
        decisions.resolve_request("r-1", ok=False, option="no_such", user=bob)

    assert refused.value.code == "invalid" and refused.value.http_status == 400
    assert refused.value.field_errors == {
        "option": ["There is no reject option 'no_such' for this request; the options are too_large, duplicate."]
    }
    assert Request.objects.get(pk="r-1").status == RequestStatus.OPEN
    assert not AuditEvent.objects.filter(request_id="r-1", action=AuditEvent.Action.REQUEST_DECLINED).exists()


def test_an_option_on_an_approval_is_refused(bob, refund_policy):
    open_refund()
    with pytest.raises(decisions.DecisionError) as refused:
        decisions.resolve_request("r-1", ok=True, option="too_large", user=bob)
    assert list(refused.value.field_errors) == ["response"]
    assert Request.objects.get(pk="r-1").status == RequestStatus.OPEN


# -- respond and request changes --------------------------------------------------------------------


def test_respond_is_a_decline_with_the_reviewers_reply(bob):
    open_refund()

    answer = decisions.resolve_request(
        "r-1", ok=False, response="respond", message="  Refund 50 EUR instead; the rest is a voucher. ", user=bob
    )

    said = {"response": "respond", "message": "Refund 50 EUR instead; the rest is a voucher."}
    assert answer == Answer("r-1", False, said, "declined")
    decision = request_view(Request.objects.get(pk="r-1"))["decision"]
    assert (decision["outcome"], decision["response"], decision["message"]) == ("declined", "respond", said["message"])
    assert decision["text"] == "Responded by bob: Refund 50 EUR instead; the rest is a voucher."
    payload = the_event("r-1").payload
    assert (payload["response"], payload["message"], payload["data"]) == ("respond", said["message"], said)


def test_request_changes_is_a_decline_with_instructions_and_an_option(bob, refund_policy):
    open_refund()

    answer = decisions.resolve_request(
        "r-1", ok=False, response="request_changes", message="Use 100 EUR at most.", option="too_large", user=bob
    )

    assert answer.reason == "declined" and answer.ok is False
    assert answer.data == {
        "response": "request_changes",
        "message": "Use 100 EUR at most.",
        "option": POLICY_OPTIONS[0],
    }
    assert Request.objects.get(pk="r-1").answer_data == answer.data
    text = request_view(Request.objects.get(pk="r-1"))["decision"]["text"]
    assert text == "Changes requested by bob (Over the limit): Use 100 EUR at most."
    assert the_event("r-1").payload["response"] == "request_changes"


@pytest.mark.parametrize(
    ("said", "field", "words"),
    [
        ({"response": "respond"}, "message", "Write a message: the reply the model reads."),
        (
            {"response": "request_changes", "message": "   "},
            "message",
            "Write a message: the changes the model should make.",
        ),
        ({"response": "respond", "message": "x" * 4001}, "message", "at most 4000"),
        ({"response": "approve", "message": "yes"}, "response", "response must be one of respond, request_changes"),
        ({"message": "no"}, "message", "a decline's own words are its comment"),
        ({"response": "respond", "message": "here", "option": "too_large"}, "option", "not a reply"),
        ({"response": "respond", "message": "here", "reason": "cancelled"}, "reason", 'reason "declined"'),
        ({"response": 3, "message": "here"}, "response", "must be a string"),
    ],
)
def test_a_response_without_what_it_needs_is_refused(bob, refund_policy, said, field, words):
    open_refund()
    with pytest.raises(decisions.DecisionError) as refused:
        decisions.resolve_request("r-1", ok=False, user=bob, **said)
    assert refused.value.code == "invalid"
    assert words in refused.value.field_errors[field][0]
    assert Request.objects.get(pk="r-1").status == RequestStatus.OPEN


# -- a stale answer (mastra#19633) -----------------------------------------------------------------------


@pytest.mark.parametrize("first", ["answered", "withdrawn"])
def test_answering_a_request_already_resolved_is_a_conflict_that_changes_nothing(bob, make_user, first):
    host = make_user("host", password=None)
    wire = toolnexus.Request(id="r-1", kind="approval", prompt="Refund 500 EUR?")
    decisions.open_host_request(wire, user=host, tool="refund")
    if first == "answered":
        decisions.resolve_request("r-1", ok=True, user=bob)
    else:
        decisions.withdraw_host_request("r-1", user=host)
    before = Request.objects.get(pk="r-1")
    events = AuditEvent.objects.count()

    with pytest.raises(decisions.DecisionError) as refused:
        decisions.resolve_request("r-1", ok=False, response="respond", message="do this instead", user=bob)

    assert refused.value.http_status == 409
    after = Request.objects.get(pk="r-1")
    assert (after.status, after.answer_ok, after.answer_data, after.answer_reason) == (
        before.status,
        before.answer_ok,
        before.answer_data,
        before.answer_reason,
    )
    assert AuditEvent.objects.count() == events


# -- where options come from, checked -----------------------------------------------------------------


def test_a_policy_with_bad_options_does_not_validate():
    policy = Policy(name="p", reject_options=[{"key": "Too Large", "label": "x", "text": ""}])
    with pytest.raises(ValidationError) as refused:
        policy.full_clean()
    assert "reject_options[0].key must be 1-40 characters" in str(refused.value.message_dict["reject_options"])
    Policy(name="q", reject_options=[TOO_LARGE]).full_clean()


def test_settings_policies_take_reject_options_and_refuse_bad_ones(settings):
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "POLICIES": [{"tool": "refund", "reject_options": [TOO_LARGE]}]}
    assert policies.settings_rules()[0].reject_options == (TOO_LARGE,)

    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "POLICIES": [{"tool": "refund", "reject_options": [TOO_LARGE] * 2}]}
    with pytest.raises(ImproperlyConfigured, match="is used twice"):
        policies.settings_rules()


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ("too_large", "data.reject_options must be a list"),
        ([{"key": "a", "label": ""}], "data.reject_options[0].label must be text a reviewer reads"),
        ([{"key": "a", "label": "A", "text": "t" * 501}], "at most 500 characters"),
        ([{"key": "a", "label": "A", "colour": "red"}], "the keys key, label and text, and no others"),
    ],
)
def test_a_request_with_bad_reject_options_is_refused_when_opened(make_user, options, words):
    body = {"id": "r-bad", "kind": "approval", "prompt": "Refund?", "data": {"reject_options": options}}
    with pytest.raises(intake.IntakeError, match=words.replace("[", r"\[").replace("]", r"\]")):
        intake.host_request(body)
    with pytest.raises(decisions.DecisionError) as refused:
        open_refund("r-bad", data={"reject_options": options})
    assert refused.value.code == "invalid" and words in refused.value.message
    assert not Request.objects.filter(pk="r-bad").exists()


# -- the audit trail names them ---------------------------------------------------------------------------


def test_the_audit_timeline_and_its_decision_name_the_reason_the_reply_and_the_changes(bob, refund_policy):
    for request_id in ("r-option", "r-reply", "r-changes"):
        open_refund(request_id)
    decisions.resolve_request("r-option", ok=False, option="duplicate", user=bob)
    decisions.resolve_request("r-reply", ok=False, response="respond", message="Use a voucher.", user=bob)
    decisions.resolve_request("r-changes", ok=False, response="request_changes", message="At most 100.", user=bob)

    events = {request_id: the_event(request_id) for request_id in ("r-option", "r-reply", "r-changes")}
    words = {key: outcomes.event_words(e.action, e.actor, e.payload, e.kind) for key, e in events.items()}
    assert words == {
        "r-option": "Declined by bob (Duplicate)",
        "r-reply": "Responded by bob instead of running the tool",
        "r-changes": "Changes requested by bob",
    }
    texts = {key: event_row(e)["decision"]["text"] for key, e in events.items()}
    assert texts == {
        "r-option": "Declined by bob (Duplicate)",
        "r-reply": "Responded by bob: Use a voucher.",
        "r-changes": "Changes requested by bob: At most 100.",
    }
