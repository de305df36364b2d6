"""RemoteWaitFor verifies the console's signed answers (issue 37), against a real console in another process.

The console signs with a key file this module writes (``CONSOLE_SIGNING_KEY_FILE``); the host pins its public
half. What an attacker between them does is done by a real loopback HTTP proxy (``RewritingProxy``) that forwards
every call to the console and rewrites the JSON on its way: it forges, alters, strips and replays answers, or
changes the call the host asks about. Nothing of the console is mocked.
"""

import asyncio
import http.client
import http.server
import json
import logging
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from toolnexus import Request

from approvals.remote import RemoteSignatureError, RemoteWaitFor
from approvals.signing.answers import signature_for
from approvals.signing.keys import key_pair, pem_of, read_key_file, write_new_key
from console_remote import call_digest
from tests.support.live_console import REPO, LiveConsole, daphne_process, live_console, poll

PROCESS_DEADLINE = 60  # only ever reached when a test is about to fail
Rewrite = Callable[[str, str, int, Any], tuple[int, Any]]


class RewritingProxy:
    """A loopback HTTP proxy in front of the console: each JSON request body goes through ``rewrite_sent(method,
    path, body)`` and each JSON reply through ``rewrite(method, path, status, body) -> (status, body)``."""

    def __init__(self, console_port: int) -> None:
        self.console_port = console_port
        self.rewrite: Rewrite = lambda method, path, status, body: (status, body)
        self.rewrite_sent: Callable[[str, str, Any], Any] = lambda method, path, body: body
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                proxy.forward(self)

            def do_POST(self) -> None:
                proxy.forward(self)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def forward(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        sent = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        if sent:
            sent = json.dumps(self.rewrite_sent(handler.command, handler.path, json.loads(sent))).encode()
        headers = {
            name: value for name, value in handler.headers.items() if name.lower() in {"authorization", "accept"}
        }
        if sent:
            headers["Content-Type"] = "application/json"
        connection = http.client.HTTPConnection("127.0.0.1", self.console_port, timeout=90)
        try:
            connection.request(handler.command, handler.path, body=sent or None, headers=headers)
            response = connection.getresponse()
            status, raw = response.status, response.read()
        finally:
            connection.close()
        if raw:
            status, body = self.rewrite(handler.command, handler.path, status, json.loads(raw))
            raw = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(raw)))
        handler.end_headers()
        handler.wfile.write(raw)

    def __enter__(self) -> "RewritingProxy":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def public_b64(private_key: Ed25519PrivateKey) -> str:
    return key_pair(private_key).public_b64


@pytest.fixture(scope="module")
def key_file(tmp_path_factory):
    """The console's key file: written here, so the host knows its public half as an operator would pin it."""
    path = tmp_path_factory.mktemp("signing-key") / "console-key.pem"
    write_new_key(path)
    return path


@pytest.fixture(scope="module")
def signing_key(key_file):
    return read_key_file(key_file)


@pytest.fixture(scope="module")
def signing(tmp_path_factory, key_file):
    """A console of its own that signs with the key in ``key_file``."""
    workdir = tmp_path_factory.mktemp("signing-console")
    with live_console(workdir, workdir / "daphne.log", CONSOLE_SIGNING_KEY_FILE=str(key_file)) as console:
        yield console


@pytest.fixture
def proxy(signing):
    with RewritingProxy(signing.port) as between:
        yield between


async def call(live, method, path, body=None, token=None):
    return await asyncio.to_thread(live.call, method, path, body, token=token)


def is_answer_poll(method: str, path: str, request_id: str) -> bool:
    return method == "GET" and path.startswith(f"/api/v1/requests/{request_id}/answer")


async def opened_and_waiting(wait_for: RemoteWaitFor, request: Request, **call_options: Any) -> asyncio.Future:
    opened = asyncio.Event()
    wait_for.on_open = lambda stored: opened.set()
    waiting = asyncio.ensure_future(wait_for(request, **call_options))
    await asyncio.wait_for(opened.wait(), PROCESS_DEADLINE)
    return waiting


async def status_of(console: LiveConsole, request_id: str) -> tuple[str, str | None]:
    status, view = await call(console, "GET", f"/api/v1/requests/{request_id}")
    assert status == 200, view
    return view["status"], view.get("answered_by")


