"""``/metrics`` through the real ``toolnexus_site.asgi.application`` (approvals/web/metrics.py), and the counters
it shows moving as requests are answered by each channel (approvals/telemetry/metrics.py).

The counters belong to the process, so each test reads them before and after what it does and checks what
moved. The output is parsed by ``prometheus_client.parser``, as Prometheus would read it.
"""

import asyncio
import ipaddress
import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
import websockets
from asgiref.sync import sync_to_async
from asgiref.testing import ApplicationCommunicator
from django.db import transaction
from django.test import AsyncClient
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families
from toolnexus import Request as WireRequest

from approvals.models import AuditEvent, Policy, Request, Run, RunStatus
from approvals.review import decisions
from approvals.runs import runner, services
from approvals.telemetry import metrics
from tests.support.api_client import logged_in, post_json
from tests.support.changes import recorded_without_notice
from tests.support.dashboard import async_waiting_request, dashboard_for, host_socket, waiting_request
from tests.support.live_console import ClientAt, poll, start
from tests.support.metrics import moved, parse, scrape, value
from tests.support.users import bearer
from toolnexus_site.asgi import application
from toolnexus_site.deployment import DeploymentConfigError, MetricsAccess, metrics_access

pytestmark = pytest.mark.django_db(transaction=True)

REPO = Path(__file__).resolve().parents[2]
TOKEN = "metrics-token-for-tests-0123456789"
POD_ADDRESS = b"10.42.0.17:8000"
LIVE_REVIEWER_PASSWORD = "live-Reviewer-pass-5521"  # tests/support/live_console.py's CREATE_USERS
DATABASE_GAUGES = {"console_requests_open", "console_requests_open_oldest_age_seconds", "console_runs"}


async def get_metrics(client="127.0.0.1", headers=(), method="GET"):
    """GET /metrics as a scraper at ``client`` would; returns (status, headers, body)."""
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": method,
        "path": "/metrics",
        "raw_path": b"/metrics",
        "query_string": b"",
        "headers": [(b"host", POD_ADDRESS), *headers],
        "client": [client, 50123],
        "server": ["10.42.0.17", 8000],
        "scheme": "http",
    }
    communicator = ApplicationCommunicator(application, scope)
    await communicator.send_input({"type": "http.request", "body": b""})
    start = await communicator.receive_output(10)
    body = await communicator.receive_output(10)
    await communicator.wait(10)
    return start["status"], dict(start["headers"]), body["body"]


@pytest.fixture
def allow(settings):
    """``allow(token, *networks)``: who may read /metrics, as CONSOLE_METRICS_TOKEN and CONSOLE_METRICS_ALLOW say."""

    def set_access(token="", *networks):
        settings.CONSOLE_METRICS = MetricsAccess(
            token=token, allow=tuple(ipaddress.ip_network(n, strict=False) for n in networks)
        )

    return set_access


ascrape = sync_to_async(scrape)


# -- who may read it ---------------------------------------------------------------------------------------


async def test_metrics_are_refused_without_the_token_and_outside_the_allow_list(allow):
    allow(TOKEN, "10.0.0.0/8")

    assert (await get_metrics(client="192.0.2.7"))[0] == 403
    status, headers, body = await get_metrics(client="192.0.2.7", headers=[(b"authorization", b"Bearer wrong-token")])
    assert status == 403
    assert headers[b"content-type"] == b"application/json"
    assert "CONSOLE_METRICS_TOKEN" in json.loads(body)["message"]
    assert (await get_metrics(client="192.0.2.7", headers=[(b"authorization", f"Basic {TOKEN}".encode())]))[0] == 403


