"""An approval's edits are on the record: "Approved by demo with amount 33 → 4" in words, and
``decision.changes`` ([{field, from, to}], the raw values) in every request view. Made by the one door,
read back from the database; the wire Answer is unchanged.
"""

import pytest
from toolnexus import Request as WireRequest

from approvals import demo_tools, frames
from approvals.models import Policy, Request, Run, RunStatus
from approvals.review import answers, decisions, outcomes
from approvals.runs import runner
from tests.support.signatures import verified

pytestmark = pytest.mark.django_db(transaction=True)

REFUND_ARGS = {"order": "A-7", "amount": 33, "currency": "EUR"}


def refund_request(request_id, *, starter, args=REFUND_ARGS, editable=("amount", "currency"), kind="approval"):
    """An open refund approval whose amount and currency a reviewer may change (the demo tool's own schema)."""
    run = Run.objects.create(tool="refund", status=RunStatus.RUNNING, started_by=starter, owner=runner.PROCESS_ID)
    wire = WireRequest(
        id=request_id, kind=kind, prompt="Refund 33 EUR on order A-7?", data={**args, "editable": list(editable)}
    )
    return decisions.open_request(
        wire, run_id=run.pk, tool="refund", args=dict(args), tool_input_schema=demo_tools.refund.input_schema
    )


def decision_of(request_id):
    return frames.request_detail(request_id)["decision"]


def change(field, before, after):
    return {"field": field, "from": before, "to": after}


# -- the words -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, approvers, text",
    [
        ([change("amount", 33, 4)], (), "Approved by demo with amount 33 → 4"),
        (
            [change("amount", 33, 4), change("currency", "EUR", "USD")],
            (),
            "Approved by demo with amount 33 → 4, currency EUR → USD",
        ),
        ([change("amount", 33, 4)], ("alice", "bob"), "Approved by alice and bob with amount 33 → 4"),
        ([], (), "Approved by demo"),
    ],
)
def test_an_approvals_edits_follow_who_approved(changes, approvers, text):
    assert outcomes.decision_text("approved", by="demo", approvers=approvers, changes=changes) == text


@pytest.mark.parametrize(
    "value, words",
    [
        (4, "4"),
        (4.0, "4"),  # as JavaScript writes it, so the page reads as the diff panel did
        (33.5, "33.5"),
        ("EUR", "EUR"),
        (True, "yes"),
        (False, "no"),
        (["a", "b", 3], "a, b, 3"),
        ([], "(none)"),
        ("", "(empty)"),
        (None, "(empty)"),
        ({"a": 1.0, "b": [True]}, '{"a":1,"b":[true]}'),
    ],
)
def test_values_read_as_the_diff_panel_shows_them(value, words):
    assert outcomes.shown(value) == words


def test_a_long_value_is_cut_in_the_text_and_whole_in_the_decision():
    note = "refund because " + "the parcel never came " * 20
    edits = [change("note", "", note)]
    decision = outcomes.decision("approved", by="demo", at=None, at_wire=None, changes=edits)
    assert decision["changes"] == edits
    assert decision["text"].startswith("Approved by demo with note (empty) → refund because the parcel")
    assert decision["text"].endswith("…") and len(decision["text"]) < 100


def test_many_edits_are_counted_beyond_the_first_few():
    edits = [change(f"f{n}", n, n + 1) for n in range(6)]
    text = outcomes.decision_text("approved", by="demo", changes=edits)
    assert text == "Approved by demo with f0 0 → 1, f1 1 → 2, f2 2 → 3, f3 3 → 4 and 2 more changes"


def test_only_an_approval_carries_edits():
    decision = outcomes.decision("declined", by="bob", at=None, at_wire=None, changes=[change("amount", 33, 4)])
    assert decision["changes"] == [] and decision["text"] == "Declined by bob"


# -- what counts as an edit ------------------------------------------------------------------------------


def an_approval(args, *, arg_order=(), data=None):
    return Request(id="r-x", kind="approval", prompt="?", args=args, arg_order=list(arg_order), data=data)


def test_a_typed_value_equal_to_the_asked_one_is_no_change():
    request = an_approval({"amount": 33, "flag": True, "tags": ["a"]})
    assert answers.edited_args(request, {"args": {"amount": 33.0, "flag": True, "tags": ["a"]}}) == []


def test_a_value_of_another_type_is_a_change():
    request = an_approval({"amount": "33", "flag": 1})
    assert answers.edited_args(request, {"args": {"amount": 33, "flag": True}}) == [
        change("amount", "33", 33),
        change("flag", 1, True),
    ]


