"""Who the client is behind a reverse proxy: X-Forwarded-For and X-Forwarded-Proto from trusted proxies only.

daphne's ``--proxy-headers`` believes these headers from anyone and takes the left-most
X-Forwarded-For address, which the client wrote itself: a client connecting directly could name
any address, and the lockout by client address (approvals/team/lockout.py) would count its
failures against someone else's, or spread them over made-up ones. So daphne runs without it and
this middleware, around the whole application, applies the headers only when the connecting peer
is in ``CONSOLE_TRUSTED_PROXIES``. The client is then the right-most X-Forwarded-For address that is
not a trusted proxy (a proxy appends the address it was connected from, so everything left of that
is hearsay), and the scheme is the nearest proxy's X-Forwarded-Proto, for HTTP and WebSocket scopes
alike (the sockets' origin check compares against it). From any other peer the forwarded headers
are removed, so nothing later believes them either (Django's ``SECURE_PROXY_SSL_HEADER``, a log line).

It runs on the event loop: a scan of the request's headers, no I/O (a few microseconds: docs/operations.md).
"""

import functools
import ipaddress
from collections.abc import Sequence
from typing import Any

from asgiref.typing import ASGI3Application, ASGIReceiveCallable, ASGISendCallable, Scope
from django.conf import settings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Networks = tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]

FORWARDED_FOR = b"x-forwarded-for"
FORWARDED_PROTO = b"x-forwarded-proto"
# The scheme a trusted proxy's X-Forwarded-Proto gives each kind of scope.
SCHEMES = {
    "http": {"http": "http", "https": "https"},
    "websocket": {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"},
}


# Parsing an address costs microseconds, and the same few peers and clients come back on every request.
@functools.lru_cache(maxsize=4096)
def _address(text: str) -> Address | None:
    """An IP address from a peer or an X-Forwarded-For entry (``[v6]:port`` and ``v4:port`` too), or None."""
    text = text.strip()
    if text.startswith("["):
        text = text[1 : text.find("]")]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    return getattr(address, "ipv4_mapped", None) or address


@functools.lru_cache(maxsize=4096)
def _trusted(address: Address | None, proxies: Networks) -> bool:
    return address is not None and any(address in network for network in proxies)


def client_address(peer: str, forwarded_for: Sequence[str], proxies: Networks) -> str:
    """The client's address: walking X-Forwarded-For from the right while the hop that added it is trusted.

    ``peer`` is the connecting address (trusted or not), ``forwarded_for`` the header's entries in
    order. An entry that is not an address stops the walk at the trusted hop that passed it on.
    """
    address = _address(peer)
    if address is None:
        return peer
    for entry in reversed(forwarded_for):
        if not _trusted(address, proxies):
            break
        forwarded = _address(entry)
        if forwarded is None:
            break
        address = forwarded
    return str(address)


def _is_forwarding_header(name: bytes) -> bool:
    # X-Request-ID too: the access log (approvals/telemetry/access.py) takes a proxy's correlation id, not a client's.
    return name.startswith(b"x-forwarded-") or name in (b"forwarded", b"x-request-id")


def resolve(scope: dict[str, Any], proxies: Networks) -> dict[str, Any]:
    """``scope`` with the client and scheme its trusted proxies forwarded, or without forwarded headers."""
    peer = (scope.get("client") or [None])[0]
    headers = scope.get("headers") or []
    if peer is None or not proxies or not _trusted(_address(peer), proxies):
        if not any(_is_forwarding_header(name) for name, _ in headers):
            return scope
        return dict(scope, headers=[(name, value) for name, value in headers if not _is_forwarding_header(name)])
    forwarded_for: list[str] = []
    proto: str | None = None
    for name, value in headers:
        if name == FORWARDED_FOR:
            forwarded_for.extend(value.decode("latin1").split(","))
        elif name == FORWARDED_PROTO:
            proto = value.decode("latin1").rpartition(",")[2].strip().lower()
    changes: dict[str, Any] = {}
    if forwarded_for:
        changes["client"] = [client_address(peer, forwarded_for, proxies), 0]
    scheme = SCHEMES[scope["type"]].get(proto or "")
    if scheme:
        changes["scheme"] = scheme
    return dict(scope, **changes) if changes else scope


class TrustedProxyHeaders:
    """ASGI middleware: ``resolve`` every HTTP and WebSocket scope by ``CONSOLE_TRUSTED_PROXIES``."""

    def __init__(self, application: ASGI3Application) -> None:
        self.application = application

    async def __call__(self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if scope["type"] in SCHEMES:
            scope = resolve(dict(scope), settings.CONSOLE_TRUSTED_PROXIES)  # type: ignore[assignment]  # a Scope with its client and scheme replaced
        return await self.application(scope, receive, send)