async def test_the_token_or_an_allowed_address_reads_the_metrics_from_a_pod_address(allow, settings):
    allow(TOKEN, "10.0.0.0/8")
    settings.ALLOWED_HOSTS = ["console.example.com"]  # Django would refuse the pod's address: /metrics never reaches it
    settings.SECURE_SSL_REDIRECT = True

    by_token = await get_metrics(client="192.0.2.7", headers=[(b"authorization", f"Bearer {TOKEN}".encode())])
    by_address = await get_metrics(client="10.9.8.7")

    for status, headers, body in (by_token, by_address):
        assert status == 200, body
        assert headers[b"content-type"].startswith(b"text/plain; version=")
        samples, families = parse(body.decode())
        assert {"console_answers", "console_requests_open", "console_runs", "process_cpu_seconds"} <= families
        assert value(samples, "console_answers_total", channel="web", outcome="answered") >= 0


async def test_the_allow_list_sees_the_client_a_trusted_proxy_forwards(allow, settings):
    """The proxy's own address is allowed; the client it forwards for is not: that client is refused."""
    allow("", "10.0.0.5")
    settings.CONSOLE_TRUSTED_PROXIES = (ipaddress.ip_network("10.0.0.5"),)

    forwarded = [(b"x-forwarded-for", b"198.51.100.23")]
    assert (await get_metrics(client="10.0.0.5", headers=forwarded))[0] == 403
    assert (await get_metrics(client="10.0.0.5"))[0] == 200


async def test_with_nothing_configured_no_one_reads_them_and_other_methods_are_refused(allow):
    allow()
    assert (await get_metrics(client="127.0.0.1"))[0] == 403
    allow("", "127.0.0.1")
    assert (await get_metrics(client="127.0.0.1", method="POST"))[0] == 405
    status, _, body = await get_metrics(client="127.0.0.1", method="HEAD")
    assert (status, body) == (200, b"")


def test_development_allows_loopback_and_production_no_one_until_configured(tmp_path):
    development = metrics_access({}, development=True)
    assert development.token == ""
    assert [str(network) for network in development.allow] == ["127.0.0.0/8", "::1/128"]
    assert metrics_access({}, development=False) == MetricsAccess(token="", allow=())

    secret = tmp_path / "metrics-token"
    secret.write_text(TOKEN + "\n")
    configured = metrics_access(
        {"CONSOLE_METRICS_TOKEN_FILE": str(secret), "CONSOLE_METRICS_ALLOW": "10.0.0.0/8, 192.0.2.7"},
        development=False,
    )
    assert configured.token == TOKEN
    assert [str(network) for network in configured.allow] == ["10.0.0.0/8", "192.0.2.7/32"]
    # Set but empty in development: no one by address.
    assert metrics_access({"CONSOLE_METRICS_ALLOW": ""}, development=True).allow == ()


def test_a_bad_metrics_setting_says_what_to_change():
    with pytest.raises(DeploymentConfigError) as refused:
        metrics_access(
            {"CONSOLE_METRICS_ALLOW": "prometheus.internal", "CONSOLE_METRICS_TOKEN": "short"}, development=False
        )
    message = str(refused.value)
    assert "'prometheus.internal' is neither" in message
    assert "CONSOLE_METRICS_TOKEN is 5 characters long" in message
    assert message.endswith('docs/operations.md, "Metrics".')


# -- what moves --------------------------------------------------------------------------------------------


async def test_an_answer_on_a_console_pages_socket_counts_as_web(alice, bob):
    request = await async_waiting_request("web-1", starter=bob)
    async with dashboard_for(alice) as dashboard:
        before = await ascrape()
        await dashboard.send({"type": "answer", "request": request.pk, "ok": True, "ref": 1})
        await dashboard.next("answered", ref=1)
        after = await ascrape()

    changes = moved(before, after)
    assert changes[("console_answers_total", (("channel", "web"), ("outcome", "answered")))] == 1
    assert changes[("console_audit_events_total", (("action", "request.answered"),))] == 1
    assert changes[("console_request_decision_seconds_count", (("decided_by", "person"), ("outcome", "answered")))] == 1
    assert not [key for key in changes if key[0] == "console_answers_total" and ("channel", "web") not in key[1]]