def approval_signed_by(private_key, kid, request_id, digest, at, data=None):
    """An approval of ``request_id`` as the console would sign it, signed by ``private_key`` under ``kid`` for the
    call ``digest``, decided ``at``: what a proxy hands a host in these tests instead of the console's answer."""
    answer = {"id": request_id, "ok": True, "data": data}
    answer["signature"] = signature_for(
        private_key,
        kid,
        request_id=request_id,
        ok=True,
        data=data,
        reason=None,
        call_digest=digest,
        run_digest=digest,
        by="reviewer",
        decided_by="person",
        at=at,
    )
    return answer


async def test_a_forged_approval_is_refused_and_the_request_withdrawn(signing, proxy, signing_key):
    """While the request is still open, the proxy hands the host an approval it signed itself under the console's
    key id: the host refuses it, and withdraws the request so nobody answers into the void."""
    forger = Ed25519PrivateKey.generate()
    console_kid = key_pair(signing_key).kid

    def forge(method, path, status, body):
        if is_answer_poll(method, path, "sig-forged") and status == 202:
            digest = call_digest("refund", {"amount": 25})
            at = "2099-01-01T00:00:00.000000Z"
            return 200, approval_signed_by(forger, console_kid, "sig-forged", digest, at, {"comment": "ship it"})
        return status, body

    proxy.rewrite = forge
    wait_for = RemoteWaitFor(proxy.base_url, signing.host_token, poll_seconds=1, public_keys=[public_b64(signing_key)])
    with pytest.raises(RemoteSignatureError) as refused:
        await asyncio.wait_for(
            wait_for(Request(id="sig-forged", kind="approval", prompt="Refund?"), tool="refund", args={"amount": 25}),
            PROCESS_DEADLINE,
        )
    assert (refused.value.status, refused.value.error) == (None, "bad_signature")
    assert "forged or altered" in refused.value.message and console_kid in refused.value.message
    assert await status_of(signing, "sig-forged") == ("cancelled", "host-svc")  # withdrawn by the host


async def test_an_answer_signed_by_a_key_the_host_does_not_know_is_refused(signing, proxy, signing_key):
    forger = key_pair(Ed25519PrivateKey.generate())

    def forge(method, path, status, body):
        if is_answer_poll(method, path, "sig-unknown-key") and status == 200:
            signature = body["signature"]
            fields = {name: signature[name] for name in ("call_digest", "run_digest", "by", "decided_by", "at")}
            body["signature"] = signature_for(
                forger.private_key, forger.kid, request_id=body["id"], ok=True, data=None, reason=None, **fields
            )
            body["ok"] = True
            body.pop("reason", None)
        return status, body

    proxy.rewrite = forge
    wait_for = RemoteWaitFor(proxy.base_url, signing.host_token, public_keys=[public_b64(signing_key)])
    waiting = await opened_and_waiting(wait_for, Request(id="sig-unknown-key", kind="approval", prompt="Refund?"))
    assert (await call(signing, "POST", "/api/v1/requests/sig-unknown-key/answer", {"ok": False}))[0] == 200
    with pytest.raises(RemoteSignatureError) as refused:
        await asyncio.wait_for(waiting, PROCESS_DEADLINE)
    assert refused.value.error == "unknown_key"
    assert forger.kid in refused.value.message and key_pair(signing_key).kid in refused.value.message


async def test_an_answer_altered_in_transit_is_refused(signing, proxy, signing_key):
    """The reviewer declines; the proxy turns the signed decline into an approval, keeping the signature."""

    def alter(method, path, status, body):
        if is_answer_poll(method, path, "sig-altered") and status == 200:
            assert body["signature"]["kid"] == key_pair(signing_key).kid  # the console's signed decline
            body["ok"], body["data"] = True, {"comment": "approved, honest"}
            body.pop("reason", None)
        return status, body

    proxy.rewrite = alter
    wait_for = RemoteWaitFor(proxy.base_url, signing.host_token, public_keys=[public_b64(signing_key)])
    waiting = await opened_and_waiting(wait_for, Request(id="sig-altered", kind="approval", prompt="Delete?"))
    status, _ = await call(signing, "POST", "/api/v1/requests/sig-altered/answer", {"ok": False, "reason": "declined"})
    assert status == 200
    with pytest.raises(RemoteSignatureError) as refused:
        await asyncio.wait_for(waiting, PROCESS_DEADLINE)
    assert refused.value.error == "bad_signature"
    assert await status_of(signing, "sig-altered") == ("declined", "reviewer")  # the console's answer stands


