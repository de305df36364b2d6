"""Decisions: a request is resolved exactly once, the loser is told who won, and every step is audited."""

import asyncio
import re
import threading

import pytest
from asgiref.sync import sync_to_async
from django.db import IntegrityError, connection, transaction
from toolnexus import define_tool, pending

from approvals.models import AuditEvent, Request, RequestStatus, Run, RunStatus
from approvals.review import decisions
from approvals.runs import runner
from tests.support.signatures import without

pytestmark = pytest.mark.django_db(transaction=True)
WHEN = r"\d{2}:\d{2} UTC"  # moments.readable_time, today


def counting_tool():
    """Suspends on the first call, succeeds on the retry; counts every execution."""
    calls = []

    async def sign_off(ctx=None):
        calls.append(getattr(ctx, "answer", None))
        if ctx is not None and ctx.answer is not None:
            return f"signed off: {ctx.answer.data}"
        return pending(kind="approval", prompt="Sign off?")

    return define_tool(sign_off, name="sign_off"), calls


async def finished(run_id, timeout=10):
    await asyncio.wait_for(runner.wait_for_run(run_id), timeout)
    return await Run.objects.aget(pk=run_id)


async def open_run_request(console_events, tool="sign_off", args=None):
    run = await runner.start_run(tool=tool, args=args or {})
    opened = await console_events.next("request.opened", run_id=run.pk)
    return run, opened["request_id"]


def split(outcomes):
    answers = [o for o in outcomes if not isinstance(o, BaseException)]
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    return answers, errors


# -- exactly once ------------------------------------------------------------------------


async def test_two_concurrent_async_answers_one_wins(extra_tools, console_events, make_user):
    tool, calls = counting_tool()
    extra_tools(tool)
    alice = await sync_to_async(make_user)("alice", password=None)
    bob = await sync_to_async(make_user)("bob", password=None)
    run, request_id = await open_run_request(console_events)

    outcomes = await asyncio.gather(
        decisions.aresolve_request(request_id, ok=True, data={"comment": "by alice"}, user=alice),
        decisions.aresolve_request(request_id, ok=True, data={"comment": "by bob"}, user=bob),
        return_exceptions=True,
    )
    answers, errors = split(outcomes)
    assert len(answers) == 1 and len(errors) == 1
    error = errors[0]
    assert isinstance(error, decisions.DecisionError)
    assert error.code == "not_open" and error.http_status == 409

    request = await Request.objects.select_related("answered_by").aget(pk=request_id)
    winner = request.answered_by.get_username()
    assert answers[0].data == {"comment": f"by {winner}"}
    assert re.fullmatch(rf"This request was already answered by {winner} at {WHEN}\.", error.message)
    assert request.answered_at.strftime("%H:%M UTC") in error.message

    done = await finished(run.pk)
    assert done.status == RunStatus.SUCCEEDED
    assert done.result_output == f"signed off: {{'comment': 'by {winner}'}}"
    assert len(calls) == 2  # the first call and exactly one retry
    answered = AuditEvent.objects.filter(request_id=request_id, action=AuditEvent.Action.REQUEST_ANSWERED)
    assert await answered.acount() == 1


def _resolve_in_threads(request_id, users, monkeypatch=None):
    """Call the sync ``resolve_request`` from one OS thread per user, all at once."""
    outcomes = {}
    start = threading.Barrier(len(users), timeout=10)

    def answer(user):
        try:
            start.wait()
            outcomes[user.username] = decisions.resolve_request(
                request_id, ok=True, data={"comment": f"by {user.username}"}, user=user
            )
        except Exception as exc:  # noqa: BLE001 - collected for the assertions
            outcomes[user.username] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=answer, args=(user,), name=f"answer-{user.username}") for user in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(15)
    assert not any(thread.is_alive() for thread in threads)
    return outcomes