async def test_an_answer_by_the_api_counts_as_api(alice, bob, issue_token):
    request = await async_waiting_request("api-1", starter=bob)
    secret = await sync_to_async(issue_token)(alice)
    before = await ascrape()
    response = await post_json(
        AsyncClient(),
        f"/api/v1/requests/{request.pk}/answer",
        {"ok": False, "reason": "declined"},
        headers=bearer(secret),
    )
    assert response.status_code == 200, response.content
    changes = moved(before, await ascrape())

    assert changes[("console_answers_total", (("channel", "api"), ("outcome", "declined")))] == 1
    assert changes[("console_request_decision_seconds_count", (("decided_by", "person"), ("outcome", "declined")))] == 1


async def test_a_bulk_answer_counts_each_request_as_bulk(alice, bob):
    for n in (1, 2, 3):
        await async_waiting_request(f"bulk-{n}", starter=bob)
    client = await logged_in(alice)
    before = await ascrape()
    response = await post_json(client, "/api/v1/requests/bulk", {"ok": True, "ids": ["bulk-1", "bulk-2", "bulk-3"]})
    assert response.status_code == 200, response.content
    changes = moved(before, await ascrape())

    assert changes[("console_answers_total", (("channel", "bulk"), ("outcome", "answered")))] == 3


async def test_a_quorums_recorded_approval_keeps_its_channel(alice, bob, make_user):
    await sync_to_async(Policy.objects.create)(name="two", tool_pattern="refund", quorum=2)
    request = await async_waiting_request("quorum-1", starter=await sync_to_async(make_user)("carol"))
    client = await logged_in(alice)
    before = await ascrape()
    response = await post_json(client, f"/api/v1/requests/{request.pk}/answer", {"ok": True})
    assert response.status_code == 202, response.content
    changes = moved(before, await ascrape())

    assert changes[("console_answers_total", (("channel", "api"), ("outcome", "approval_recorded")))] == 1
    assert not [key for key in changes if key[0].startswith("console_request_decision_seconds")]  # still open


def test_an_expiry_counts_as_a_timeout_with_bounded_labels(bob):
    waiting_request("expires-1", starter=bob)  # refund: a tool of the console's toolkit
    decisions.open_host_request(
        WireRequest(id="host-1", kind="a-host-word", prompt="Go?"), user=bob, host="ci", tool="their-own-tool"
    )
    before = scrape()
    assert decisions.expire_request("expires-1", run_timed_out=True)
    assert decisions.expire_request("host-1", run_timed_out=True)
    changes = moved(before, scrape())

    assert changes[("console_requests_expired_total", (("kind", "approval"), ("tool", "refund")))] == 1
    assert changes[("console_requests_expired_total", (("kind", "other"), ("tool", "other")))] == 1
    assert changes[("console_request_decision_seconds_count", (("decided_by", "timeout"), ("outcome", "expired")))] == 2
    assert not [key for key in changes if key[0] == "console_answers_total"]  # nobody answered


def test_an_approval_with_its_defaults_on_expiry_is_an_answer_decided_by_the_timeout(bob):
    Policy.objects.create(name="auto", tool_pattern="refund", on_timeout="apply_defaults")
    waiting_request("defaults-1", starter=bob)
    now = timezone.now()  # opened two hours ago (defaults need people to have had the time), due a minute ago
    Request.objects.filter(pk="defaults-1").update(
        created_at=now - timedelta(hours=2), expires_at=now - timedelta(minutes=1)
    )
    before = scrape()
    assert decisions.expire_request("defaults-1")
    changes = moved(before, scrape())

    assert changes[("console_answers_total", (("channel", "console"), ("outcome", "answered")))] == 1
    assert (
        changes[("console_request_decision_seconds_count", (("decided_by", "timeout"), ("outcome", "answered")))] == 1
    )
    assert not [key for key in changes if key[0] == "console_requests_expired_total"]


def test_an_answer_rolled_back_counts_nothing(alice, bob):
    """Counted after the commit only: the door's transaction rolled back around it leaves every counter alone."""
    waiting_request("rolled-back", starter=bob)
    before = scrape()
    with pytest.raises(RuntimeError), transaction.atomic():
        decisions.resolve_request("rolled-back", ok=True, user=alice, via="api")
        raise RuntimeError("the caller's transaction fails after the answer")

    assert moved(before, scrape()) == {}


