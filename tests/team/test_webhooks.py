"""Policy webhooks, against a real HTTP server on 127.0.0.1: the body, retries with backoff, timeouts, never blocking."""

import json
import threading
import time
from datetime import UTC, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from approvals.models import AuditEvent, Policy, Request
from approvals.moments import readable_time
from approvals.review import deadlines, decisions
from approvals.runs import runner
from approvals.team import policies, webhooks
from tests.support.dashboard import async_waiting_request, waiting_request
from tests.support.metrics import moved, scrape

pytestmark = pytest.mark.django_db(transaction=True)


class Receiver:
    """A webhook receiver: records each POST; ``plan`` says how to answer the next ones (status or "slow")."""

    def __init__(self):
        self.bodies = []
        self.headers = []
        self.times = []
        self.plan = []
        self.slow_seconds = 0.0
        self.got = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                step = receiver.plan.pop(0) if receiver.plan else 200
                if step == "slow":
                    time.sleep(receiver.slow_seconds)
                    step = 200
                with receiver.got:
                    receiver.bodies.append(json.loads(body))
                    receiver.headers.append(dict(self.headers))
                    receiver.times.append(time.monotonic())
                    receiver.got.notify_all()
                self.send_response(step)
                if step in (301, 302, 307):
                    self.send_header("Location", "http://127.0.0.1:9/elsewhere")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def wait_for(self, count, timeout=5.0):
        with self.got:
            assert self.got.wait_for(lambda: len(self.bodies) >= count, timeout), self.bodies
        return self.bodies

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


# -- delivery -------------------------------------------------------------------------------------


def test_a_delivery_posts_the_body_as_json(receiver):
    outcome = webhooks.deliver(receiver.url, {"text": "hello"}, attempts=1)
    assert (outcome.ok, outcome.attempts, outcome.status) == (True, 1, 200)
    assert receiver.bodies == [{"text": "hello"}]
    assert receiver.headers[0]["Content-Type"] == "application/json"


def test_server_errors_are_retried_with_backoff(receiver):
    receiver.plan = [500, 503]
    outcome = webhooks.deliver(receiver.url, {"text": "again"}, attempts=3, backoff=0.1)
    assert (outcome.ok, outcome.attempts) == (True, 3)
    assert len(receiver.bodies) == 3
    first_gap, second_gap = receiver.times[1] - receiver.times[0], receiver.times[2] - receiver.times[1]
    assert first_gap >= 0.09 and second_gap >= 0.19  # 0.1 s, then doubled


def test_retries_are_bounded(receiver):
    receiver.plan = [500] * 10
    outcome = webhooks.deliver(receiver.url, {"text": "never"}, attempts=3, backoff=0.01)
    assert (outcome.ok, outcome.attempts, outcome.status, outcome.error) == (False, 3, 500, "HTTP 500")
    assert len(receiver.bodies) == 3


def test_a_refusal_is_not_retried_but_too_many_requests_is(receiver):
    receiver.plan = [400]
    assert webhooks.deliver(receiver.url, {}, attempts=3, backoff=0.01).attempts == 1
    receiver.plan = [429]
    assert webhooks.deliver(receiver.url, {}, attempts=3, backoff=0.01).ok


def test_a_slow_receiver_times_out(receiver):
    receiver.plan = ["slow", "slow"]
    receiver.slow_seconds = 1.0
    started = time.monotonic()
    outcome = webhooks.deliver(receiver.url, {}, attempts=2, timeout=0.2, backoff=0.01)
    assert not outcome.ok and outcome.attempts == 2
    assert time.monotonic() - started < 1.0


def test_a_redirect_is_not_followed(receiver):
    receiver.plan = [302]
    outcome = webhooks.deliver(receiver.url, {}, attempts=1)
    assert not outcome.ok and outcome.status == 302
    assert len(receiver.bodies) == 1


