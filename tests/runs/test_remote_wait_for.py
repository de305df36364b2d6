"""RemoteWaitFor against a real console in another process (daphne, its own SQLite).

The agent of the first test runs in a third process: a plain Python script that
imports ``approvals.remote`` without Django, as any host would. The others
await RemoteWaitFor in this test process, which has no console running in it:
everything they see comes over HTTP from the daphne process.
"""

import asyncio
import json
import sys
import textwrap
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from toolnexus import Request

from approvals.remote import (
    RemoteAuthError,
    RemoteRequestError,
    RemoteUnreachableError,
    RemoteWaitFor,
    RemoteWaitForError,
)
from tests.support.live_console import REPO, free_port, manage
from tests.support.signatures import verified

PROCESS_DEADLINE = 60  # only ever reached when a test is about to fail

AGENT_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    import toolnexus
    from toolnexus import define_tool, pending
    from approvals.remote import RemoteWaitFor

    assert not any(name == "django" or name.startswith("django.") for name in sys.modules), "imported Django"
    base_url, token = sys.argv[1], sys.argv[2]

    async def publish(post: str, ctx=None):
        if ctx is not None and ctx.answer is not None:
            return f"published {post} with note {ctx.answer.data['comment']}"
        return pending(kind="approval", prompt=f"Publish {post}?", data={"post": post}, id=f"remote-{post}")

    def generate(request):
        tool_messages = [m for m in request["messages"] if m.get("role") == "tool"]
        if not tool_messages:
            return {"tool_calls": [{"id": "call-1", "name": "publish", "arguments": {"post": "hello-world"}}]}
        return {"content": f"The tool said: {tool_messages[-1]['content']}"}

    def opened(stored):
        print("OPENED " + json.dumps(stored), flush=True)

    async def main():
        wait_for = RemoteWaitFor(base_url, token, poll_seconds=20, host="agent-script", on_open=opened)
        # Wrapped, so the request a tool suspends on is sent with the tool call it guards.
        tools = wait_for.guard_tools([define_tool(publish, name="publish")])
        toolkit = await toolnexus.create_toolkit(extra_tools=tools, builtins=False)
        client = toolnexus.create_in_process_client(model="scripted", generate=generate, wait_for=wait_for)
        result = await client.run("Publish my post", toolkit)
        print("FINAL " + json.dumps({"status": result.status, "text": result.text}), flush=True)

    asyncio.run(main())
    """
)


def in_a_moment(seconds):
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def call(live, method, path, body=None, token=None):
    return await asyncio.to_thread(live.call, method, path, body, token=token)


async def read_line(stream, prefix):
    """The next line of the script's output that starts with ``prefix`` (other lines are kept for the report)."""
    seen = []
    while True:
        line = await asyncio.wait_for(stream.readline(), PROCESS_DEADLINE)
        if not line:
            raise AssertionError(f"the agent script ended before printing {prefix!r}; it printed {seen}")
        text = line.decode().rstrip("\n")
        if text.startswith(prefix):
            return text[len(prefix) :]
        seen.append(text)