async def _assert_exactly_one_winner(outcomes, request_id):
    answers, errors = split(outcomes.values())
    assert len(answers) == 1, outcomes
    assert len(errors) == len(outcomes) - 1
    request = await Request.objects.select_related("answered_by").aget(pk=request_id)
    winner = request.answered_by.get_username()
    assert outcomes[winner] is answers[0]
    for error in errors:
        assert isinstance(error, decisions.DecisionError), error
        assert error.code == "not_open"
        assert re.fullmatch(rf"This request was already answered by {winner} at {WHEN}\.", error.message)
    return winner


async def test_two_os_threads_answering_one_wins(extra_tools, console_events, make_user):
    tool, calls = counting_tool()
    extra_tools(tool)
    users = [await sync_to_async(make_user)(name, password=None) for name in ("alice", "bob")]
    run, request_id = await open_run_request(console_events)

    outcomes = await asyncio.to_thread(_resolve_in_threads, request_id, users)
    winner = await _assert_exactly_one_winner(outcomes, request_id)

    done = await finished(run.pk)
    assert done.status == RunStatus.SUCCEEDED
    assert done.result_output == f"signed off: {{'comment': 'by {winner}'}}"
    assert len(calls) == 2


async def test_threads_that_both_pass_the_open_check_still_resolve_once(
    extra_tools, console_events, make_user, monkeypatch
):
    """Force the race onto the conditional update: both threads read the request as open first."""
    tool, calls = counting_tool()
    extra_tools(tool)
    users = [await sync_to_async(make_user)(name, password=None) for name in ("alice", "bob", "carol")]
    run, request_id = await open_run_request(console_events)

    both_checked = threading.Barrier(len(users), timeout=10)
    validate = decisions._validated

    def validate_after_everyone_checked(*args, **kwargs):
        both_checked.wait()  # every thread has seen status=open before any of them updates
        return validate(*args, **kwargs)

    monkeypatch.setattr(decisions, "_validated", validate_after_everyone_checked)
    outcomes = await asyncio.to_thread(_resolve_in_threads, request_id, users)
    await _assert_exactly_one_winner(outcomes, request_id)

    done = await finished(run.pk)
    assert done.status == RunStatus.SUCCEEDED
    assert len(calls) == 2


async def test_answering_a_declined_request_names_the_decliner(console_events, make_user):
    dave = await sync_to_async(make_user)("dave", password=None)
    run, request_id = await open_run_request(console_events, tool="refund")
    await decisions.aresolve_request(request_id, ok=False, reason="declined", user=dave)
    with pytest.raises(decisions.DecisionError) as late:
        await decisions.aresolve_request(request_id, ok=True)
    assert late.value.code == "not_open"
    assert re.fullmatch(rf"This request was already declined by dave at {WHEN}\.", late.value.message)
    await finished(run.pk)


async def test_a_request_expires_only_through_expire_request():
    """One door decides expiry: not even the console may resolve a request as "expired" by hand."""
    wire = pending(kind="approval", prompt="Ship it?").metadata["pending"]
    await decisions.aopen_request(wire)
    with pytest.raises(decisions.DecisionError) as by_hand:
        await decisions.aresolve_request(wire.id, ok=False, reason="expired", actor="system")
    assert by_hand.value.code == "invalid"
    assert await decisions.aexpire_request(wire.id) is False  # no deadline of its own, and no run ran out of time
    assert (await Request.objects.aget(pk=wire.id)).status == RequestStatus.OPEN
    assert await decisions.aexpire_request(wire.id, run_timed_out=True) is True
    expired = await Request.objects.aget(pk=wire.id)
    assert (expired.status, expired.answer_reason, expired.answered_by_id) == (RequestStatus.EXPIRED, "expired", None)


async def test_answering_an_expired_request_says_when_it_expired():
    wire = pending(kind="approval", prompt="Ship it?", expiresAt="2000-01-01T00:00:00Z").metadata["pending"]
    await decisions.aopen_request(wire)
    assert await decisions.aexpire_request(wire.id) is True
    with pytest.raises(decisions.DecisionError) as late:
        await decisions.aresolve_request(wire.id, ok=True)
    assert late.value.code == "not_open"
    assert re.fullmatch(rf"This request expired at {WHEN}; it can no longer be answered\.", late.value.message)