def test_open_requests_are_counted_by_kind_and_policy_with_the_oldests_age(bob):
    Policy.objects.create(name="refunds", tool_pattern="refund")
    waiting_request("open-1", starter=bob)
    waiting_request("open-2", starter=bob)
    schema = {"type": "object", "properties": {"env": {"type": "string"}}, "required": ["env"]}
    waiting_request("open-3", starter=bob, tool="deploy", kind="input", data={"schema": schema})
    decisions.open_host_request(WireRequest(id="host-2", kind="a-host-word", prompt="Go?"), user=bob, tool="x-1")
    decisions.open_host_request(WireRequest(id="host-3", kind="another-word", prompt="Go?"), user=bob, tool="x-2")
    samples = scrape()

    assert value(samples, "console_requests_open", kind="approval", policy="refunds") == 2
    assert value(samples, "console_requests_open", kind="input", policy="default") == 1
    assert value(samples, "console_requests_open", kind="other", policy="default") == 2  # hosts' own words
    assert value(samples, "console_requests_open_oldest_age_seconds", kind="approval", policy="refunds") >= 0
    assert value(samples, "console_runs", status="waiting") + value(samples, "console_runs", status="running") == 3
    assert {key[1][0][1] for key in samples if key[0] == "console_runs"} == {"queued", "running", "waiting"}
    assert value(samples, "console_database_gauges_ok") == 1


def test_a_finished_run_is_counted_as_it_finishes_and_leaves_the_active_gauge():
    run = Run.objects.create(tool="refund", status=RunStatus.RUNNING, owner=runner.PROCESS_ID)
    before = scrape()
    assert services.finish_run(run.pk, RunStatus.SUCCEEDED, "refunded", False)
    changes = moved(before, scrape())

    assert changes == {
        ("console_runs_finished_total", (("status", "succeeded"),)): 1,
        ("console_runs", (("status", "running"),)): -1,
        ("console_audit_events_total", (("action", "run.finished"),)): 1,
    }


async def test_connected_sockets_and_a_pages_resync_are_counted(alice, issue_token):
    secret = await sync_to_async(issue_token)(alice)
    before = await ascrape()
    async with dashboard_for(alice) as dashboard, host_socket(secret) as (accepted, _, _):
        assert accepted
        during = await ascrape()
        await dashboard.resync()
        resynced = await ascrape()
    async with host_socket("tnx_not-a-token") as (accepted, code, _):
        assert (accepted, code) == (False, 4401)
        refused = await ascrape()
    after = await ascrape()

    assert moved(before, during) == {
        ("console_sockets_connected", (("kind", "console"),)): 1,
        ("console_sockets_connected", (("kind", "host"),)): 1,
    }
    assert moved(during, resynced) == {("console_socket_resyncs_total", (("cause", "asked"), ("kind", "console"))): 1}
    assert moved(resynced, refused) == {  # each counted out as it closed
        ("console_sockets_connected", (("kind", "console"),)): -1,
        ("console_sockets_connected", (("kind", "host"),)): -1,
    }
    assert moved(refused, after) == {}  # a refused handshake was never counted in


async def test_a_console_page_that_missed_a_change_reads_it_back_and_that_counts_as_a_gap(alice, bob):
    request = await async_waiting_request("gap-1", starter=bob)
    async with dashboard_for(alice) as dashboard:
        before = await ascrape()
        # Claimed in another console process, its notice lost: the next change's number leaves a gap.
        await recorded_without_notice(
            Request.objects.filter(pk=request.pk).update,
            {},
            action=AuditEvent.Action.REQUEST_CLAIMED,
            request_id=request.pk,
        )
        await async_waiting_request("gap-2", starter=bob)
        await dashboard.next("event", action="request.opened")
        after = await ascrape()

    assert moved(before, after)[("console_socket_resyncs_total", (("cause", "gap"), ("kind", "console")))] == 1