async def test_an_agent_in_another_process_resumes_with_the_consoles_answer(live, tmp_path):
    script = tmp_path / "agent.py"
    script.write_text(AGENT_SCRIPT)
    agent = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        live.base_url,
        live.host_token,
        cwd=REPO,
        env={**live.env, "PYTHONPATH": str(REPO)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stored = json.loads(await read_line(agent.stdout, "OPENED "))
        assert (stored["id"], stored["status"], stored["host"], stored["opened_by"]) == (
            "remote-hello-world",
            "open",
            "agent-script",
            "host-svc",
        )
        assert (stored["tool"], stored["args"]) == ("publish", {"post": "hello-world"})  # the card's tool call
        status, listed = await call(live, "GET", "/api/v1/requests?status=open")
        assert status == 200 and "remote-hello-world" in [r["id"] for r in listed["requests"]]

        # A reviewer answers through the console's own API, in the console's process.
        status, answer = await call(
            live, "POST", "/api/v1/requests/remote-hello-world/answer", {"ok": True, "data": {"comment": "lgtm"}}
        )
        assert (status, verified(answer)) == (
            200,
            {"id": "remote-hello-world", "ok": True, "data": {"comment": "lgtm"}},
        )

        final = json.loads(await read_line(agent.stdout, "FINAL "))
        assert await asyncio.wait_for(agent.wait(), PROCESS_DEADLINE) == 0, (await agent.stderr.read()).decode()
    finally:
        if agent.returncode is None:
            agent.kill()
            await agent.wait()
    assert final == {"status": "done", "text": "The tool said: published hello-world with note lgtm"}


async def test_a_cancelled_remote_wait_for_withdraws_its_request(live):
    opened = asyncio.Event()
    wait_for = RemoteWaitFor(live.base_url, live.host_token, poll_seconds=20, on_open=lambda stored: opened.set())
    waiting = asyncio.ensure_future(
        wait_for(Request(id="remote-cancel-1", kind="approval", prompt="Delete the branch?"))
    )
    await asyncio.wait_for(opened.wait(), PROCESS_DEADLINE)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting

    status, answer = await call(live, "GET", "/api/v1/requests/remote-cancel-1/answer")
    assert (status, verified(answer)) == (200, {"id": "remote-cancel-1", "ok": False, "reason": "cancelled"})
    _, listed = await call(live, "GET", "/api/v1/requests?status=cancelled")
    [row] = [r for r in listed["requests"] if r["id"] == "remote-cancel-1"]
    assert row["answered_by"] == "host-svc"  # withdrawn by the host itself, not by a reviewer


async def test_a_short_expires_at_returns_the_consoles_expired_answer(live):
    wait_for = RemoteWaitFor(live.base_url, live.host_token, poll_seconds=20)
    started = time.monotonic()
    answer = await wait_for(Request(id="remote-expiry-1", kind="approval", prompt="Quick?", expiresAt=in_a_moment(1.0)))
    elapsed = time.monotonic() - started
    assert (answer.id, answer.ok, answer.reason) == ("remote-expiry-1", False, "expired")
    assert elapsed < 10  # the console's expiry timer resolved it; the long-poll woke on that
    status, stored = await call(live, "GET", "/api/v1/requests?status=expired")
    assert "remote-expiry-1" in [r["id"] for r in stored["requests"]]


async def test_an_answer_given_before_the_wait_is_returned(live):
    """A host that retries after a crash finds the request already answered: the idempotent POST returns it."""
    body = {"id": "remote-early-1", "kind": "approval", "prompt": "Already?"}
    assert (await call(live, "POST", "/api/v1/requests", {**body, "host": "early"}, token=live.host_token))[0] == 201
    assert (await call(live, "POST", "/api/v1/requests/remote-early-1/answer", {"ok": True}))[0] == 200
    wait_for = RemoteWaitFor(live.base_url, live.host_token, host="early")
    answer = await asyncio.wait_for(wait_for(Request(**body)), PROCESS_DEADLINE)
    assert (answer.ok, answer.reason) == (True, None)


async def test_timeout_withdraws_the_request_and_returns_the_consoles_record(live):
    wait_for = RemoteWaitFor(live.base_url, live.host_token, poll_seconds=20, timeout=0.5)
    answer = await wait_for(Request(id="remote-patience-1", kind="approval", prompt="Anyone?"))
    assert (answer.ok, answer.reason) == (False, "cancelled")
    assert (await call(live, "GET", "/api/v1/requests/remote-patience-1/answer"))[1]["reason"] == "cancelled"


class FlakyOpener:
    """An opener whose first calls fail the way a restarting console or a proxy does, then get through."""

    def __init__(self, failures):
        self.failures = list(failures)
        self.real = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self.calls = []

    def open(self, request, timeout=None):
        self.calls.append(request.get_method() + " " + request.full_url.split("/api/v1", 1)[1])
        if self.failures:
            failure = self.failures.pop(0)
            if failure == "refused":
                raise urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))
            raise urllib.error.HTTPError(request.full_url, failure, "unavailable", {}, None)
        return self.real.open(request, timeout=timeout)