# -- refusals ------------------------------------------------------------------------------


async def test_input_answer_failing_the_schema_gets_field_errors_and_stays_open(console_events):
    run, request_id = await open_run_request(console_events, tool="deploy")

    with pytest.raises(decisions.DecisionError) as wrong:
        await decisions.aresolve_request(request_id, ok=True, data={"env": "moon"})
    assert wrong.value.code == "invalid" and wrong.value.http_status == 400
    assert wrong.value.field_errors == {"env": ["Choose one of: staging, production."]}
    assert wrong.value.as_dict()["field_errors"] == wrong.value.field_errors

    with pytest.raises(decisions.DecisionError) as missing:
        await decisions.aresolve_request(request_id, ok=True, data={})
    assert missing.value.field_errors == {"env": ["This field is required."]}

    with pytest.raises(decisions.DecisionError) as not_an_object:
        await decisions.aresolve_request(request_id, ok=True, data=["staging"])
    assert not_an_object.value.code == "invalid"

    request = await Request.objects.aget(pk=request_id)
    assert request.status == RequestStatus.OPEN
    assert request.answer_ok is None
    assert (await Run.objects.aget(pk=run.pk)).status == RunStatus.WAITING

    await decisions.aresolve_request(request_id, ok=True, data={"env": "production"})
    done = await finished(run.pk)
    assert done.result_output == "deployed to production"


async def test_unknown_request_is_not_found():
    with pytest.raises(decisions.DecisionError) as missing:
        await decisions.aresolve_request("no-such-request", ok=True)
    assert missing.value.code == "not_found"
    assert missing.value.http_status == 404
    assert "no-such-request" in missing.value.message


async def test_bad_reason_is_invalid_and_leaves_the_request_open(console_events):
    run, request_id = await open_run_request(console_events, tool="refund")
    with pytest.raises(decisions.DecisionError) as bad:
        await decisions.aresolve_request(request_id, ok=False, reason="bored")
    assert bad.value.code == "invalid"
    assert "reason must be one of declined, cancelled;" in bad.value.message
    assert (await Request.objects.aget(pk=request_id)).status == RequestStatus.OPEN
    await runner.cancel_run(run.pk)
    await finished(run.pk)


async def test_decline_without_a_reason_is_declined(console_events):
    run, request_id = await open_run_request(console_events, tool="refund")
    answer = await decisions.aresolve_request(request_id, ok=False)
    assert (answer.ok, answer.reason) == (False, "declined")
    assert (await Request.objects.aget(pk=request_id)).status == RequestStatus.DECLINED
    await finished(run.pk)


async def test_opening_a_request_twice_is_a_conflict():
    wire = pending(kind="approval", prompt="Twice?").metadata["pending"]
    await decisions.aopen_request(wire)
    with pytest.raises(decisions.DecisionError) as twice:
        await decisions.aopen_request(wire)
    assert twice.value.code == "conflict"
    assert twice.value.http_status == 409
    assert wire.id in twice.value.message


# -- the audit trail -----------------------------------------------------------------------


async def trail(run_id):
    return [(e.action, e.actor, e.actor_user_id) async for e in AuditEvent.objects.filter(run_id=run_id).order_by("id")]


