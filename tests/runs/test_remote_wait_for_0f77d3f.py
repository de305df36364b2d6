"""RemoteWaitFor as it was at commit 0f77d3f, before the API was declared with django-ninja, against today's console.

Hosts run copies of console_remote they took at some commit: the API must keep every URL, body, status and
error body such a copy relies on. ``fixtures/console_remote_0f77d3f.py`` is that commit's file, byte for byte
(``git show 0f77d3f:console_remote/__init__.py``), loaded here under its own name, beside today's package.
"""

import asyncio
import importlib.util
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from toolnexus import Request

from tests.support.live_console import REPO
from tests.support.signatures import verified

PROCESS_DEADLINE = 60  # only ever reached when a test is about to fail
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "console_remote_0f77d3f.py"


def _load_the_old_client():
    spec = importlib.util.spec_from_file_location("console_remote_0f77d3f", FIXTURE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


old = _load_the_old_client()


def in_a_moment(seconds):
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def call(live, method, path, body=None, token=None):
    return await asyncio.to_thread(live.call, method, path, body, token=token)


async def opened_and_waiting(live, request_id, **client_options):
    """The old client's wait for a new request, as a task, once the console has stored the request."""
    opened = asyncio.Event()
    wait_for = old.RemoteWaitFor(
        live.base_url, live.host_token, poll_seconds=20, on_open=lambda stored: opened.set(), **client_options
    )
    request = Request(id=request_id, kind="approval", prompt=f"May {request_id} go ahead?", data={"ticket": 7})
    waiting = asyncio.ensure_future(wait_for(request, tool="deploy", args={"service": "web"}))
    await asyncio.wait_for(opened.wait(), PROCESS_DEADLINE)
    return waiting


def test_the_fixture_is_the_file_at_0f77d3f():
    at_the_commit = subprocess.run(
        ["git", "show", "0f77d3f:console_remote/__init__.py"], cwd=REPO, capture_output=True, check=True
    ).stdout
    assert FIXTURE.read_bytes() == at_the_commit


async def test_an_approval_reaches_the_old_client(live):
    waiting = await opened_and_waiting(live, "old-client-approve", host="old-host")
    status, stored = await call(live, "GET", "/api/v1/requests/old-client-approve")
    assert (status, stored["host"], stored["tool"], stored["args"]) == (200, "old-host", "deploy", {"service": "web"})
    status, _ = await call(
        live, "POST", "/api/v1/requests/old-client-approve/answer", {"ok": True, "data": {"comment": "go"}}
    )
    assert status == 200
    answer = await asyncio.wait_for(waiting, PROCESS_DEADLINE)
    assert (answer.id, answer.ok, answer.data, answer.reason) == ("old-client-approve", True, {"comment": "go"}, None)


async def test_a_decline_reaches_the_old_client(live):
    waiting = await opened_and_waiting(live, "old-client-decline")
    status, _ = await call(
        live, "POST", "/api/v1/requests/old-client-decline/answer", {"ok": False, "reason": "declined"}
    )
    assert status == 200
    answer = await asyncio.wait_for(waiting, PROCESS_DEADLINE)
    assert (answer.ok, answer.reason) == (False, "declined")


async def test_the_old_client_cancelled_withdraws_its_request(live):
    waiting = await opened_and_waiting(live, "old-client-cancel")
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    status, answer = await call(live, "GET", "/api/v1/requests/old-client-cancel/answer")
    assert (status, verified(answer)) == (200, {"id": "old-client-cancel", "ok": False, "reason": "cancelled"})


async def test_the_old_client_out_of_patience_withdraws_and_returns_the_consoles_record(live):
    wait_for = old.RemoteWaitFor(live.base_url, live.host_token, poll_seconds=20, timeout=0.5)
    answer = await wait_for(Request(id="old-client-patience", kind="approval", prompt="Anyone?"))
    assert (answer.ok, answer.reason) == (False, "cancelled")


async def test_an_expiry_reaches_the_old_client(live):
    wait_for = old.RemoteWaitFor(live.base_url, live.host_token, poll_seconds=20)
    started = time.monotonic()
    request = Request(id="old-client-expiry", kind="approval", prompt="Quick?", expiresAt=in_a_moment(1.0))
    answer = await asyncio.wait_for(wait_for(request), PROCESS_DEADLINE)
    assert (answer.id, answer.ok, answer.reason) == ("old-client-expiry", False, "expired")
    assert time.monotonic() - started < 10  # the console's expiry timer resolved it, not the client's grace


async def test_the_consoles_refusals_reach_the_old_client_as_it_reads_them(live):
    with pytest.raises(old.RemoteAuthError) as refused:
        await old.RemoteWaitFor(live.base_url, "not-a-token", attempts=1)(Request(id="x", kind="approval", prompt="?"))
    assert (refused.value.status, refused.value.error) == (401, "invalid_token")
    with pytest.raises(old.RemoteRequestError) as refused:
        await old.RemoteWaitFor(live.base_url, live.host_token)(Request(id="has space", kind="approval", prompt="?"))
    assert (refused.value.status, refused.value.error) == (400, "bad_request")
    assert "'id'" in refused.value.message