async def test_connection_errors_and_5xx_are_retried_with_backoff(live):
    opener = FlakyOpener(["refused", 503, "refused", 502])
    opened = asyncio.Event()
    wait_for = RemoteWaitFor(
        live.base_url,
        live.host_token,
        poll_seconds=20,
        backoff_initial=0.05,
        opener=opener,
        on_open=lambda stored: opened.set(),
    )
    waiting = asyncio.ensure_future(wait_for(Request(id="remote-flaky-1", kind="approval", prompt="Through?")))
    await asyncio.wait_for(opened.wait(), PROCESS_DEADLINE)
    assert (await call(live, "POST", "/api/v1/requests/remote-flaky-1/answer", {"ok": True}))[0] == 200
    answer = await asyncio.wait_for(waiting, PROCESS_DEADLINE)
    assert (answer.id, answer.ok) == ("remote-flaky-1", True)
    assert opener.calls[:5] == ["POST /requests"] * 5  # four failures, then the POST that opened it
    assert opener.calls[5].startswith("GET /requests/remote-flaky-1/answer?wait=")


async def test_a_bad_token_is_a_clear_auth_error(live):
    wait_for = RemoteWaitFor(live.base_url, "tnx_not-a-real-token")
    with pytest.raises(RemoteAuthError) as refused:
        await wait_for(Request(id="remote-badtoken-1", kind="approval", prompt="Me?"))
    assert refused.value.status == 401
    assert "refused to open the request (HTTP 401 invalid_token)" in str(refused.value)
    assert "not known to the console" in str(refused.value)


async def test_a_bad_request_is_a_clear_request_error(live):
    wait_for = RemoteWaitFor(live.base_url, live.host_token)
    with pytest.raises(RemoteRequestError) as refused:
        await wait_for(Request(id="remote-long-1", kind="approval", prompt="p" * 4001))
    assert refused.value.status == 400
    assert "'prompt' is 4001 characters long" in str(refused.value)


async def test_the_tool_call_can_be_named_when_calling_it_by_hand(live):
    opened = []
    wait_for = RemoteWaitFor(live.base_url, live.host_token, timeout=0.5, on_open=opened.append)
    request = Request(id="remote-named-1", kind="approval", prompt="Deploy web?")
    answer = await wait_for(request, tool="deploy", args={"service": "web"})
    assert answer.reason == "cancelled"  # out of patience: withdrawn
    assert (opened[0]["tool"], opened[0]["args"]) == ("deploy", {"service": "web"})


async def test_an_unreachable_console_is_a_clear_error_naming_the_url_after_bounded_retries():
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    wait_for = RemoteWaitFor(closed, "tnx_any", attempts=4, backoff_initial=0.01, backoff_max=0.02)
    with pytest.raises(RemoteUnreachableError) as unreachable:
        await asyncio.wait_for(wait_for(Request(id="remote-nowhere-1", kind="approval", prompt="Anyone?")), 10)
    message = str(unreachable.value)
    assert message.startswith(
        f"Could not reach the console at {closed}/api/v1/requests to open the request: 4 attempts"
    )
    assert "Connection refused" in message and "Check that the console is running" in message


async def test_a_request_the_console_cannot_store_ends_the_wait_with_an_error(live):
    """A lone surrogate from a model's broken text: whatever the console says (a 4xx, or a 5xx), the host is told."""
    wait_for = RemoteWaitFor(live.base_url, live.host_token, attempts=3, backoff_initial=0.01, backoff_max=0.02)
    broken = Request(id="remote-surrogate-1", kind="approval", prompt="x\ud800y")
    with pytest.raises(RemoteWaitForError) as refused:
        await asyncio.wait_for(wait_for(broken), PROCESS_DEADLINE)
    # Today's console answers a 500 (retried, a bounded number of times); a 400 would be raised at once.
    assert isinstance(refused.value, (RemoteRequestError, RemoteUnreachableError)), refused.value
    assert live.base_url in str(refused.value) or refused.value.status == 400
    _, still_open = await call(live, "GET", "/api/v1/requests?status=open")
    assert "remote-surrogate-1" not in [r["id"] for r in still_open["requests"]]


