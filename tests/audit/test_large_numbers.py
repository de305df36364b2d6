"""A float like 1e16 in a call's args and in its answer's data: Django writes it as ``1e+16``, PostgreSQL's jsonb
gives it back as ``10000000000000000``; the call digest, the answer's signature and verify_audit agree on both
(tests/cluster/test_modules_on_postgresql.py runs this module on PostgreSQL too)."""

import base64

import pytest
from toolnexus import Request as WireRequest

from approvals.audit.signed_answers import verify_answers
from approvals.models import Request, Run, RunStatus
from approvals.review import decisions
from approvals.runs import runner
from approvals.shapes import answer_wire
from approvals.signing import keys
from console_remote import call_digest, signed_statement

pytestmark = pytest.mark.django_db(transaction=True, reset_sequences=True)


def answered(request_id, user, kind, data):
    """A request for the call transfer(amount=1e16), answered ok with ``data``, as read back from the database
    (where PostgreSQL has made the numbers ints)."""
    run = Run.objects.create(tool="transfer", status=RunStatus.RUNNING, started_by=user, owner=runner.PROCESS_ID)
    wire = WireRequest(id=request_id, kind=kind, prompt="Transfer?")
    decisions.open_request(wire, run_id=run.pk, tool="transfer", args={"amount": 1e16})
    decisions.resolve_request(request_id, ok=True, data=data, user=user, via="api")
    return Request.objects.get(pk=request_id)


def verified(stored):
    """The served Answer of ``stored``, once its signature verifies under the console's key."""
    served = answer_wire(stored)
    signature = served["signature"]
    key = keys.verifying_keys()[signature["kid"]]
    key.verify(
        base64.urlsafe_b64decode(signature["sig"] + "=" * (-len(signature["sig"]) % 4)), signed_statement(served)
    )
    return served


def test_answers_with_1e16_in_args_and_data_verify_once_read_back(make_user):
    alice = make_user("alice")
    given = verified(answered("big-input", alice, "input", {"x": 1e16}))
    approval = verified(answered("big-approval", alice, "approval", None))
    for served in (given, approval):
        assert served["signature"]["call_digest"] == call_digest("transfer", {"amount": 1e16})
        assert served["signature"]["call_digest"] == call_digest("transfer", {"amount": 10**16})
    assert given["data"] == {"x": 1e16}  # equal as numbers, whichever type the database gave back

    # verify_audit's answer checks. (Its chain check is left out: the audit chain hashes an event's payload as
    # json.dumps printed it when written, 1e+16, and PostgreSQL gives back 10000000000000000.)
    report = verify_answers(keys.verifying_keys())
    assert report.failures == []
    assert report.summary() == "2 answers checked: 2 verified (signature, call digests, stored row)."


def test_an_approved_edit_with_no_canonical_form_is_refused_on_args(make_user):
    alice = make_user("alice")
    run = Run.objects.create(tool="transfer", status=RunStatus.RUNNING, started_by=alice, owner=runner.PROCESS_ID)
    schema = {"type": "object", "properties": {"amount": {"type": "integer"}}}
    wire = WireRequest(id="big-edit", kind="approval", prompt="Transfer?", data={"editable": ["amount"]})
    decisions.open_request(wire, run_id=run.pk, tool="transfer", args={"amount": 5}, tool_input_schema=schema)
    with pytest.raises(decisions.DecisionError) as refused:
        decisions.resolve_request("big-edit", ok=True, data={"args": {"amount": 2**53 + 1}}, user=alice, via="api")
    assert refused.value.code == "invalid"
    assert list(refused.value.field_errors) == ["args"]
    assert "$.args.amount is 9007199254740993" in refused.value.field_errors["args"][0]
