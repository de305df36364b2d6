"""Lockout after repeated failed logins and refused API tokens (approvals/team/lockout.py, django-axes).

The attacks run against a real daphne, each test from a loopback address of its own
(127.0.0.x), so one test's lockout of its address does not reach another's. Audit and
cool-down details are checked in process, through Django's own handlers.
"""

from datetime import timedelta
from pathlib import Path

import pytest
import websockets
from asgiref.sync import sync_to_async
from axes.models import AccessAttempt
from django.db.models import F
from django.test import Client

from approvals.models import AuditEvent
from approvals.web.consumers import LOCKED_OUT_CLOSE_CODE
from tests.support.dashboard import host_socket
from tests.support.live_console import ClientAt, live_console, manage
from tests.support.metrics import moved, scrape
from tests.support.users import bearer

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "lockout-Tests-pass-8812"
ACCOUNTS = ("ana", "ben", "cy")  # one per test that logs in, so one test's lockout is not another's


@pytest.fixture(scope="module")
def console(tmp_path_factory):
    """A live console with the default limits: 5 failures, 15 minutes."""
    artifacts = Path(__file__).resolve().parents[2] / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    with live_console(
        tmp_path_factory.mktemp("lockout"),
        artifacts / "lockout-daphne.log",
        CONSOLE_LOCKOUT_FAILURES="5",
        CONSOLE_LOCKOUT_MINUTES="15",
    ) as live:
        manage(
            live.env,
            "shell",
            "--no-imports",
            "-c",
            "from django.contrib.auth.models import User\n"
            f"for name in {ACCOUNTS!r}: User.objects.create_user(name, password={PASSWORD!r})",
        )
        yield live


def test_thirty_wrong_passwords_lock_the_account_and_the_right_one_is_then_refused(console):
    """The probe's attack: 30 wrong passwords in a few seconds, then the right one."""
    attacker = ClientAt(console, "127.0.0.11")
    statuses = [attacker.log_in("ana", f"guess-{n}")[0] for n in range(30)]
    assert statuses == [200] * 4 + [429] * 26

    status, headers, page = attacker.log_in("ana", PASSWORD)
    assert status == 429
    assert "Too many failed logins for this account" in page and "Try again in 15 minutes" in page
    assert 890 <= int(headers["Retry-After"]) <= 900
    assert attacker.request("GET", "/")[0] == 302  # still not logged in: the dashboard sends it to the login


def test_a_locked_account_stays_locked_from_another_address(console):
    for n in range(5):
        ClientAt(console, "127.0.0.12").log_in("ben", f"guess-{n}")
    status, _, page = ClientAt(console, "127.0.0.13").log_in("ben", PASSWORD)
    assert status == 429 and "for this account" in page


def test_an_address_trying_many_accounts_is_locked_for_every_account(console):
    sprayer = ClientAt(console, "127.0.0.14")
    statuses = [sprayer.log_in(f"someone-{n}", "Summer2026!")[0] for n in range(5)]
    assert statuses == [200] * 4 + [429]
    status, _, page = sprayer.log_in("cy", PASSWORD)
    assert status == 429 and "for your address" in page
    assert ClientAt(console, "127.0.0.15").log_in("cy", PASSWORD)[0] == 302


def test_repeated_bad_tokens_lock_out_their_address_with_a_json_429(console):
    guesser = ClientAt(console, "127.0.0.16")
    answers = [guesser.api("/api/v1/requests", f"tnx_guess-{n}") for n in range(6)]
    assert [status for status, _, _ in answers] == [401] * 4 + [429] * 2
    _, headers, body = answers[-1]
    assert body["error"] == "locked_out" and "Too many failed API tokens for your address" in body["message"]
    assert 890 <= int(headers["Retry-After"]) <= 900

    # A good token is no guess: it still works from there, so hosts sharing an address keep working.
    assert guesser.api("/api/v1/requests", console.host_token)[0] == 200
    assert guesser.api("/api/v1/requests", "tnx_guess-again")[0] == 429
    assert ClientAt(console, "127.0.0.17").api("/api/v1/requests", console.host_token)[0] == 200


