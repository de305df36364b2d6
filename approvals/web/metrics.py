"""``/metrics``: this process's Prometheus metrics (approvals/telemetry/metrics.py), for whoever presents
``Authorization: Bearer <CONSOLE_METRICS_TOKEN>`` or connects from an address in CONSOLE_METRICS_ALLOW.

An ASGI wrapper like the health probes (web/health.py), inside TrustedProxyHeaders so the client address
is the one it leaves: a scraper reaches it at a pod address, over plain http, with no session, no
middleware and no start of the run supervisor. The database's gauges are read on the database thread.
docs/operations.md, "Metrics", is the operator's account of it.
"""

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable
from typing import Any, cast

from asgiref.typing import ASGI3Application, ASGIReceiveCallable, ASGISendCallable, Scope
from django.conf import settings
from prometheus_client import CONTENT_TYPE_LATEST

from approvals.team import tokens
from approvals.telemetry import metrics

PATH = "/metrics"
REFUSED = (
    "Reading /metrics takes 'Authorization: Bearer <CONSOLE_METRICS_TOKEN>' or a client address listed in "
    'CONSOLE_METRICS_ALLOW (docs/operations.md, "Metrics").'
)


def may_read(scope: dict[str, Any]) -> bool:
    """The caller presents the metrics token, or comes from an allowed address (as TrustedProxyHeaders left it)."""
    access = settings.CONSOLE_METRICS
    if access.token:
        header = next((value for name, value in scope.get("headers") or [] if name == b"authorization"), b"")
        secret = tokens.bearer_secret(header.decode("latin1"))
        if secret and hmac.compare_digest(secret.encode(), access.token.encode()):
            return True
    client = (scope.get("client") or [None])[0]
    if not access.allow or client is None:
        return False
    try:
        address = ipaddress.ip_address(client)
    except ValueError:
        return False
    return any(address in network for network in access.allow)


class MetricsEndpoint:
    """ASGI wrapper: answers ``/metrics`` itself and passes everything else to ``application``."""

    def __init__(self, application: ASGI3Application | Callable[..., Awaitable[None]]) -> None:
        self.application = application

    async def __call__(self, asgi_scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if asgi_scope["type"] != "http" or asgi_scope["path"] != PATH:
            return await self.application(asgi_scope, receive, send)
        scope = cast(dict[str, Any], asgi_scope)
        if scope["method"] not in ("GET", "HEAD"):
            body = {"error": "method_not_allowed", "message": "Use GET."}
            return await _respond(send, scope, 405, json.dumps(body).encode(), [(b"allow", b"GET, HEAD")])
        if not may_read(scope):
            body = {"error": "forbidden", "message": REFUSED}
            return await _respond(send, scope, 403, json.dumps(body).encode())
        await _respond(send, scope, 200, await metrics.aexposition(), content_type=CONTENT_TYPE_LATEST.encode())


async def _respond(
    send: Callable[..., Any],
    scope: dict[str, Any],
    status: int,
    payload: bytes,
    extra: list[tuple[bytes, bytes]] | None = None,
    content_type: bytes = b"application/json",
) -> None:
    headers = [
        (b"content-type", content_type),
        (b"cache-control", b"no-store"),
        (b"content-length", str(len(payload)).encode()),
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else payload})