@pytest.mark.parametrize("required", [True, False], ids=["required", "not-required"])
async def test_an_unsigned_answer_is_refused_only_when_signatures_are_required(signing, proxy, signing_key, required):
    request_id = f"sig-unsigned-{required}".lower()

    def strip(method, path, status, body):
        if is_answer_poll(method, path, request_id) and status == 200:
            body.pop("signature")
        return status, body

    proxy.rewrite = strip
    wait_for = RemoteWaitFor(
        proxy.base_url, signing.host_token, public_keys=[public_b64(signing_key)], require_signature=required
    )
    waiting = await opened_and_waiting(wait_for, Request(id=request_id, kind="approval", prompt="Go?"))
    assert (await call(signing, "POST", f"/api/v1/requests/{request_id}/answer", {"ok": True}))[0] == 200
    if not required:
        answer = await asyncio.wait_for(waiting, PROCESS_DEADLINE)
        assert (answer.id, answer.ok) == (request_id, True)
        return
    with pytest.raises(RemoteSignatureError) as refused:
        await asyncio.wait_for(waiting, PROCESS_DEADLINE)
    assert refused.value.error == "unsigned" and "require_signature" in refused.value.message


async def test_an_answer_replayed_onto_another_request_is_refused(signing, proxy, signing_key):
    """An approval the console signed for one request, handed over for another: its signature holds, its id not."""
    body = {"id": "sig-replay-source", "kind": "approval", "prompt": "Refund 5?", "host": "h"}
    assert (await call(signing, "POST", "/api/v1/requests", body, token=signing.host_token))[0] == 201
    assert (await call(signing, "POST", "/api/v1/requests/sig-replay-source/answer", {"ok": True}))[0] == 200
    _, approved = await call(signing, "GET", "/api/v1/requests/sig-replay-source/answer")
    assert approved["signature"]["kid"] == key_pair(signing_key).kid

    def replay(method, path, status, body):
        if is_answer_poll(method, path, "sig-replay-target"):
            return 200, approved
        return status, body

    proxy.rewrite = replay
    wait_for = RemoteWaitFor(proxy.base_url, signing.host_token, poll_seconds=1, public_keys=[public_b64(signing_key)])
    with pytest.raises(RemoteSignatureError) as refused:
        await asyncio.wait_for(
            wait_for(Request(id="sig-replay-target", kind="approval", prompt="Refund 5000?")), PROCESS_DEADLINE
        )
    assert refused.value.error == "other_request" and "'sig-replay-source'" in refused.value.message
    assert await status_of(signing, "sig-replay-target") == ("cancelled", "host-svc")


async def test_an_approval_of_a_call_changed_on_the_way_to_the_console_is_refused(signing, proxy, signing_key):
    """The proxy raises the amount the host asks about; the reviewer approves what the console shows, and the
    console's signature names that call: not the one this host would run."""

    def raise_amount(method, path, body):
        if method == "POST" and path == "/api/v1/requests" and body.get("id") == "sig-other-call":
            body["args"] = {"amount": 25000}
        return body

    proxy.rewrite_sent = raise_amount
    wait_for = RemoteWaitFor(proxy.base_url, signing.host_token, public_keys=[public_b64(signing_key)])
    waiting = await opened_and_waiting(
        wait_for, Request(id="sig-other-call", kind="approval", prompt="Refund?"), tool="refund", args={"amount": 25}
    )
    _, shown = await call(signing, "GET", "/api/v1/requests/sig-other-call")
    assert shown["args"] == {"amount": 25000}
    assert (await call(signing, "POST", "/api/v1/requests/sig-other-call/answer", {"ok": True}))[0] == 200
    with pytest.raises(RemoteSignatureError) as refused:
        await asyncio.wait_for(waiting, PROCESS_DEADLINE)
    assert refused.value.error == "other_call"
    assert call_digest("refund", {"amount": 25}) in refused.value.message


