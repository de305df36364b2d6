"""``/healthz`` and ``/readyz``: an ASGI wrapper in front of Django, so a probe is answered whatever its
Host header (a pod address is not in ALLOWED_HOSTS), over plain http under SECURE_SSL_REDIRECT, with
no login, no session and no middleware. Neither writes anything.

``/healthz``: the process answers (liveness). ``/readyz``: this process can serve (readiness): the
database answers a read, a message sent on the channel layer comes back, this process's supervisor
heartbeat is fresh as the other consoles read it, and it is not shutting down. Each check is bounded
by READINESS_TIMEOUT_SECONDS; 200 when all pass, else 503, with every check's result.
docs/operations.md, "Health probes", is the operator's account of it.
"""

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings
from django.utils import timezone

from approvals.runs import processes, shutdown
from approvals.runs.supervisor import PROCESS_ID, supervisor

logger = logging.getLogger(__name__)

PROBES = ("/healthz", "/readyz")
HEADERS = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]


class HealthProbes:
    """ASGI wrapper: answers the two probe paths itself and passes everything else to ``application``."""

    def __init__(self, application: Callable[..., Awaitable[None]]) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] != "http" or scope["path"] not in PROBES:
            return await self.application(scope, receive, send)
        if scope["method"] not in ("GET", "HEAD"):
            return await _respond(send, scope, 405, {"error": "method_not_allowed", "message": "Use GET."}, allow=True)
        if scope["path"] == "/healthz":
            return await _respond(send, scope, 200, {"status": "ok"})
        ready, checks = await readiness()
        await _respond(
            send, scope, 200 if ready else 503, {"status": "ok" if ready else "unavailable", "checks": checks}
        )


async def _respond(
    send: Callable[..., Any], scope: dict[str, Any], status: int, body: dict[str, Any], allow: bool = False
) -> None:
    payload = json.dumps(body).encode()
    headers = [*HEADERS, (b"content-length", str(len(payload)).encode())]
    if allow:
        headers.append((b"allow", b"GET, HEAD"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else payload})


# -- readiness ----------------------------------------------------------------------------------


async def readiness() -> tuple[bool, dict[str, dict[str, Any]]]:
    """Whether this process can serve, and each check's result (``ok``, and why not)."""
    timeout = settings.TOOLNEXUS["READINESS_TIMEOUT_SECONDS"]
    database, layer = await asyncio.gather(_database(timeout), _channel_layer(timeout))
    checks = {
        "database": database,
        "channel_layer": layer,
        "heartbeat": _heartbeat(database),
        "shutdown": _shutdown(),
    }
    for check in checks.values():
        check.pop("last_beat", None)
    ready = all(check["ok"] for check in checks.values())
    _log_change(ready, checks)
    return ready, checks


class _Bounded:
    """One call in flight at a time, each probe waiting for it at most ``timeout``: on SQLite the read
    queues on the one database thread (hotpath/database_thread.py), and probes that time out behind a
    long write must not queue more reads behind it."""

    def __init__(self, call: Callable[[], Awaitable[Any]]) -> None:
        self.call = call
        self.running: asyncio.Future[Any] | None = None

    async def __call__(self, timeout: float) -> Any:
        if self.running is None or self.running.done() or self.running.get_loop() is not asyncio.get_running_loop():
            self.running = asyncio.ensure_future(self.call())
        return await asyncio.wait_for(asyncio.shield(self.running), timeout)


_read_last_beat = _Bounded(lambda: processes.alast_beat(PROCESS_ID))


async def _database(timeout: float) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        last_beat = await _read_last_beat(timeout)
    except TimeoutError:
        return {"ok": False, "error": f"no answer within {timeout:g}s"}
    except Exception as exc:  # the class only: the message may name hosts and users
        logger.debug("readiness: the database check failed: %s", exc)
        return {"ok": False, "error": type(exc).__name__}
    return {"ok": True, "ms": _ms_since(started), "last_beat": last_beat}


async def _channel_layer(timeout: float) -> dict[str, Any]:
    """A message sent to a channel of this process, and received back."""
    layer = get_channel_layer()
    if layer is None:
        return {"ok": False, "error": "no channel layer configured"}
    started = time.perf_counter()
    nonce = uuid.uuid4().hex
    try:
        async with asyncio.timeout(timeout):
            channel = await layer.new_channel()
            await layer.send(channel, {"type": "health.ping", "nonce": nonce})
            while (await layer.receive(channel)).get("nonce") != nonce:
                pass
    except TimeoutError:
        return {"ok": False, "error": f"no round trip within {timeout:g}s"}
    except Exception as exc:
        logger.debug("readiness: the channel layer check failed: %s", exc)
        return {"ok": False, "error": type(exc).__name__}
    return {"ok": True, "ms": _ms_since(started)}


def _heartbeat(database: dict[str, Any]) -> dict[str, Any]:
    """Fresh as the other consoles read it: written within HEARTBEAT_TIMEOUT_SECONDS, or they take its runs over."""
    sup = supervisor()
    if not sup.started or sup.pulse is None or sup.pulse.done():
        return {"ok": False, "error": "the run supervisor is not running"}
    if not database["ok"]:
        return {"ok": False, "error": "unknown: the database did not answer"}
    if database["last_beat"] is None:
        return {"ok": False, "error": "no heartbeat row: this process was declared dead or has left"}
    age = (timezone.now() - database["last_beat"]).total_seconds()
    limit = timedelta(seconds=settings.TOOLNEXUS["HEARTBEAT_TIMEOUT_SECONDS"]).total_seconds()
    if age > limit:
        return {
            "ok": False,
            "error": f"last beat {age:.1f}s ago (the limit is {limit:g}s)",
            "age_seconds": round(age, 3),
        }
    return {"ok": True, "age_seconds": round(age, 3)}


def _shutdown() -> dict[str, Any]:
    since = shutdown.seconds_stopping()
    if since is None:
        return {"ok": True}
    return {"ok": False, "error": f"shutting down (SIGTERM {since:.1f}s ago): no new runs here"}


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


_was_ready: bool | None = None


def _log_change(ready: bool, checks: dict[str, dict[str, Any]]) -> None:
    """One line when readiness changes, naming what failed (not one per probe)."""
    global _was_ready
    if ready == _was_ready:
        return
    if ready:
        logger.info("ready: every readiness check passes")
    else:
        failing = ", ".join(f"{name} ({check['error']})" for name, check in checks.items() if not check["ok"])
        logger.warning("not ready: %s", failing)
    _was_ready = ready