async def test_bad_tokens_on_the_host_socket_lock_out_their_address(console):
    url = f"ws://127.0.0.1:{console.port}/ws/host/"

    async def handshake(token, address):
        headers = {"Authorization": f"Bearer {token}"}
        try:
            async with websockets.connect(url, additional_headers=headers, local_addr=(address, 0), open_timeout=10):
                return "open"
        except websockets.InvalidStatus as refused:
            return refused.response.status_code

    assert [await handshake(f"tnx_guess-{n}", "127.0.0.18") for n in range(5)] == [403] * 5
    assert await handshake(console.host_token, "127.0.0.18") == "open"  # a good token is no guess
    assert await handshake("tnx_guess-again", "127.0.0.18") == 403
    status, _, body = ClientAt(console, "127.0.0.18").api("/api/v1/requests", "tnx_guess-api")
    assert (status, body["error"]) == (429, "locked_out")  # one count for the address, socket and API alike


# -- in process: the audit trail, axes' tables, the cool-down, the socket's close code ----------------------


def failed_logins(client, username, count):
    return [
        client.post("/accounts/login/", {"username": username, "password": f"guess-{n}"}).status_code
        for n in range(count)
    ]


def test_a_lockout_is_audited_once_and_recorded_in_axes_tables(make_user):
    make_user("alice")
    assert failed_logins(Client(REMOTE_ADDR="10.0.0.7"), "alice", 8) == [200] * 4 + [429] * 4

    locked = AuditEvent.objects.get(action=AuditEvent.Action.AUTH_LOCKED_OUT)
    assert locked.actor == "system"
    assert {key: locked.payload[key] for key in ("locked", "username", "address", "via", "failures")} == {
        "locked": "account",
        "username": "alice",
        "address": "10.0.0.7",
        "via": "login",
        "failures": 5,
    }
    assert 890 <= locked.payload["cool_down_seconds"] <= 900
    attempt = AccessAttempt.objects.get(username="alice")
    assert (attempt.ip_address, attempt.failures_since_start) == ("10.0.0.7", 5)  # refused ones are not counted
    assert "guess-" not in attempt.post_data  # axes masks the password


def test_a_lockout_is_counted_once_by_what_was_locked_and_where(make_user):
    make_user("alice")
    before = scrape()
    failed_logins(Client(REMOTE_ADDR="10.0.0.11"), "alice", 8)
    token_client = Client(REMOTE_ADDR="10.0.0.12")
    for n in range(6):
        token_client.get("/api/v1/requests", headers=bearer(f"tnx_guess-{n}"))
    changes = moved(before, scrape())

    assert changes[("console_lockouts_total", (("locked", "account"), ("via", "login")))] == 1
    assert changes[("console_lockouts_total", (("locked", "address"), ("via", "api_token")))] == 1
    assert changes[("console_audit_events_total", (("action", "auth.locked_out"),))] == 2


def test_the_lockout_lifts_after_the_cool_down(make_user):
    make_user("alice")
    client = Client(REMOTE_ADDR="10.0.0.8")
    failed_logins(client, "alice", 5)
    assert client.post("/accounts/login/", {"username": "alice", "password": "pw-for-tests-1"}).status_code == 429

    AccessAttempt.objects.update(attempt_time=F("attempt_time") - timedelta(minutes=15, seconds=1))
    assert client.post("/accounts/login/", {"username": "alice", "password": "pw-for-tests-1"}).status_code == 302


def test_a_token_lockout_is_audited_with_the_address_alone():
    client = Client(REMOTE_ADDR="10.0.0.9")
    statuses = [client.get("/api/v1/requests", headers=bearer(f"tnx_guess-{n}")).status_code for n in range(5)]
    assert statuses == [401] * 4 + [429]
    locked = AuditEvent.objects.get(action=AuditEvent.Action.AUTH_LOCKED_OUT)
    assert {key: locked.payload[key] for key in ("locked", "username", "address", "via")} == {
        "locked": "address",
        "username": "",
        "address": "10.0.0.9",
        "via": "api token",
    }
    other = Client(REMOTE_ADDR="10.0.0.10")
    assert other.get("/api/v1/requests", headers=bearer("tnx_guess-x")).status_code == 401  # not pooled


async def test_the_host_socket_from_a_locked_out_address_is_closed_with_4429(make_user, issue_token):
    svc = await sync_to_async(make_user)("svc", password=None)
    secret = await sync_to_async(issue_token)(svc)
    codes = []
    for n in range(5):
        async with host_socket(f"tnx_guess-{n}") as (accepted, code, _):
            codes.append(code)
    assert codes == [4401] * 4 + [LOCKED_OUT_CLOSE_CODE]
    async with host_socket("tnx_guess-again") as (accepted, code, _):
        assert (accepted, code) == (False, LOCKED_OUT_CLOSE_CODE)
    async with host_socket(secret) as (accepted, code, _):
        assert accepted  # a good token is no guess