async def test_an_answer_older_than_the_request_is_refused_as_stale(signing, proxy, signing_key):
    """The host's POST opened the request (201), yet the proxy hands it an answer the console's key signed an hour
    before: an old answer of a request id used before, replayed. Refused as stale."""
    digest = call_digest("", {})

    def replay_an_old_answer(method, path, status, body):
        if is_answer_poll(method, path, "sig-stale") and status == 202:
            an_hour_ago = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            return 200, approval_signed_by(signing_key, key_pair(signing_key).kid, "sig-stale", digest, an_hour_ago)
        return status, body

    proxy.rewrite = replay_an_old_answer
    wait_for = RemoteWaitFor(proxy.base_url, signing.host_token, poll_seconds=1, public_keys=[public_b64(signing_key)])
    with pytest.raises(RemoteSignatureError) as refused:
        await asyncio.wait_for(wait_for(Request(id="sig-stale", kind="approval", prompt="Go?")), PROCESS_DEADLINE)
    assert refused.value.error == "stale"


async def test_a_repeated_post_returns_the_stored_answer_whatever_its_age(signing, signing_key):
    """A retry of a request already answered (the idempotent POST gives 200 and its answer) is accepted, however
    long ago it was answered: its id and call digest bind it. With no clock skew allowed, any answer older than
    this host's call would be stale if the POST had opened the request."""
    body = {"id": "sig-retried", "kind": "approval", "prompt": "Again?"}
    assert (await call(signing, "POST", "/api/v1/requests", {**body, "host": "h"}, token=signing.host_token))[0] == 201
    assert (await call(signing, "POST", "/api/v1/requests/sig-retried/answer", {"ok": True}))[0] == 200
    wait_for = RemoteWaitFor(
        signing.base_url, signing.host_token, host="h", public_keys=[public_b64(signing_key)], max_clock_skew=0
    )
    assert (await asyncio.wait_for(wait_for(Request(**body)), PROCESS_DEADLINE)).ok is True


async def test_an_approval_with_edits_verifies_its_run_digest(signing, signing_key):
    """The reviewer edits ``replicas`` before approving: the signature's run digest is of the edited call, which
    is what the host computes from its args and ``answer.data["args"]``."""
    pem = key_pair(signing_key).private_key.public_key()
    from cryptography.hazmat.primitives import serialization

    pinned_pem = pem.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    wait_for = RemoteWaitFor(signing.base_url, signing.host_token, public_keys=[pinned_pem], require_signature=True)
    args = {"service": "web", "replicas": 2}
    request = Request(id="sig-edited", kind="approval", prompt="Scale web?", data={"editable": ["replicas"]})
    waiting = await opened_and_waiting(wait_for, request, tool="scale", args=args)
    status, answered = await call(
        signing, "POST", "/api/v1/requests/sig-edited/answer", {"ok": True, "data": {"args": {"replicas": 3}}}
    )
    assert status == 200, answered
    answer = await asyncio.wait_for(waiting, PROCESS_DEADLINE)
    assert (answer.ok, answer.data["args"]) == (True, {"replicas": 3})
    _, signed = await call(signing, "GET", "/api/v1/requests/sig-edited/answer")
    assert signed["signature"]["call_digest"] == call_digest("scale", args)
    assert signed["signature"]["run_digest"] == call_digest("scale", {"service": "web", "replicas": 3})


async def test_with_nothing_pinned_a_signed_answer_is_returned_as_before(signing):
    wait_for = RemoteWaitFor(signing.base_url, signing.host_token)
    waiting = await opened_and_waiting(wait_for, Request(id="sig-unpinned", kind="approval", prompt="Go?"))
    assert (await call(signing, "POST", "/api/v1/requests/sig-unpinned/answer", {"ok": True}))[0] == 200
    assert (await asyncio.wait_for(waiting, PROCESS_DEADLINE)).ok is True


async def test_fetched_public_keys_verify_and_log_a_warning_to_pin_them(signing, caplog):
    wait_for = RemoteWaitFor(signing.base_url, signing.host_token, fetch_public_keys=True, require_signature=True)
    waiting = await opened_and_waiting(wait_for, Request(id="sig-fetched", kind="approval", prompt="Go?"))
    assert (await call(signing, "POST", "/api/v1/requests/sig-fetched/answer", {"ok": True}))[0] == 200
    with caplog.at_level(logging.WARNING, logger="console_remote"):
        assert (await asyncio.wait_for(waiting, PROCESS_DEADLINE)).ok is True
    assert "Pin them" in caplog.text