def test_nothing_but_http_is_posted_to():
    outcome = webhooks.deliver("file:///etc/passwd", {})
    assert not outcome.ok and outcome.attempts == 0


def test_deliveries_and_failures_are_counted_once_each_whatever_the_attempts(receiver):
    before = scrape()
    receiver.plan = [500, 200, 500, 500]
    assert webhooks.deliver(receiver.url, {}, attempts=2, backoff=0.01).ok
    assert not webhooks.deliver(receiver.url, {}, attempts=2, backoff=0.01).ok
    assert not webhooks.deliver("file:///etc/passwd", {}).ok

    assert moved(before, scrape()) == {
        ("console_webhook_deliveries_total", (("result", "delivered"),)): 1,
        ("console_webhook_deliveries_total", (("result", "failed"),)): 2,
    }


def test_a_prompt_cannot_ping_a_chat_channel():
    assert webhooks._slack_escape("<!channel> & <http://x|y>") == "&lt;!channel&gt; &amp; &lt;http://x|y&gt;"


# -- a policy's webhook ----------------------------------------------------------------------------


async def test_a_policys_webhook_hears_a_request_open_and_resolve(receiver, make_user, settings):
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "PUBLIC_URL": "https://console.example.com"}
    alice, bob = [await sync_to_async(make_user)(name) for name in ("alice", "bob")]
    await Policy.objects.acreate(name="refunds", tool_pattern="refund*", webhook_url=receiver.url)
    request = await async_waiting_request("hook-1", starter=alice, prompt="Refund <!channel> 12 EUR?")
    opened = receiver.wait_for(1)[0]
    assert opened["event"] == "request.opened" and opened["policy"] == "refunds"
    assert opened["text"] == (
        f"approval request from refund is waiting: Refund &lt;!channel&gt; 12 EUR? "
        f"<https://console.example.com/runs/{request.run_id}/|open>"
    )
    assert opened["request"]["id"] == "hook-1" and opened["request"]["status"] == "open"
    assert opened["answer"] is None

    await decisions.aresolve_request("hook-1", ok=True, comment="fine", user=bob)
    resolved = receiver.wait_for(2)[1]
    assert resolved["event"] == "request.answered" and resolved["actor"] == "bob"
    assert resolved["text"].startswith("approval request from refund was approved by bob: ")
    assert resolved["answer"] == {"ok": True, "reason": None, "comment": "fine"}
    assert resolved["seq"] > opened["seq"]


async def test_a_webhook_hears_the_reason_and_the_reply_of_a_decline(receiver, make_user):
    """Issue 36: a decline's reject option and a reply are in the text and in ``answer``; a plain one is as it was."""
    alice, bob = [await sync_to_async(make_user)(name) for name in ("alice", "bob")]
    too_large = {"key": "too_large", "label": "Too large", "text": "Ask a manager."}
    await Policy.objects.acreate(
        name="refunds", tool_pattern="refund*", webhook_url=receiver.url, reject_options=[too_large]
    )
    for request_id in ("hook-option", "hook-reply", "hook-plain"):
        # The run's tool returned it (resumable): a request asked from inside a call takes no reply.
        await async_waiting_request(request_id, starter=alice, prompt="Refund 12 EUR?", resumable=True)
    await decisions.aresolve_request("hook-option", ok=False, option="too_large", comment="no", user=bob)
    await decisions.aresolve_request("hook-reply", ok=False, response="respond", message="Use a voucher.", user=bob)
    await decisions.aresolve_request("hook-plain", ok=False, user=bob)

    resolved = {body["request"]["id"]: body for body in receiver.wait_for(6)[3:]}
    assert resolved["hook-option"]["text"].startswith("approval request from refund was declined by bob (Too large): ")
    assert resolved["hook-option"]["answer"] == {
        "ok": False,
        "reason": "declined",
        "comment": "no",
        "option": too_large,
    }
    assert resolved["hook-reply"]["text"].startswith(
        "approval request from refund was declined by bob, who answered instead of running the tool: "
    )
    assert resolved["hook-reply"]["answer"] == {
        "ok": False,
        "reason": "declined",
        "comment": "",
        "response": "respond",
        "message": "Use a voucher.",
    }
    assert resolved["hook-plain"]["answer"] == {"ok": False, "reason": "declined", "comment": ""}