def test_edits_come_in_the_requests_argument_order():
    asked = {"amount": 33, "currency": "EUR", "order": "A-7"}
    approved = {"args": {"amount": 4, "currency": "USD", "order": "A-8"}}
    ordered = an_approval(asked, arg_order=["order", "currency", "amount"])
    assert [c["field"] for c in answers.edited_args(ordered, approved)] == ["order", "currency", "amount"]
    unordered = an_approval(asked)  # no arg_order kept: the args' own order
    assert [c["field"] for c in answers.edited_args(unordered, approved)] == ["amount", "currency", "order"]


def test_an_arg_the_tool_did_not_pass_is_compared_with_the_default_the_form_showed():
    request = an_approval({}, data={"editable": ["amount"]})
    request.tool_input_schema = demo_tools.refund.input_schema
    assert answers.edited_args(request, {"args": {"amount": 4}}) == [change("amount", 25.0, 4)]
    assert answers.edited_args(request, {"args": {"amount": 25}}) == []


# -- made by the one door, read from the database -----------------------------------------------------------


def test_an_edited_approval_says_what_changed_in_its_view(make_user):
    demo, alice = make_user("demo"), make_user("alice")
    refund_request("r-edit", starter=alice)
    answer = decisions.resolve_request("r-edit", ok=True, data={"args": {"amount": 4}}, comment="partial", user=demo)
    assert answer.data == {"args": {"amount": 4}, "comment": "partial"}  # the wire Answer is as it was
    view = frames.request_detail("r-edit")
    assert view["decision"]["changes"] == [change("amount", 33, 4)]
    assert view["decision"]["text"] == "Approved by demo with amount 33 → 4"
    assert verified(view["answer"]) == {
        "id": "r-edit",
        "ok": True,
        "data": {"args": {"amount": 4}, "comment": "partial"},
    }
    assert frames.answer_given(view) == ""  # the edit is in words, not raw JSON beside them


def test_the_dashboards_form_values_are_typed_before_they_are_compared(make_user):
    demo, alice = make_user("demo"), make_user("alice")
    refund_request("r-form", starter=alice)
    # As the inbox sends them: text, and a choice's index (1: USD). 33.0 is the 33 asked, no change.
    decisions.resolve_request("r-form", ok=True, form={"amount": "33.0", "currency": "1"}, user=demo)
    decision = decision_of("r-form")
    assert decision["changes"] == [change("currency", "EUR", "USD")]
    assert decision["text"] == "Approved by demo with currency EUR → USD"


def test_an_approval_as_asked_has_no_changes(make_user):
    demo, alice = make_user("demo"), make_user("alice")
    refund_request("r-same", starter=alice)
    decisions.resolve_request("r-same", ok=True, data={"args": {"amount": 33, "currency": "EUR"}}, user=demo)
    assert decision_of("r-same")["changes"] == []
    assert decision_of("r-same")["text"] == "Approved by demo"


def test_a_decline_and_an_answered_input_have_no_changes(make_user):
    demo, alice = make_user("demo"), make_user("alice")
    refund_request("r-no", starter=alice)
    decisions.resolve_request("r-no", ok=False, reason="declined", user=demo)
    assert decision_of("r-no")["changes"] == []
    run = Run.objects.create(tool="ask", status=RunStatus.RUNNING, started_by=alice, owner=runner.PROCESS_ID)
    decisions.open_request(WireRequest(id="r-in", kind="input", prompt="Name?"), run_id=run.pk, tool="ask")
    decisions.resolve_request("r-in", ok=True, data={"args": {"amount": 4}}, user=demo)
    assert decision_of("r-in")["changes"] == []


def test_a_quorum_names_every_approver_and_the_edit(make_user):
    Policy.objects.create(name="two keys", tool_pattern="refund*", quorum=2)
    alice, bob, starter = make_user("alice"), make_user("bob"), make_user("carol")
    refund_request("r-two", starter=starter)
    decisions.resolve_request("r-two", ok=True, data={"args": {"amount": 4}}, user=alice)
    decisions.resolve_request("r-two", ok=True, data={"args": {"amount": 4}}, user=bob)
    decision = decision_of("r-two")
    assert decision["text"] == "Approved by alice and bob with amount 33 → 4"
    assert decision["changes"] == [change("amount", 33, 4)]


def test_the_audit_event_records_the_edit_for_the_trail(make_user):
    demo, alice = make_user("demo"), make_user("alice")
    request = refund_request("r-trail", starter=alice)
    decisions.resolve_request("r-trail", ok=True, data={"args": {"amount": 4, "currency": "USD"}}, user=demo)
    event = request.events.get(action="request.answered")
    assert event.payload["changes"] == [change("amount", 33, 4), change("currency", "EUR", "USD")]