def test_every_label_takes_a_bounded_set_of_values(bob):
    """Requests from hosts naming tools and kinds of their own, many of them: the label values stay few."""
    for n in range(30):
        decisions.open_host_request(
            WireRequest(id=f"wide-{n}", kind=f"kind-{n}", prompt="Go?"), user=bob, host=f"host-{n}", tool=f"tool-{n}"
        )
        decisions.expire_request(f"wide-{n}", run_timed_out=True)
    samples = scrape()

    for (name, labels), _ in samples.items():
        for label, label_value in labels:
            assert not label_value.startswith(("kind-", "tool-", "host-", "wide-")), (name, label, label_value)
    assert value(samples, "console_requests_expired_total", kind="other", tool="other") >= 30


async def test_a_live_console_counts_an_answer_sent_over_its_pages_socket(live):
    """A real daphne in another process, in development (loopback may read /metrics with nothing set): a
    reviewer answers over the console page's socket, and that process's /metrics counts it as web."""
    run_id = start(live, {"tool": "refund", "args": {"order": "A-32", "amount": 12}})
    opened = poll(live, "/api/v1/requests?status=open", lambda body: any(r["run"] == run_id for r in body["requests"]))
    request_id = next(r["id"] for r in opened["requests"] if r["run"] == run_id)
    page = ClientAt(live, "127.0.0.1")
    page.log_in("reviewer", LIVE_REVIEWER_PASSWORD)
    cookie = "; ".join(f"{name}={value}" for name, value in page.cookies.items())
    before = live_metrics(live)
    socket_url = live.base_url.replace("http://", "ws://") + "/ws/console/"
    async with websockets.connect(
        socket_url, additional_headers={"Cookie": cookie, "Origin": live.base_url}, open_timeout=10
    ) as socket:
        await socket.send(json.dumps({"type": "answer", "request": request_id, "ok": True, "ref": "metrics"}))
        while (frame := json.loads(await asyncio.wait_for(socket.recv(), 10))).get("ref") != "metrics":
            pass
        assert frame["type"] == "answered", frame
    poll(live, f"/api/v1/runs/{run_id}", lambda run: run["status"] == "succeeded", what="the run's finish")
    after = live_metrics(live)

    changes = moved(before, after)
    assert changes[("console_answers_total", (("channel", "web"), ("outcome", "answered")))] == 1
    assert changes[("console_runs_finished_total", (("status", "succeeded"),))] == 1


def live_metrics(console):
    status, _, text = ClientAt(console, "127.0.0.1").request("GET", "/metrics")
    assert status == 200, text
    return parse(text)[0]


# -- the docs' dashboard -----------------------------------------------------------------------------------


def stored_names():
    """Every series name Prometheus stores from a scrape: a counter's _total, a histogram's _bucket, _sum and _count."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
    text = metrics.exposition().decode()
    return {
        family.name + suffix
        for family in text_string_to_metric_families(text)
        for suffix in suffixes.get(family.type, ("",))
    }


def test_the_grafana_dashboard_and_the_docs_queries_use_only_metrics_that_exist():
    exposed = stored_names()
    dashboard = json.loads((REPO / "deploy" / "grafana-dashboard.json").read_text())
    expressions = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    operations = (REPO / "docs" / "operations.md").read_text()
    metrics_section = operations[operations.index("\n## Metrics") :]
    expressions += [block for block in metrics_section.split("```promql")[1:]]
    assert len(expressions) >= 6
    for expression in (block.split("```")[0] for block in expressions):
        used = set(re.findall(r"\bconsole_[a-z_]+", expression))
        assert used, expression
        assert used <= exposed, (expression, used - exposed)
        # The same in every process: max. Added up across processes: sum.
        if used & DATABASE_GAUGES:
            assert re.search(r"\bmax\b", expression), expression
        if any(name.endswith(("_total", "_bucket")) for name in used):
            assert re.search(r"\bsum\b", expression), expression