async def test_a_policys_webhook_hears_an_escalation_and_the_expiry_after_it(receiver, make_user):
    alice, bob = [await sync_to_async(make_user)(name) for name in ("alice", "bob")]
    policy = await Policy.objects.acreate(
        name="refunds", tool_pattern="refund*", webhook_url=receiver.url, on_timeout="escalate", max_escalations=1
    )
    await policy.fallback_users.aadd(bob)
    await async_waiting_request("hook-esc", starter=alice, prompt="Refund 12 EUR?")
    receiver.wait_for(1)
    await Request.objects.filter(pk="hook-esc").aupdate(expires_at=timezone.now() - timedelta(minutes=1))
    await decisions.aexpire_request("hook-esc")
    escalated = receiver.wait_for(2)[1]
    assert escalated["event"] == "request.escalated" and escalated["decided_by"] is None
    assert escalated["text"].startswith("approval request from refund passed its deadline and is escalated to bob: ")
    assert (escalated["escalation"]["escalations"], escalated["escalation"]["to"]) == (1, ["bob"])
    assert escalated["escalation"]["expiresAt"] == escalated["request"]["expiresAt"]

    await Request.objects.filter(pk="hook-esc").aupdate(expires_at=timezone.now() - timedelta(minutes=1))
    await decisions.aexpire_request("hook-esc")
    expired = receiver.wait_for(3)[2]
    assert (expired["event"], expired["decided_by"]) == ("request.expired", "timeout")
    assert expired["text"].startswith("approval request from refund expired, nobody answered: ")


async def test_a_slow_webhook_never_holds_up_the_answer(receiver, make_user):
    alice, bob = [await sync_to_async(make_user)(name) for name in ("alice", "bob")]
    await Policy.objects.acreate(name="refunds", tool_pattern="refund*", webhook_url=receiver.url)
    receiver.plan = ["slow", "slow"]
    receiver.slow_seconds = 1.5
    await async_waiting_request("hook-slow", starter=alice)
    started = time.monotonic()
    await decisions.aresolve_request("hook-slow", ok=True, user=bob)
    assert time.monotonic() - started < 0.5
    receiver.wait_for(2, timeout=6)
    assert await sync_to_async(webhooks.wait_for_deliveries)(timeout=6)


async def test_requests_of_a_policy_without_a_webhook_send_nothing(receiver, make_user):
    alice = await sync_to_async(make_user)("alice")
    await Policy.objects.acreate(name="quiet", tool_pattern="refund*")
    await async_waiting_request("hook-quiet", starter=alice)
    assert await sync_to_async(webhooks.wait_for_deliveries)(timeout=2)
    assert receiver.bodies == []


# -- reminders before a deadline (review/deadlines.py) ---------------------------------------------------------


def _in_minutes(minutes):
    moment = timezone.now() + timedelta(minutes=minutes)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _opened_an_hour_ago(request_id):
    Request.objects.filter(pk=request_id).update(created_at=timezone.now() - timedelta(hours=1))


def _reminders(request_id):
    return list(
        AuditEvent.objects.filter(request_id=request_id, action="request.reminded").values_list("actor", "payload")
    )