async def test_a_rotated_key_still_verifies_old_answers_beside_new_ones(tmp_path):
    """Answered under key 1, the console restarted with key 2: a host pinning both verifies the old answer (the
    POST of the same request gives back its stored answer) and a new one; pinning only key 2, the old is refused."""
    old_key = write_new_key(tmp_path / "key-1.pem")
    new_key = write_new_key(tmp_path / "key-2.pem")
    body = {"id": "sig-rotated-old", "kind": "approval", "prompt": "Before the rotation?", "host": "h"}
    with live_console(
        tmp_path, tmp_path / "daphne-1.log", CONSOLE_SIGNING_KEY_FILE=str(tmp_path / "key-1.pem")
    ) as first:
        assert (await call(first, "POST", "/api/v1/requests", body, token=first.host_token))[0] == 201
        assert (await call(first, "POST", "/api/v1/requests/sig-rotated-old/answer", {"ok": True}))[0] == 200
    env = {**first.env, "CONSOLE_SIGNING_KEY_FILE": str(tmp_path / "key-2.pem")}
    with daphne_process(env, tmp_path / "daphne-2.log") as served:
        second = LiveConsole(
            f"http://127.0.0.1:{served.port}", served.port, first.db_path, tmp_path / "daphne-2.log", env, first.tokens
        )
        both = RemoteWaitFor(
            second.base_url, second.host_token, host="h", public_keys=[public_b64(new_key), public_b64(old_key)]
        )
        old_answer = await asyncio.wait_for(both(Request(**{k: body[k] for k in ("id", "kind", "prompt")})), 30)
        assert old_answer.ok is True
        _, stored = await call(second, "GET", "/api/v1/requests/sig-rotated-old/answer")
        assert stored["signature"]["kid"] == key_pair(old_key).kid

        waiting = await opened_and_waiting(both, Request(id="sig-rotated-new", kind="approval", prompt="After?"))
        assert (await call(second, "POST", "/api/v1/requests/sig-rotated-new/answer", {"ok": True}))[0] == 200
        assert (await asyncio.wait_for(waiting, PROCESS_DEADLINE)).ok is True
        _, stored = await call(second, "GET", "/api/v1/requests/sig-rotated-new/answer")
        assert stored["signature"]["kid"] == key_pair(new_key).kid

        only_new = RemoteWaitFor(second.base_url, second.host_token, host="h", public_keys=[public_b64(new_key)])
        with pytest.raises(RemoteSignatureError) as refused:
            await asyncio.wait_for(only_new(Request(**{k: body[k] for k in ("id", "kind", "prompt")})), 30)
        assert refused.value.error == "unknown_key" and key_pair(old_key).kid in refused.value.message


def test_configuration_mistakes_are_clear_errors_when_it_is_made():
    with pytest.raises(ValueError, match="require_signature=True needs the console's public keys"):
        RemoteWaitFor("http://127.0.0.1:1", "t", require_signature=True)
    with pytest.raises(ValueError, match="is 3 bytes once decoded; an Ed25519 public key is 32"):
        RemoteWaitFor("http://127.0.0.1:1", "t", public_keys=["AAAA"])
    with pytest.raises(ValueError, match="neither PEM nor base64url"):
        RemoteWaitFor("http://127.0.0.1:1", "t", public_keys=["not base64!"])
    rsa_pem = (
        "-----BEGIN PUBLIC KEY-----\nMFwwDQYJKoZIhvcNAQEBBQADSwAwSAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf\n"
        "9Cnzj4p4WGeKLs1Pt8QuKUpRKfFLfRYC9AIKjbJTWit+CqvjWYzvQwECAwEAAQ==\n-----END PUBLIC KEY-----\n"
    )
    with pytest.raises(ValueError, match="the console signs with Ed25519"):
        RemoteWaitFor("http://127.0.0.1:1", "t", public_keys=[rsa_pem])


def test_pinned_keys_beside_fetched_ones_are_refused(signing_key):
    with pytest.raises(ValueError, match="either public_keys .pinned. or fetch_public_keys=True, not both"):
        RemoteWaitFor("http://127.0.0.1:1", "t", public_keys=[public_b64(signing_key)], fetch_public_keys=True)


