"""``/healthz`` and ``/readyz`` through the real ``toolnexus_site.asgi.application`` (approvals/web/health.py).

Probes come from a kubelet or a container engine: any Host header (a pod address), plain http, no
login. Readiness with the database or Redis really stopped is in tests/cluster/test_graceful_stop.py.
"""

import asyncio
import json

import pytest
from channels.db import database_sync_to_async
from channels.testing import HttpCommunicator
from django.utils import timezone

from approvals.models import ConsoleProcess
from approvals.runs import runner, shutdown
from tests.support.statements import counting_statements
from toolnexus_site.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)

POD_ADDRESS = b"10.42.0.17:8000"


async def probe(path, method="GET", host=POD_ADDRESS):
    communicator = HttpCommunicator(application, method, path, headers=[(b"host", host)])
    response = await communicator.get_response(timeout=10)
    headers = dict(response["headers"])
    body = json.loads(response["body"]) if response["body"] else None
    return response["status"], headers, body


@pytest.fixture
def production_like(settings):
    """A console that redirects http to https and serves one host name only."""
    settings.SECURE_SSL_REDIRECT = True
    settings.ALLOWED_HOSTS = ["console.example.com"]
    settings.DEBUG = False


@pytest.fixture(autouse=True)
def not_stopping(monkeypatch):
    monkeypatch.setattr(shutdown, "_stopping_since", None)


async def test_healthz_answers_a_pod_address_over_plain_http_under_the_https_redirect(production_like):
    status, headers, body = await probe("/healthz")

    assert (status, body) == (200, {"status": "ok"})
    assert headers[b"content-type"] == b"application/json"
    assert headers[b"cache-control"] == b"no-store"
    # Django itself would refuse that Host (and redirect plain http): the probes never reach it.
    refused, _, _ = await probe("/api/v1/openapi.json")
    assert refused == 400


async def test_readyz_is_ready_once_the_supervisor_beats_and_names_each_check(production_like):
    await runner.ensure_started()

    status, _, body = await probe("/readyz")

    assert status == 200, body
    assert body["status"] == "ok"
    assert set(body["checks"]) == {"database", "channel_layer", "heartbeat", "shutdown"}
    assert all(check["ok"] for check in body["checks"].values()), body
    assert body["checks"]["heartbeat"]["age_seconds"] < 10


async def test_readyz_is_not_ready_before_the_supervisor_starts():
    status, _, body = await probe("/readyz")

    assert status == 503
    assert body["status"] == "unavailable"
    assert body["checks"]["heartbeat"] == {"ok": False, "error": "the run supervisor is not running"}
    assert body["checks"]["database"]["ok"] and body["checks"]["channel_layer"]["ok"]


async def test_readyz_writes_nothing(settings):
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "HEARTBEAT_SECONDS": 60}  # no beat during the probes
    await runner.ensure_started()
    await probe("/readyz")  # connections open, caches filled

    with counting_statements() as counter:
        for _ in range(20):
            status, _, _ = await probe("/readyz")
            assert status == 200

    statements = counter.taken()
    assert statements, "the database check reads something"
    assert counter.write_transactions() == [], [s.sql for s in statements]


async def test_a_beat_older_than_the_heartbeat_timeout_is_not_ready(settings):
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "HEARTBEAT_SECONDS": 60}
    await runner.ensure_started()
    stale = timezone.now() - timezone.timedelta(seconds=settings.TOOLNEXUS["HEARTBEAT_TIMEOUT_SECONDS"] + 1)
    await ConsoleProcess.objects.filter(pk=runner.PROCESS_ID).aupdate(last_beat=stale)

    status, _, body = await probe("/readyz")

    assert status == 503
    assert body["checks"]["heartbeat"]["ok"] is False
    assert "last beat" in body["checks"]["heartbeat"]["error"]


async def test_readyz_turns_false_once_the_stop_begins_and_healthz_stays_ok():
    await runner.ensure_started()
    shutdown.begin()

    status, _, body = await probe("/readyz")

    assert status == 503
    assert body["checks"]["shutdown"]["ok"] is False
    assert "shutting down" in body["checks"]["shutdown"]["error"]
    assert (await probe("/healthz"))[:1] == (200,)


async def test_a_database_read_stuck_behind_a_long_write_is_reported_within_the_timeout(settings):
    """On SQLite the read queues on the one database thread: a probe waits for it at most the timeout."""
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "READINESS_TIMEOUT_SECONDS": 0.2}
    await runner.ensure_started()
    release = asyncio.Event()
    loop = asyncio.get_running_loop()

    def a_long_write():
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result(timeout=10)

    hogging = asyncio.ensure_future(database_sync_to_async(a_long_write)())
    try:
        started = loop.time()
        answers = await asyncio.gather(*(probe("/readyz") for _ in range(3)))
        took = loop.time() - started
    finally:
        release.set()
        await hogging

    assert took < 1.0
    for status, _, body in answers:
        assert status == 503
        assert body["checks"]["database"] == {"ok": False, "error": "no answer within 0.2s"}
    assert (await probe("/readyz"))[0] == 200  # the one read left queued has finished: ready again


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
async def test_probes_take_only_get_and_head(method):
    status, headers, body = await probe("/healthz", method=method)

    assert status == 405
    assert headers[b"allow"] == b"GET, HEAD"
    assert body["error"] == "method_not_allowed"


async def test_head_answers_the_status_without_a_body():
    status, headers, body = await probe("/healthz", method="HEAD")

    assert (status, body) == (200, None)
    assert int(headers[b"content-length"]) == len(b'{"status": "ok"}')