async def test_a_token_revoked_while_waiting_stops_at_the_first_4xx(live):
    secret = (
        await asyncio.to_thread(manage, live.env, "issue_token", "host-svc", "--name", "revoked-mid-wait")
    ).strip()
    opened = asyncio.Event()
    wait_for = RemoteWaitFor(live.base_url, secret, poll_seconds=0.5, on_open=lambda stored: opened.set())
    waiting = asyncio.ensure_future(wait_for(Request(id="remote-revoked-1", kind="approval", prompt="Still me?")))
    await asyncio.wait_for(opened.wait(), PROCESS_DEADLINE)
    revoke = (
        "from approvals.team import tokens; from approvals.models import ApiToken; "
        "row = ApiToken.objects.get(name='revoked-mid-wait'); tokens.revoke_token(row.user, row.pk)"
    )
    await asyncio.to_thread(manage, live.env, "shell", "--no-imports", "-c", revoke)
    with pytest.raises(RemoteAuthError) as refused:
        await asyncio.wait_for(waiting, PROCESS_DEADLINE)  # the next long-poll's 401, not a retry
    assert refused.value.status == 401 and "was revoked" in str(refused.value)


def test_remote_imports_no_django():
    """approvals.remote must work in a host that has toolnexus but not Django."""
    import subprocess

    code = "import sys, approvals.remote; print(sorted(m for m in sys.modules if m.split('.')[0] == 'django'))"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert "django" not in Path(REPO / "approvals" / "__init__.py").read_text().lower()


async def test_a_deadline_a_reviewer_extended_is_waited_for_not_withdrawn_at_the_old_one(live, monkeypatch):
    monkeypatch.setattr("console_remote.EXPIRY_GRACE_SECONDS", 0.2)  # the host gives the console's timer 0.2 s
    extended = asyncio.Event()

    async def extend_it(stored):
        status, moved = await call(live, "POST", f"/api/v1/requests/{stored['id']}/extend", {"minutes": 1})
        assert status == 200, moved
        extended.set()

    wait_for = RemoteWaitFor(live.base_url, live.host_token, poll_seconds=20, on_open=extend_it)
    waiting = asyncio.ensure_future(
        wait_for(Request(id="remote-extended-1", kind="approval", prompt="Take longer?", expiresAt=in_a_moment(1.0)))
    )
    await asyncio.wait_for(extended.wait(), PROCESS_DEADLINE)
    # Past the deadline it sent and its grace: before, the host withdrew the request here and said "expired".
    done, _ = await asyncio.wait({waiting}, timeout=3.0)
    assert not done, waiting.result()
    assert (await call(live, "POST", "/api/v1/requests/remote-extended-1/answer", {"ok": True}))[0] == 200
    answer = await asyncio.wait_for(waiting, PROCESS_DEADLINE)
    assert (answer.id, answer.ok) == ("remote-extended-1", True)


async def test_a_request_its_policy_keeps_open_is_waited_for_not_withdrawn(live, monkeypatch):
    monkeypatch.setattr("console_remote.EXPIRY_GRACE_SECONDS", 0.2)  # the host gives the console's timer 0.2 s
    manage(
        live.env,
        "shell",
        "--no-imports",
        "-c",
        "from approvals.models import Policy\n"
        "Policy.objects.get_or_create(name='patient hosts', tool_pattern='kept-open-tool', on_timeout='keep_open')",
    )
    wait_for = RemoteWaitFor(live.base_url, live.host_token, poll_seconds=20)
    request = Request(id="remote-kept-open-1", kind="approval", prompt="Whenever you can?", expiresAt=in_a_moment(1.0))
    waiting = asyncio.ensure_future(wait_for(request, tool="kept-open-tool"))
    deadline = time.monotonic() + PROCESS_DEADLINE
    while True:  # the console's own timer keeps it open once its deadline passed
        status, view = await call(live, "GET", "/api/v1/requests/remote-kept-open-1")
        if status == 200 and view.get("kept_open"):
            break
        assert time.monotonic() < deadline and not waiting.done(), (status, view)
        await asyncio.sleep(0.1)
    # Past the deadline it sent and its grace: before, the host withdrew it here ("Cancelled by svc") and said
    # "expired" to its tool.
    done, _ = await asyncio.wait({waiting}, timeout=2.0)
    assert not done, waiting.result()
    assert (await call(live, "POST", "/api/v1/requests/remote-kept-open-1/answer", {"ok": True}))[0] == 200
    answer = await asyncio.wait_for(waiting, PROCESS_DEADLINE)
    assert (answer.id, answer.ok) == ("remote-kept-open-1", True)