def test_pinned_keys_without_require_signature_warn_once_that_a_stripped_signature_passes(signing_key, caplog):
    with caplog.at_level(logging.WARNING, logger="console_remote"):
        RemoteWaitFor("http://127.0.0.1:1", "t", public_keys=[public_b64(signing_key)])
    assert [record.levelname for record in caplog.records] == ["WARNING"]
    assert "signature was stripped" in caplog.text and "require_signature=True" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="console_remote"):
        RemoteWaitFor("http://127.0.0.1:1", "t", public_keys=[public_b64(signing_key)], require_signature=True)
        RemoteWaitFor("http://127.0.0.1:1", "t")
    assert caplog.records == []


def test_without_cryptography_pinning_keys_names_the_extra_and_nothing_else_changes():
    """A host without ``cryptography``: the client imports and waits as before; asking it to verify is refused."""
    code = (
        "import sys; sys.modules['cryptography'] = None\n"  # an import of it fails, as when it is not installed
        "import console_remote as c\n"
        "c.RemoteWaitFor('http://127.0.0.1:1', 't')\n"
        "for options in ({'public_keys': ['" + public_b64(Ed25519PrivateKey.generate()) + "']},"
        " {'require_signature': True}, {'fetch_public_keys': True}):\n"
        "    try:\n"
        "        c.RemoteWaitFor('http://127.0.0.1:1', 't', **options)\n"
        "    except ValueError as exc:\n"
        "        print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and all("pip install 'toolnexus-console[verify]'" in line for line in lines), lines


def test_the_pinned_pem_reads_as_the_same_key_as_its_base64url(signing_key):
    from console_remote import public_key_of

    pem = pem_of(signing_key)  # the private PEM is not a public key: refused, naming what it is
    with pytest.raises(ValueError, match="not a PEM public key"):
        public_key_of(pem.decode())
    assert public_key_of(public_b64(signing_key))[0] == key_pair(signing_key).kid
    assert public_key_of(public_b64(signing_key) + "=")[0] == key_pair(signing_key).kid


PINNING_MARKER = "<!-- recipe: run by tests/runs/test_remote_signatures.py, against a console that signs with a key the test writes -->"  # noqa: E501


async def test_the_docs_pinning_recipe_verifies_a_reviewers_answer(signing, signing_key):
    """docs/remote-hosts.md's recipe, as written, with the console's public key pinned from the environment."""
    page = (REPO / "docs" / "remote-hosts.md").read_text()
    found = re.search(re.escape(PINNING_MARKER) + r"\n```python\n(.*?)\n```\n", page, re.DOTALL)
    assert found, f"docs/remote-hosts.md has no python block below {PINNING_MARKER}"
    env = {
        **signing.env,
        "CONSOLE_URL": signing.base_url,
        "CONSOLE_TOKEN": signing.host_token,
        "CONSOLE_PUBLIC_KEYS": public_b64(signing_key),
        "PYTHONPATH": str(REPO),
    }
    recipe = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        found.group(1),
        cwd=REPO,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await asyncio.to_thread(poll, signing, "/api/v1/requests/py-signed-1", lambda view: view["status"] == "open")
        assert (await call(signing, "POST", "/api/v1/requests/py-signed-1/answer", {"ok": True}))[0] == 200
        out, err = await asyncio.wait_for(recipe.communicate(), PROCESS_DEADLINE)
    finally:
        if recipe.returncode is None:
            recipe.kill()
            await recipe.wait()
    assert recipe.returncode == 0, err.decode()
    assert "Answer(id='py-signed-1', ok=True" in out.decode(), out.decode()


async def test_the_call_digest_is_of_the_args_as_sent_not_as_the_caller_holds_them(signing, signing_key):
    """A key that is not a string goes over the wire as one, and the caller changing its dict while it waits changes
    nothing: the host checks the digest of what it POSTed, as the console signed it."""
    wait_for = RemoteWaitFor(signing.base_url, signing.host_token, public_keys=[public_b64(signing_key)])
    args: dict[Any, Any] = {"amount": 25, 7: "seven"}
    request = Request(id="sig-as-sent", kind="approval", prompt="Refund?")
    waiting = await opened_and_waiting(wait_for, request, tool="refund", args=args)
    args["amount"] = 26
    assert (await call(signing, "POST", "/api/v1/requests/sig-as-sent/answer", {"ok": True}))[0] == 200
    assert (await asyncio.wait_for(waiting, PROCESS_DEADLINE)).ok is True
    _, signed = await call(signing, "GET", "/api/v1/requests/sig-as-sent/answer")
    assert signed["signature"]["call_digest"] == call_digest("refund", {"amount": 25, "7": "seven"})


async def test_two_waits_for_one_id_each_check_the_answer_against_what_they_sent(signing, proxy, signing_key):
    """Two waits of one wait_for with the same request id: the first returns, then the proxy hands the second an
    answer the console's key signed for another call. The second checks it against its own call and refuses it
    (it used to find nothing to check once the first had returned, and accepted it)."""
    first_done = threading.Event()
    polls = []
    other = call_digest("refund", {"amount": 999})

    def second_gets_another_calls_answer(method, path, status, body):
        if not (is_answer_poll(method, path, "sig-twice") and status == 200):
            return status, body
        polls.append(path)
        if len(polls) == 1:
            return status, body
        assert first_done.wait(PROCESS_DEADLINE)
        return 200, approval_signed_by(
            signing_key, key_pair(signing_key).kid, "sig-twice", other, "2099-01-01T00:00:00.000000Z"
        )

    proxy.rewrite = second_gets_another_calls_answer
    wait_for = RemoteWaitFor(proxy.base_url, signing.host_token, public_keys=[public_b64(signing_key)])
    request = Request(id="sig-twice", kind="approval", prompt="Refund?")
    waits = [await opened_and_waiting(wait_for, request, tool="refund", args={"amount": 25}) for _ in range(2)]
    assert (await call(signing, "POST", "/api/v1/requests/sig-twice/answer", {"ok": True}))[0] == 200
    done, _ = await asyncio.wait(waits, timeout=PROCESS_DEADLINE, return_when=asyncio.FIRST_COMPLETED)
    assert len(done) == 1 and next(iter(done)).result().ok is True
    first_done.set()
    (second,) = set(waits) - done
    with pytest.raises(RemoteSignatureError) as refused:
        await asyncio.wait_for(second, PROCESS_DEADLINE)
    assert refused.value.error == "other_call" and other in refused.value.message


@pytest.mark.parametrize("kid", [["k"], {"k": 1}, 7, None])
async def test_a_key_id_that_is_not_text_is_refused_as_an_unknown_key(signing, proxy, signing_key, kid):
    request_id = f"sig-kid-{type(kid).__name__}"

    def odd_kid(method, path, status, body):
        if is_answer_poll(method, path, request_id) and status == 200 and "signature" in body:
            body["signature"]["kid"] = kid
        return status, body

    proxy.rewrite = odd_kid
    wait_for = RemoteWaitFor(proxy.base_url, signing.host_token, public_keys=[public_b64(signing_key)])
    request = Request(id=request_id, kind="approval", prompt="Go?")
    waiting = await opened_and_waiting(wait_for, request)
    assert (await call(signing, "POST", f"/api/v1/requests/{request_id}/answer", {"ok": True}))[0] == 200
    with pytest.raises(RemoteSignatureError) as refused:
        await asyncio.wait_for(waiting, PROCESS_DEADLINE)
    assert refused.value.error == "unknown_key"


async def test_an_approval_the_host_refuses_is_recorded_as_refused_not_as_awaiting_its_report(signing):
    """The console stored an approval, but the host does not know the key it is signed with (rotated, not pinned
    yet): the host does not run the tool, and the request's record says so rather than "not yet reported"."""
    other = key_pair(Ed25519PrivateKey.generate())
    wait_for = RemoteWaitFor(signing.base_url, signing.host_token, public_keys=[other.public_b64])
    waiting = await opened_and_waiting(wait_for, Request(id="sig-refused-approval", kind="approval", prompt="Go?"))
    assert (await call(signing, "POST", "/api/v1/requests/sig-refused-approval/answer", {"ok": True}))[0] == 200
    with pytest.raises(RemoteSignatureError) as refused:
        await asyncio.wait_for(waiting, PROCESS_DEADLINE)
    assert refused.value.error == "unknown_key"
    status, view = await call(signing, "GET", "/api/v1/requests/sig-refused-approval")
    assert status == 200 and view["execution"]["state"] == "failed", view["execution"]
    assert view["execution"]["message"].startswith("This host refused the console's answer (unknown_key): ")
