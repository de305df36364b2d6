"""X-Forwarded-For and X-Forwarded-Proto believed from trusted proxies only (approvals/web/proxy_headers.py).

The rule on scopes as daphne hands them over; tests/cluster/test_behind_the_proxy.py runs it for real,
behind nginx and around it.
"""

import pytest

from approvals.web.proxy_headers import TrustedProxyHeaders, client_address, resolve
from toolnexus_site.deployment import trusted_proxies

PROXY = trusted_proxies("10.0.0.10")


def scope(peer, *headers, kind="http"):
    return {
        "type": kind,
        "scheme": "http" if kind == "http" else "ws",
        "client": [peer, 50123],
        "headers": [(b"host", b"console.example"), *((n.encode(), v.encode()) for n, v in headers)],
    }


def header_names(resolved):
    return [name for name, _ in resolved["headers"]]


def test_a_direct_client_forging_x_forwarded_for_keeps_its_own_address_and_loses_the_headers():
    forged = scope("203.0.113.7", ("x-forwarded-for", "198.51.100.1"), ("x-forwarded-proto", "https"))
    resolved = resolve(forged, PROXY)
    assert resolved["client"] == ["203.0.113.7", 50123]
    assert resolved["scheme"] == "http"
    assert header_names(resolved) == [b"host"]  # Django's SECURE_PROXY_SSL_HEADER cannot read a forged one


def test_with_no_trusted_proxy_every_peer_is_the_client():
    forged = scope("10.0.0.10", ("x-forwarded-for", "198.51.100.1"), ("x-forwarded-proto", "https"))
    resolved = resolve(forged, trusted_proxies(""))
    assert (resolved["client"], resolved["scheme"], header_names(resolved)) == (["10.0.0.10", 50123], "http", [b"host"])


def test_through_the_trusted_proxy_the_client_is_the_address_the_proxy_appended():
    # The client wrote "198.51.100.1" itself; the proxy appended the address it connected from.
    forwarded = scope("10.0.0.10", ("x-forwarded-for", "198.51.100.1, 203.0.113.7"), ("x-forwarded-proto", "https"))
    resolved = resolve(forwarded, PROXY)
    assert resolved["client"] == ["203.0.113.7", 0]
    assert resolved["scheme"] == "https"
    assert b"x-forwarded-for" in header_names(resolved)


def test_a_chain_of_trusted_proxies_is_walked_to_the_first_untrusted_hop():
    proxies = trusted_proxies("10.0.0.10, 192.168.0.0/16")
    assert client_address("10.0.0.10", ["198.51.100.1", " 203.0.113.7", "192.168.4.2"], proxies) == "203.0.113.7"
    # Every hop trusted: the left-most is as far as anyone can tell.
    assert client_address("10.0.0.10", ["192.168.4.3", "192.168.4.2"], proxies) == "192.168.4.3"
    # An entry that is no address stops the walk at the trusted hop that passed it on.
    assert client_address("10.0.0.10", ["203.0.113.7", "unknown", "192.168.4.2"], proxies) == "192.168.4.2"


@pytest.mark.parametrize(
    ("peer", "entry", "client"),
    [
        ("::ffff:10.0.0.10", "203.0.113.7", "203.0.113.7"),  # daphne bound to :: reports IPv4 peers mapped
        ("10.0.0.10", "[2001:db8::7]:4711", "2001:db8::7"),
        ("10.0.0.10", "203.0.113.7:4711", "203.0.113.7"),
    ],
)
def test_addresses_are_read_in_the_forms_proxies_write_them(peer, entry, client):
    assert client_address(peer, [entry], PROXY) == client


@pytest.mark.parametrize(("proto", "scheme"), [("https", "wss"), ("http", "ws"), ("gopher", "ws")])
def test_a_socket_behind_the_proxy_gets_the_proxys_scheme_for_its_origin_check(proto, scheme):
    resolved = resolve(scope("10.0.0.10", ("x-forwarded-proto", proto), kind="websocket"), PROXY)
    assert resolved["scheme"] == scheme
    assert resolved["client"] == ["10.0.0.10", 50123]  # no X-Forwarded-For: the peer stays the client


async def test_the_middleware_hands_the_resolved_scope_to_the_application(settings):
    settings.CONSOLE_TRUSTED_PROXIES = PROXY
    seen = []

    async def application(scope, receive, send):
        seen.append(scope)

    middleware = TrustedProxyHeaders(application)
    await middleware(scope("10.0.0.10", ("x-forwarded-for", "203.0.113.7"), kind="websocket"), None, None)
    await middleware(scope("203.0.113.8", ("x-forwarded-for", "203.0.113.7")), None, None)
    await middleware({"type": "lifespan"}, None, None)
    assert [s.get("client") for s in seen] == [["203.0.113.7", 0], ["203.0.113.8", 50123], None]