async def test_audit_trail_of_answered_and_declined_runs(console_events, make_user):
    alice = await sync_to_async(make_user)("alice", password=None)
    bob = await sync_to_async(make_user)("bob", password=None)

    deploy = await runner.start_run(tool="deploy", args={}, user=alice)
    opened = await console_events.next("request.opened", run_id=deploy.pk)
    await decisions.aresolve_request(opened["request_id"], ok=True, data={"env": "staging"}, user=bob)
    await finished(deploy.pk)
    assert await trail(deploy.pk) == [
        ("run.started", "alice", alice.pk),
        ("request.opened", "tool:deploy", None),
        ("request.answered", "bob", bob.pk),
        ("run.finished", "tool:deploy", None),
    ]
    answered = await AuditEvent.objects.aget(run_id=deploy.pk, action="request.answered")
    assert answered.request_id == opened["request_id"]
    assert without(answered.payload, "signature") == {
        "ok": True,
        "reason": None,
        "comment": "",
        "data": {"env": "staging"},
        "decided_by": "person",
    }
    assert answered.payload["signature"]["call_digest"] == opened["payload"]["call_digest"]
    finish = await AuditEvent.objects.aget(run_id=deploy.pk, action="run.finished")
    # The approved call's outcome is on the run's finish (issue 36: its request is the event's too).
    assert finish.payload == {
        "status": "succeeded",
        "output": "deployed to staging",
        "is_error": False,
        "execution": "succeeded",
    }
    assert finish.request_id == opened["request_id"]

    refund = await runner.start_run(tool="refund", args={}, user=alice)
    opened = await console_events.next("request.opened", run_id=refund.pk)
    await decisions.aresolve_request(opened["request_id"], ok=False, reason="declined", comment="no", user=bob)
    await finished(refund.pk)
    assert await trail(refund.pk) == [
        ("run.started", "alice", alice.pk),
        ("request.opened", "tool:refund", None),
        ("request.declined", "bob", bob.pk),
        ("run.finished", "tool:refund", None),
    ]


async def test_audit_trail_of_cancelled_and_expired_runs(console_events, make_user):
    alice = await sync_to_async(make_user)("alice", password=None)

    cancelled = await runner.start_run(tool="refund", args={}, user=alice)
    await console_events.next("request.opened", run_id=cancelled.pk)
    await runner.cancel_run(cancelled.pk, user=alice)
    await finished(cancelled.pk)
    assert await trail(cancelled.pk) == [
        ("run.started", "alice", alice.pk),
        ("request.opened", "tool:refund", None),
        ("run.cancel_requested", "alice", alice.pk),
        ("request.cancelled", "alice", alice.pk),  # withdrawn because alice cancelled its run: hers
        ("run.finished", "tool:refund", None),
    ]

    expired = await runner.start_run(tool="refund", args={}, timeout=0.3, timeout_counts_waiting=True)  # wall clock
    await console_events.next("request.opened", run_id=expired.pk)
    await finished(expired.pk)
    assert await trail(expired.pk) == [
        ("run.started", "system", None),
        ("request.opened", "tool:refund", None),
        ("request.expired", "system", None),
        ("run.finished", "tool:refund", None),
    ]
    finish = await AuditEvent.objects.aget(run_id=expired.pk, action="run.finished")
    assert finish.payload["status"] == "timed_out"


def test_audit_events_refuse_update():
    event = AuditEvent.objects.create(action=AuditEvent.Action.RUN_STARTED, actor="alice")
    event.actor = "mallory"
    with pytest.raises(PermissionError, match="append-only"):
        event.save()
    assert AuditEvent.objects.get(pk=event.pk).actor == "alice"


def test_audit_events_refuse_delete():
    event = AuditEvent.objects.create(action=AuditEvent.Action.RUN_STARTED, actor="alice")
    with pytest.raises(PermissionError, match="append-only"):
        event.delete()
    assert AuditEvent.objects.filter(pk=event.pk).exists()


def test_audit_event_rebuilt_with_an_existing_id_cannot_overwrite_it():
    event = AuditEvent.objects.create(action=AuditEvent.Action.RUN_STARTED, actor="alice")
    forged = AuditEvent(pk=event.pk, action=AuditEvent.Action.RUN_FINISHED, actor="mallory")
    with transaction.atomic(), pytest.raises(IntegrityError):
        forged.save()
    stored = AuditEvent.objects.get(pk=event.pk)
    assert (stored.action, stored.actor) == ("run.started", "alice")