def test_a_reminder_goes_once_per_deadline_and_again_after_an_extension(receiver, make_user):
    alice = make_user("alice")
    Policy.objects.create(name="refunds", tool_pattern="refund*", webhook_url=receiver.url, remind_minutes_before=10)
    request = waiting_request("rem-1", starter=alice, prompt="Refund 12 EUR?", expires=_in_minutes(5))
    _opened_an_hour_ago("rem-1")
    receiver.wait_for(1)
    assert deadlines.remind_due_requests() is None
    assert deadlines.remind_due_requests() is None  # the timer again, or a second process: already reminded
    assert not deadlines.remind("rem-1", request.expires_at, 10)
    assert webhooks.wait_for_deliveries()
    assert [body["event"] for body in receiver.bodies] == ["request.opened", "request.reminded"]
    reminded = receiver.bodies[1]
    assert reminded["text"] == (
        f"Reminder: approval request from refund is due in 10 min, at {readable_time(request.expires_at)}: Refund 12 EUR?"
    )
    assert reminded["request"]["expiresAt"] == request.expires_at_wire and reminded["actor"] == "system"

    moved = deadlines.extend_request("rem-1", user=alice, minutes=1)  # a new deadline, still within 10 minutes
    deadlines.remind_due_requests()
    deadlines.remind_due_requests()
    assert webhooks.wait_for_deliveries()
    assert [body["event"] for body in receiver.bodies] == ["request.opened", "request.reminded", "request.reminded"]
    assert receiver.bodies[2]["request"]["expiresAt"] == moved.expires_at_wire
    assert _reminders("rem-1") == [
        ("system", {"deadline": request.expires_at_wire, "minutes_before": 10}),
        ("system", {"deadline": moved.expires_at_wire, "minutes_before": 10}),
    ]


def test_a_reminder_waits_for_its_lead_time_and_says_when(receiver, make_user):
    Policy.objects.create(name="refunds", tool_pattern="refund*", webhook_url=receiver.url, remind_minutes_before=10)
    waiting_request("rem-2", starter=make_user("alice"), expires=_in_minutes(15))
    next_reminder = deadlines.remind_due_requests()
    assert next_reminder is not None and 4 * 60 < next_reminder <= 5 * 60
    assert _reminders("rem-2") == []


def test_no_reminder_for_a_request_opened_inside_the_lead_time_or_without_one(receiver, make_user):
    alice = make_user("alice")
    Policy.objects.create(name="refunds", tool_pattern="refund*", webhook_url=receiver.url, remind_minutes_before=10)
    waiting_request("rem-3", starter=alice, expires=_in_minutes(5))  # its opening was the notice
    waiting_request("rem-4", starter=alice, tool="deploy", expires=_in_minutes(5))  # the default policy: no reminder
    _opened_an_hour_ago("rem-4")
    deadlines.remind_due_requests()
    assert _reminders("rem-3") == _reminders("rem-4") == []


def test_a_settings_policy_may_remind_and_a_bad_lead_time_is_refused(settings):
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "POLICIES": [{"tool": "refund*", "remind_minutes_before": 15}]}
    assert policies.rule_for("refund", "approval").remind_minutes_before == 15
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "POLICIES": [{"tool": "refund*", "remind_minutes_before": 0}]}
    with pytest.raises(ImproperlyConfigured, match="remind_minutes_before"):
        policies.settings_rules()


async def test_the_consoles_own_timer_reminds_and_every_dashboard_hears(receiver, make_user, console_events):
    alice = await sync_to_async(make_user)("alice")
    await Policy.objects.acreate(
        name="refunds", tool_pattern="refund*", webhook_url=receiver.url, remind_minutes_before=1
    )
    await runner.ensure_started()
    # Due a second after it opens: no dashboard and no call, only the console's timer sends it.
    await async_waiting_request("rem-5", starter=alice, expires=_in_minutes(1 + 1 / 60))
    frame = await console_events.next("request.reminded", timeout=runner.EXPIRY_CHECK_SECONDS + 3)
    assert frame["request_id"] == "rem-5" and frame["request"]["deadline"]["reminded"] is True
    assert frame["words"] == "Answerers reminded 1 min before the deadline"
    assert [body["event"] for body in receiver.wait_for(2)] == ["request.opened", "request.reminded"]
