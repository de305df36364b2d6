"""A resolved request's decision in words, distinct for each outcome, made by the one door and read
back from the database: "Approved by alice", "Answered by alice", "Declined by bob: too large",
"Cancelled by demo", "Expired at 18:31". The tool's own result keeps §10's ``declined/expired: <prompt>``.
"""

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone
from toolnexus import Request as WireRequest

from approvals import frames, moments
from approvals.models import AuditEvent, Policy, Request, Run
from approvals.review import decisions, outcomes
from approvals.runs import runner
from tests.support.dashboard import waiting_request

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _stop_leftover_runs(stop_leftover_runs):
    """Every test here cancels what it left running (the fixture is in tests/conftest.py)."""


def decision_of(request_id):
    return frames.request_detail(request_id)["decision"]


# -- the words -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "outcome, by, comment, approvers, text",
    [
        ("approved", "alice", "", (), "Approved by alice"),
        ("approved", "bob", "fine", (), "Approved by bob"),  # an approval's comment is shown beside, not in
        ("approved", "bob", "", ("alice", "bob"), "Approved by alice and bob"),
        ("answered", "alice", "", (), "Answered by alice"),
        ("declined", "bob", "too large", (), "Declined by bob: too large"),
        ("declined", "bob", "", (), "Declined by bob"),
        ("cancelled", "demo", "", (), "Cancelled by demo"),
        ("cancelled", None, "The console stopped.", (), "Cancelled by the console: The console stopped."),
    ],
)
def test_each_outcome_reads_distinctly(outcome, by, comment, approvers, text):
    assert outcomes.decision_text(outcome, by=by, comment=comment, approvers=approvers) == text


def test_an_expiry_says_when_in_utc_with_its_zone_whatever_the_consoles_clock(settings):
    settings.TIME_ZONE = "Europe/Berlin"
    at = datetime(2030, 1, 1, 17, 31, 40, tzinfo=UTC)
    assert outcomes.decision_text("expired", at=at) == "Expired at 1 Jan 2030 17:31 UTC, nobody answered"
    now = timezone.now().replace(hour=17, minute=31)
    assert outcomes.decision_text("expired", at=now) == "Expired at 17:31 UTC, nobody answered"
    assert outcomes.decision_text("expired", at=None) == "Expired, nobody answered"


def test_a_long_comment_is_one_line_in_the_text_and_whole_in_the_decision(alice, bob):
    comment = "too large\n" + "x" * 300
    waiting_request("r-long", starter=alice)
    decisions.resolve_request("r-long", ok=False, reason="declined", comment=comment, user=bob)
    decision = decision_of("r-long")
    assert decision["comment"] == comment
    assert decision["text"].startswith("Declined by bob: too large xxx") and decision["text"].endswith("…")
    assert "\n" not in decision["text"] and len(decision["text"]) < 150


# -- made by the one door, read from the database -----------------------------------------------------------


def test_an_open_request_has_no_decision(alice):
    waiting_request("r-open", starter=alice)
    assert decision_of("r-open") is None


def test_an_approval_reads_approved_by_who_with_when_and_comment(alice, bob):
    waiting_request("r-yes", starter=alice)
    decisions.resolve_request("r-yes", ok=True, comment="fine", user=bob)
    row = Request.objects.get(pk="r-yes")
    assert decision_of("r-yes") == {
        "outcome": "approved",
        "decided_by": "person",
        "by": "bob",
        "at": moments.iso_time(row.answered_at),
        "comment": "fine",
        "changes": [],
        "response": None,
        "message": None,
        "option": None,
        "text": "Approved by bob",
    }


def test_an_answered_input_reads_answered_by_who(alice, bob):
    waiting_request("r-input", starter=alice, kind="input", data={"schema": {"type": "object"}})
    decisions.resolve_request("r-input", ok=True, data={"env": "staging"}, user=bob)
    assert decision_of("r-input")["text"] == "Answered by bob"


def test_a_quorum_names_every_approver(alice, bob, make_user):
    Policy.objects.create(name="two keys", tool_pattern="refund*", quorum=2)
    carol = make_user("carol")
    waiting_request("r-two", starter=alice)
    decisions.resolve_request("r-two", ok=True, user=bob)
    decisions.resolve_request("r-two", ok=True, user=carol)
    assert decision_of("r-two") | {"at": None} == {
        "outcome": "approved",
        "decided_by": "person",
        "by": "carol",
        "at": None,
        "comment": "",
        "changes": [],
        "response": None,
        "message": None,
        "option": None,
        "text": "Approved by bob and carol",
    }


