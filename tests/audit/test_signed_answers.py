"""verify_audit checks the console's signature on every answer in the trail beside the chain: the Answer rebuilt
from its resolving event verifies under its key, it was signed for the call its request was opened for, and the
request's row still holds that call and that answer. Answers decided before the console signed are unsigned."""

import io
import json
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.utils import timezone
from toolnexus import Request as WireRequest

from approvals import demo_tools, events
from approvals.audit.chain import backfill_chain
from approvals.models import AuditEvent, Request, RequestStatus, Run, RunStatus, SigningKey
from approvals.review import decisions
from approvals.runs import runner
from console_remote import call_digest
from tests.support.dashboard import waiting_request

pytestmark = pytest.mark.django_db(transaction=True, reset_sequences=True)

A = AuditEvent.Action


def verify_output(*args):
    out = io.StringIO()
    call_command("verify_audit", "--seal", *args, stdout=out)
    return out.getvalue().strip()


def verify_fails(*args):
    """The failure's message (the command's output up to it goes to ``out``)."""
    out = io.StringIO()
    with pytest.raises(CommandError) as failed:
        call_command("verify_audit", "--seal", *args, stdout=out)
    assert failed.value.returncode == 1
    return str(failed.value)


def raw(sql, params=()):
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def answers_line(output):
    return next(line for line in output.splitlines() if " checked: " in line)


def refund_request(request_id, user, amount=70):
    """An open refund approval whose amount a reviewer may change (the demo tool's own schema)."""
    run = Run.objects.create(tool="refund", status=RunStatus.RUNNING, started_by=user, owner=runner.PROCESS_ID)
    args = {"order": f"O-{request_id}", "amount": amount, "currency": "EUR"}
    wire = WireRequest(id=request_id, kind="approval", prompt="Refund?", data={**args, "editable": ["amount"]})
    return decisions.open_request(
        wire, run_id=run.pk, tool="refund", args=args, tool_input_schema=demo_tools.refund.input_schema
    )


def approved(request_id, user, **data):
    """A refund request, answered ok by ``user`` with ``data`` (``args`` edits the amount that runs)."""
    refund_request(request_id, user)
    decisions.resolve_request(request_id, ok=True, data=data or None, user=user, via="web")
    return Request.objects.get(pk=request_id)


def declined(request_id, user):
    refund_request(request_id, user, amount=5)
    decisions.resolve_request(request_id, ok=False, reason="declined", comment="not today", user=user, via="api")
    return Request.objects.get(pk=request_id)


def test_a_clean_trail_verifies_every_signed_answer(make_user):
    alice = make_user("alice")
    edited = approved("sig-edited", alice, args={"amount": 40})
    declined("sig-declined", alice)
    waiting_request("sig-open", starter=alice)  # open: nothing to check yet
    assert edited.answer_signature["run_digest"] != edited.answer_signature["call_digest"]
    lines = verify_output().splitlines()
    assert lines[0].endswith("events verified.")
    assert "2 answers checked: 2 verified (signature, call digests, stored row)." in lines
    assert lines[-1].startswith("Head: #")  # still the last line: the head to keep


def test_an_answer_edited_in_its_row_is_caught_as_the_row_altered(make_user):
    alice = make_user("alice")
    approved("sig-ok", alice)
    row = approved("sig-row", alice, comment="small")
    raw(
        f"UPDATE {Request._meta.db_table} SET answer_data = %s WHERE id = %s", [json.dumps({"comment": "huge"}), row.pk]
    )
    message = verify_fails()
    assert message.startswith("Answer check failed.\n1 of 2 answers did not verify:")
    assert "Request 'sig-row' (event #" in message
    assert "row altered: its stored answer (ok, data, reason) and signature no longer verify" in message
    assert "sig-ok" not in message


def test_another_answers_signature_put_on_a_row_is_caught(make_user):
    alice = make_user("alice")
    donor = approved("sig-donor", alice)
    approved("sig-swapped", alice)
    raw(
        f"UPDATE {Request._meta.db_table} SET answer_signature = %s WHERE id = 'sig-swapped'",
        [json.dumps(donor.answer_signature)],
    )
    message = verify_fails()
    assert "Request 'sig-swapped'" in message and "sig-donor" not in message
    assert "its stored signature is not the one its resolving event recorded" in message


