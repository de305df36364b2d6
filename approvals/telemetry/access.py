"""The access log: one line per HTTP request and per socket, in the console's log format, with its request id.

It replaces daphne's own (an NCSA line on stdout that carries the whole query string, a socket's
``?token=`` included: ``approvals/startup.py`` turns it off). Around the whole application, it sets
the correlation id (``logs.request_id``) for everything the request or socket does, echoes it in an
``X-Request-ID`` response header, and writes the line when the response or the socket ends:
method, path, status, bytes, duration, client. An ``X-Request-ID`` from the client is taken as it
is sent only where ``approvals.web.proxy_headers`` left it, that is from a trusted proxy; a value
that does not look like an id is replaced by a new one.

The query string is written with its keys and only the values of ``SHOWN_QUERY_VALUES`` (a token or
a search stays out); a password-reset link's token is cut from its path.
"""

import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast
from urllib.parse import parse_qsl, quote

from asgiref.typing import ASGIReceiveCallable, ASGISendCallable, ASGISendEvent, Scope

from approvals.telemetry import logs

logger = logging.getLogger("approvals.access")

HEADER = b"x-request-id"
# What an incoming X-Request-ID may look like (a UUID, a proxy's hex id, a trace id): anything else is replaced.
ACCEPTED_ID = re.compile(r"[A-Za-z0-9._:@/+=-]{1,128}")
# Query values worth a line: paging and waiting. Every other key is written as key=… .
SHOWN_QUERY_VALUES = frozenset({"wait", "limit", "before", "after", "requests_after", "page"})
# Paths that carry a secret: Django's password-reset link (/accounts/reset/<uid>/<token>/), its slash optional
# (APPEND_SLASH redirects a link without it to one that still works), in any case, after any run of slashes.
SECRET_IN_PATH = re.compile(r"^(/+accounts/+reset/+[^/]+/+)(?!set-password(?:/|$))[^/]+(?:/|$)", re.IGNORECASE)
# Probes answered 200 every few seconds are written at DEBUG; a failing one at INFO like any request.
QUIET_PATHS = frozenset({"/healthz", "/readyz"})
# A decoded path's control characters (%0A) are written encoded again: a path cannot start a line of its own.
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# A target longer than this is cut: a line stays a line whatever a client sends.
LONGEST_TARGET = 1000
# What a line's message says already: the text format does not repeat them after it.
TOLD = ("method", "path", "status")


def incoming_request_id(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The request's X-Request-ID when it looks like an id, else None."""
    for name, value in headers:
        if name == HEADER:
            text = value.decode("latin1").strip()
            return text if ACCEPTED_ID.fullmatch(text) else None
    return None


def shown_target(path: str, query_string: bytes) -> str:
    """The path and query a line shows: reset tokens cut, query values hidden but for ``SHOWN_QUERY_VALUES``."""
    path = CONTROL.sub(lambda found: f"%{ord(found.group()):02X}", SECRET_IN_PATH.sub(r"\1…/", path))
    if query_string:
        pairs = parse_qsl(query_string.decode("latin1"), keep_blank_values=True)
        shown = "&".join(
            f"{quote(key, safe='')}={quote(value, safe='') if key in SHOWN_QUERY_VALUES else '…'}"
            for key, value in pairs
        )
        path = f"{path}?{shown}" if shown else path
    return path if len(path) <= LONGEST_TARGET else path[:LONGEST_TARGET] + "…"


class AccessLog:
    """ASGI middleware: a correlation id for each HTTP request and socket, and its access log line."""

    def __init__(self, application: Callable[..., Awaitable[None]]) -> None:
        self.application = application

    async def __call__(self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.application(scope, receive, send)
        connection = cast(dict[str, Any], scope)
        correlation = incoming_request_id(connection.get("headers") or []) or logs.new_request_id()
        echoed = (HEADER, correlation.encode("latin1"))
        token = logs.request_id.set(correlation)
        started = time.perf_counter()
        status: int | None = None
        size = 0
        close_code: int | None = None

        async def send_logged(message: ASGISendEvent) -> None:
            nonlocal status, size, close_code
            event = cast(dict[str, Any], message)
            sort = event["type"]
            if sort == "http.response.start":
                status = event["status"]
                message = cast(ASGISendEvent, {**event, "headers": [*event.get("headers", ()), echoed]})
            elif sort == "http.response.body":
                size += len(event.get("body", b""))
            elif sort == "websocket.accept":  # daphne sends no headers with the handshake: a socket's id is only logged
                status = 101
            elif sort == "websocket.close":
                close_code = event.get("code", 1000)
                if status is None:
                    status = 403  # closed before the handshake was accepted: refused, as daphne answers it
            await send(message)

        failed = False
        try:
            await self.application(scope, receive, send_logged)
        except BaseException:
            failed = True
            raise
        finally:
            self._write(connection, correlation, status, size, close_code, time.perf_counter() - started, failed)
            logs.request_id.reset(token)

    @staticmethod
    def _write(
        scope: dict[str, Any],
        correlation: str,
        status: int | None,
        size: int,
        close_code: int | None,
        seconds: float,
        failed: bool,
    ) -> None:
        path = scope.get("path", "")
        quiet = path in QUIET_PATHS and status == 200
        level = logging.DEBUG if quiet else logging.INFO
        if not logger.isEnabledFor(level):
            return
        method = scope.get("method", "GET") if scope["type"] == "http" else "WS"
        target = shown_target(path, scope.get("query_string", b""))
        if status is None:
            status = 500 if failed else 499  # the client went away before an answer
        fields: dict[str, Any] = {
            "method": method,
            "path": target,
            "status": status,
            "bytes": size if scope["type"] == "http" else None,
            "duration_ms": round(seconds * 1000, 1),
            "client": (scope.get("client") or [None])[0],
            "close_code": close_code,
        }
        logger.log(
            level, "%s %s %s", method, target, status, extra={"fields": fields, "told": TOLD, "request_id": correlation}
        )