def test_a_decline_reads_declined_by_who_and_why(alice, bob):
    waiting_request("r-no", starter=alice)
    decisions.resolve_request("r-no", ok=False, reason="declined", comment="too large", user=bob)
    decision = decision_of("r-no")
    assert (decision["outcome"], decision["by"], decision["text"]) == ("declined", "bob", "Declined by bob: too large")


def test_an_expiry_reads_expired_at_and_credits_nobody(alice, settings):
    settings.TIME_ZONE = "Europe/Berlin"
    run = Run.objects.create(tool="refund", started_by=alice, owner=runner.PROCESS_ID)
    past = (timezone.now() - timedelta(minutes=1)).isoformat().replace("+00:00", "Z")
    decisions.open_request(WireRequest(id="r-late", kind="approval", prompt="go?", expiresAt=past), run_id=run.pk)
    assert decisions.expire_request("r-late")
    row = Request.objects.get(pk="r-late")
    decision = decision_of("r-late")
    assert (decision["outcome"], decision["by"], decision["decided_by"]) == ("expired", None, "timeout")
    assert decision["text"] == f"Expired at {row.answered_at.astimezone(UTC):%H:%M} UTC, nobody answered"


def test_a_host_withdrawing_its_request_reads_cancelled_by_the_host(make_user):
    host = make_user("host-svc")
    row, _ = decisions.open_host_request(WireRequest(id="r-host", kind="approval", prompt="go?"), user=host)
    decisions.withdraw_host_request(row.pk, user=host)
    assert decision_of("r-host")["text"] == "Cancelled by host-svc"


def test_the_console_cancelling_on_its_own_says_so_and_why(alice):
    waiting_request("r-stop", starter=alice)
    decisions.resolve_request("r-stop", ok=False, reason="cancelled", actor="system", comment="The console stopped.")
    assert decision_of("r-stop")["text"] == "Cancelled by the console: The console stopped."


# -- a run cancelled by a person: its requests were cancelled by them ----------------------------------------


async def finished(run_id):
    await asyncio.wait_for(runner.wait_for_run(run_id), 10)
    return await Run.objects.aget(pk=run_id)


async def test_cancelling_a_run_credits_its_request_to_who_cancelled(console_events, make_user):
    """Before: the console withdrew the request with nobody recorded, so it read "cancelled by the console"."""
    demo = await sync_to_async(make_user)("demo", password=None)
    run = await runner.start_run(tool="refund", args={}, user=demo)
    opened = await console_events.next("request.opened", run_id=run.pk)
    await runner.cancel_run(run.pk, user=demo)
    cancelled = await console_events.next("request.cancelled", run_id=run.pk)
    await finished(run.pk)

    # The frame every dashboard receives carries it, as does a later read.
    assert cancelled["request"]["decision"]["text"] == "Cancelled by demo"
    decision = await sync_to_async(decision_of)(opened["request_id"])
    assert (decision["outcome"], decision["by"], decision["text"]) == ("cancelled", "demo", "Cancelled by demo")
    # demo's act, done by the console for demo: "Who" names demo (not "system"), the payload says how.
    event = await AuditEvent.objects.aget(request_id=opened["request_id"], action="request.cancelled")
    assert (event.actor, event.actor_user_id) == ("demo", demo.pk)
    assert event.payload["cancelled_with_run_by"] == "demo"
    # And whoever tries to answer it now is told who.
    with pytest.raises(decisions.DecisionError) as late:
        await decisions.aresolve_request(opened["request_id"], ok=True)
    assert "already cancelled by demo" in late.value.message


async def test_a_declined_run_keeps_the_loop_rules_result_beside_the_words(console_events, make_user):
    alice = await sync_to_async(make_user)("alice", password=None)
    bob = await sync_to_async(make_user)("bob", password=None)
    run = await runner.start_run(tool="refund", args={"order": "A-7", "amount": 40}, user=alice)
    opened = await console_events.next("request.opened", run_id=run.pk)
    await decisions.aresolve_request(opened["request_id"], ok=False, reason="declined", comment="too large", user=bob)
    done = await finished(run.pk)
    # §10's exact prefix, then who declined and why (issue 36: the model reads the reason)
    assert done.result_output == (
        'declined/expired: Refund 40 EUR on order A-7? (declined by bob: "too large") '
        "Do not make the same call again; follow the reviewer's reason, or ask the user how to go on."
    )
    assert (await sync_to_async(decision_of)(opened["request_id"]))["text"] == "Declined by bob: too large"
