"""The access log and the request id, through the real ``toolnexus_site.asgi.application`` (approvals/telemetry/access.py).

Scopes as daphne hands them over, the client's address included, so a trusted proxy is told apart
from anyone else; /healthz answers without the database.
"""

import logging

import pytest

from approvals.telemetry import access
from toolnexus_site.asgi import application
from toolnexus_site.deployment import trusted_proxies

PROXY = "10.0.0.10"


async def get(path, *, peer="203.0.113.7", headers=(), query=b""):
    """One GET through the whole application; returns (status, headers, the access log record)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "client": [peer, 50123],
        "server": ["127.0.0.1", 8000],
        "headers": [(b"host", b"127.0.0.1"), *headers],
    }
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    await application(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    return start["status"], dict(start["headers"])


def access_lines(caplog):
    return [r for r in caplog.records if r.name == "approvals.access"]


@pytest.fixture
def logged(caplog):
    caplog.set_level(logging.DEBUG, logger="approvals.access")
    return caplog


async def test_each_response_carries_the_request_id_its_access_line_has(logged):
    status, headers = await get("/healthz")
    (line,) = access_lines(logged)
    assert status == 200
    assert headers[b"x-request-id"].decode() == line.request_id
    assert len(line.request_id) == 16
    assert line.fields | {"duration_ms": 0} == {
        "method": "GET",
        "path": "/healthz",
        "status": 200,
        "bytes": 16,
        "duration_ms": 0,
        "client": "203.0.113.7",
        "close_code": None,
    }
    assert line.levelno == logging.DEBUG  # a passing probe, every few seconds: not an INFO line


async def test_a_trusted_proxys_request_id_is_kept_and_a_clients_own_is_replaced(logged, settings):
    settings.CONSOLE_TRUSTED_PROXIES = trusted_proxies(PROXY)
    _, through_proxy = await get("/healthz", peer=PROXY, headers=[(b"x-request-id", b"edge-7f3a")])
    _, direct = await get("/healthz", headers=[(b"x-request-id", b"edge-7f3a")])
    _, garbled = await get("/healthz", peer=PROXY, headers=[(b"x-request-id", b"two words\n")])
    assert through_proxy[b"x-request-id"] == b"edge-7f3a"
    assert direct[b"x-request-id"] != b"edge-7f3a"
    assert garbled[b"x-request-id"] != b"two words\n"
    assert [line.request_id for line in access_lines(logged)] == [
        "edge-7f3a",
        direct[b"x-request-id"].decode(),
        garbled[b"x-request-id"].decode(),
    ]


async def test_a_query_string_shows_its_keys_and_only_paging_values(logged):
    await get("/healthz", query=b"token=tnx_planted-9&wait=30&q=secret-search")
    (line,) = access_lines(logged)
    assert line.fields["path"] == "/healthz?token=…&wait=30&q=…"
    assert "planted" not in line.getMessage() and "secret-search" not in line.getMessage()


def test_a_huge_target_is_cut_and_an_empty_query_shows_nothing():
    assert access.shown_target("/" + "a" * 5000, b"wait=" + b"9" * 5000) == "/" + "a" * 999 + "…"
    assert access.shown_target("/api/v1/runs", b"") == "/api/v1/runs"
    assert access.shown_target("/api/v1/runs", b"&") == "/api/v1/runs"
    assert (
        access.shown_target("/x\n2026-12-05T00:00:00.000Z INFO forged", b"")
        == "/x%0A2026-12-05T00:00:00.000Z INFO forged"
    )


def test_a_password_reset_link_loses_its_token():
    assert access.shown_target("/accounts/reset/MQ/cn8y0u-0123456789abcdef/", b"") == "/accounts/reset/MQ/…/"
    assert access.shown_target("/accounts/reset/MQ/set-password/", b"") == "/accounts/reset/MQ/set-password/"


def test_a_password_reset_token_without_its_slash_or_in_another_case_is_cut_too():
    # APPEND_SLASH redirects the slashless link to one that works: its token is as secret as the slashed one's.
    for path in ("/accounts/reset/MQ/cn8y0u-0123456789abcdef", "//Accounts/RESET/MQ/cn8y0u-0123456789abcdef/"):
        assert "0123456789abcdef" not in access.shown_target(path, b""), path