def test_who_decided_edited_in_the_row_is_caught(make_user):
    alice, mallory = make_user("alice"), make_user("mallory")
    approved("sig-who", alice)
    raw(f"UPDATE {Request._meta.db_table} SET answered_by_id = %s WHERE id = 'sig-who'", [mallory.pk])
    assert "row altered: who decided it and when are not what was signed" in verify_fails()


def test_an_edited_event_payload_is_caught_by_the_chain_and_after_a_reseal_by_the_signature(make_user):
    alice = make_user("alice")
    approved("sig-event", alice, comment="small")
    call_command("verify_audit", "--seal", stdout=io.StringIO())
    answered = AuditEvent.objects.get(request_id="sig-event", action=A.REQUEST_ANSWERED)
    payload = {**answered.payload, "data": {"comment": "huge"}}
    raw(f"UPDATE {AuditEvent._meta.db_table} SET payload = %s WHERE id = %s", [json.dumps(payload), answered.pk])
    message = verify_fails()
    # The chain catches the edit first; the answer it edited is named too.
    assert f"Event #{answered.position} was altered: its contents no longer match its hash." in message
    assert "Request 'sig-event'" in message and "bad signature: it does not verify under key" in message
    # Whoever holds the audit key can re-hash the chain over the edit (reseal_audit itself refuses a trail that
    # does not verify): the chain verifies again, the answer's signature, made with another key, does not.
    backfill_chain()
    message = verify_fails()
    assert message.startswith("Answer check failed.")
    assert "Request 'sig-event'" in message and "bad signature" in message


def test_an_answer_signed_with_a_key_the_console_does_not_know_is_named(make_user, rotate_signing_key):
    alice = make_user("alice")
    gone = rotate_signing_key()
    approved("sig-gone", alice)
    rotate_signing_key()  # the old key's public half was never registered (or its row was deleted)
    SigningKey.objects.filter(kid=gone.kid).delete()
    message = verify_fails()
    assert f"unknown key: '{gone.kid}' is neither a registered signing key nor the current one" in message


def test_answers_under_a_rotated_key_and_the_current_one_both_verify(make_user, rotate_signing_key):
    alice = make_user("alice")
    first = rotate_signing_key()
    SigningKey.objects.update_or_create(kid=first.kid, defaults={"public_key": first.public_b64})
    approved("sig-key1", alice)
    second = rotate_signing_key()
    approved("sig-key2", alice)
    kids = {row.pk: row.answer_signature["kid"] for row in Request.objects.filter(pk__in=["sig-key1", "sig-key2"])}
    assert kids == {"sig-key1": first.kid, "sig-key2": second.kid}
    assert "2 answers checked: 2 verified (signature, call digests, stored row)." in verify_output()


def test_a_request_whose_args_no_longer_match_its_call_digest_is_named(make_user):
    alice = make_user("alice")
    approved("sig-args", alice)
    raw(
        f"UPDATE {Request._meta.db_table} SET args = %s WHERE id = 'sig-args'",
        [json.dumps({"order": "O-sig-args", "amount": 7000, "currency": "EUR"})],
    )
    signed = Request.objects.get(pk="sig-args").answer_signature["call_digest"]
    now = call_digest("refund", {"order": "O-sig-args", "amount": 7000, "currency": "EUR"})
    message = verify_fails()
    assert f"digest mismatch: the row's tool and args hash to {now}, the answer signed {signed}" in message


def test_a_call_digest_column_that_does_not_match_the_signed_one_is_named(make_user):
    alice = make_user("alice")
    approved("sig-column", alice)
    raw(f"UPDATE {Request._meta.db_table} SET call_digest = %s WHERE id = 'sig-column'", ["sha256:" + "0" * 64])
    assert f"digest mismatch: the row's call_digest is sha256:{'0' * 64}" in verify_fails()


def test_answers_decided_before_the_console_signed_are_counted_unsigned(make_user):
    """A trail from before signing: the door then wrote no call digest, no signature, and no "signature" key."""
    alice = make_user("alice")
    approved("sig-new", alice)
    now = timezone.now()
    old = Request.objects.create(
        id="sig-old",
        kind="approval",
        prompt="refund: go ahead?",
        tool="refund",
        args={"amount": 3},
        status=RequestStatus.ANSWERED,
        answer_ok=True,
        answered_at=now,
        answered_by=alice,
        decided_by="person",
    )
    with transaction.atomic():
        events.record(A.REQUEST_OPENED, actor="alice", request=old, payload={"kind": "approval", "prompt": "x"})
        events.record(
            A.REQUEST_ANSWERED,
            actor="alice",
            request=old,
            payload={"ok": True, "reason": None, "comment": "", "data": None, "decided_by": "person"},
        )
    output = verify_output()
    assert (
        answers_line(output)
        == "2 answers checked: 1 verified (signature, call digests, stored row), 1 unsigned (decided before the console "
        "signed answers)."
    )


def test_a_signature_added_to_an_unsigned_rows_answer_is_named(make_user):
    """A signed row whose resolving event carries none: the signature was put there after the fact."""
    alice = make_user("alice")
    signed = approved("sig-source", alice)
    old = Request.objects.create(
        id="sig-grafted",
        kind="approval",
        prompt="p",
        tool="refund",
        args={},
        status=RequestStatus.ANSWERED,
        answer_ok=True,
        answered_at=timezone.now(),
        answer_signature=signed.answer_signature,
    )
    with transaction.atomic():
        events.record(A.REQUEST_ANSWERED, actor="alice", request=old, payload={"ok": True, "data": None})
    message = verify_fails()
    assert "Request 'sig-grafted'" in message
    assert "row altered: the row carries a signature its resolving event did not record" in message


def test_archived_answers_are_checked_in_their_file(make_user, tmp_path):
    alice = make_user("alice")
    approved("sig-arch1", alice, args={"amount": 10})
    declined("sig-arch2", alice)
    AuditEvent.objects.seal_pending()
    path = tmp_path / "a.jsonl.gz"
    before = (datetime.now(UTC) + timedelta(seconds=1)).isoformat().replace("+00:00", "Z")
    call_command("archive_audit", "--before", before, "--out", str(path), stdout=io.StringIO())
    out = io.StringIO()
    call_command("verify_audit", "--archive", str(path), stdout=out)
    assert f"{path}: 2 answers checked: 2 verified (signature, call digests, stored row)." in out.getvalue()
    # The rows outlive their archived events: an edit is still found, through the file.
    raw(f"UPDATE {Request._meta.db_table} SET answer_ok = %s WHERE id = 'sig-arch2'", [True])
    with pytest.raises(CommandError) as failed:
        call_command("verify_audit", "--archive", str(path), stdout=io.StringIO())
    assert failed.value.returncode == 1
    assert f"{path}: answer check failed." in str(failed.value)
    assert "Request 'sig-arch2'" in str(failed.value) and "row altered" in str(failed.value)


def test_a_signing_key_row_whose_kid_is_not_its_keys_id_is_ignored_and_named(make_user):
    """A row planted under another id (here a key whose kid is not its own) never verifies an answer, and
    verify_audit names it; an answer forged with that key is refused as signed by an unknown key."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from approvals.signing import keys
    from approvals.signing.answers import signature_for

    alice = make_user("alice")
    row = approved("sig-planted", alice)
    forger = keys.key_pair(Ed25519PrivateKey.generate())
    SigningKey.objects.create(kid="0123456789abcdef", public_key=forger.public_b64)
    assert "0123456789abcdef" not in keys.verifying_keys()
    forged = signature_for(
        forger.private_key,
        "0123456789abcdef",
        request_id=row.pk,
        ok=True,
        data=row.answer_data,
        reason=None,
        call_digest=row.answer_signature["call_digest"],
        run_digest=row.answer_signature["run_digest"],
        by=row.answer_signature["by"],
        decided_by=row.answer_signature["decided_by"],
        at=row.answer_signature["at"],
    )
    answered = AuditEvent.objects.get(request_id="sig-planted", action=A.REQUEST_ANSWERED)
    raw(
        f"UPDATE {AuditEvent._meta.db_table} SET payload = %s WHERE id = %s",
        [json.dumps({**answered.payload, "signature": forged}), answered.pk],
    )
    raw(f"UPDATE {Request._meta.db_table} SET answer_signature = %s WHERE id = %s", [json.dumps(forged), row.pk])
    backfill_chain()  # whoever planted the row re-hashed the chain over the forged answer too
    message = verify_fails()
    assert "Request 'sig-planted'" in message and "0123456789abcdef" in message
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("verify_audit", stdout=out)
    assert "Ignored 1 signing key row(s) whose kid is not their public key's id" in out.getvalue()
