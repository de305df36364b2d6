"""Console start-up: load the tool modules at import, start the run supervisor with the server, stop on SIGTERM.

Tool modules are imported when the ASGI application is, so a bad module path stops
the server before it listens. The supervisor needs the server's event loop (and a
migrated database): under daphne it starts as soon as the loop runs, so a cluster
member beats and takes over a dead member's runs before anyone connects to it;
otherwise (tests, other servers) on the first HTTP request or WebSocket.
"""

import asyncio
import contextvars
import logging
import os
import signal
import sys
from types import FrameType

from asgiref.typing import ASGI3Application, ASGIReceiveCallable, ASGISendCallable, Scope
from django.conf import settings
from toolnexus import Tool

from approvals.hotpath.gc_freeze import freeze_start_up_objects
from approvals.runs import shutdown
from approvals.runs.runner import discard_channels_of, ensure_started
from approvals.runs.supervisor import PROCESS_ID
from approvals.runs.toolkit import configured_tools

logger = logging.getLogger(__name__)
_boot_tasks: list[asyncio.Task[None]] = []


def load_tools() -> list[Tool]:
    """Import the configured tool modules now; raises ImproperlyConfigured naming a bad one."""
    return configured_tools()


class StartSupervisorMiddleware:
    """ASGI wrapper that makes sure this process's supervisor is running before any request is served."""

    def __init__(self, application: ASGI3Application) -> None:
        self.application = application

    async def __call__(self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if scope["type"] in ("http", "websocket"):
            await ensure_started()
        return await self.application(scope, receive, send)


def start_supervisor_with_daphne() -> bool:
    """Under the daphne command, start the supervisor when daphne's event loop starts running (again every
    HEARTBEAT_SECONDS until the database lets it), and stop gracefully on SIGTERM."""
    if not os.path.basename(sys.argv[0] or "").startswith("daphne") or "daphne.server" not in sys.modules:
        return False
    from daphne.server import twisted_loop

    turn_off_daphnes_access_log()

    async def start() -> None:
        await ensure_started()
        freeze_start_up_objects()

    def boot() -> None:
        task = twisted_loop.create_task(start())
        task.add_done_callback(retry_unless_started)
        _boot_tasks.append(task)

    def retry_unless_started(task: asyncio.Task[None]) -> None:
        if task.cancelled() or task.exception() is None:
            return
        # /readyz reports the supervisor missing until it starts: a probe only reads, so it retries here.
        retry = settings.TOOLNEXUS["HEARTBEAT_SECONDS"]
        logger.error("the run supervisor did not start (retrying in %gs): %s", retry, task.exception())
        twisted_loop.call_later(retry, boot)

    twisted_loop.call_soon(boot)
    twisted_loop.call_soon(_stop_gracefully_on_sigterm, twisted_loop)
    return True


class _NoAccessLog:
    """daphne's action logger, silent: approvals.telemetry.access writes the access log."""

    def __init__(self, stream: object) -> None:
        pass

    def __call__(self, protocol: str, action: str, details: dict[str, object]) -> None:
        pass


def turn_off_daphnes_access_log() -> None:
    """Keep daphne from writing its own access log (an NCSA line on stdout with the whole query string, a
    socket's ``?token=`` too): the console's is ``approvals.telemetry.access``, in the console's log format.

    daphne's command line builds its access log after it imports the application, by the name
    ``daphne.cli.AccessLogGenerator``: at this import, that name is still to be looked up. Whatever
    ``--access-log`` or ``-v`` says, one access log is written, the console's.
    """
    import daphne.cli

    daphne.cli.AccessLogGenerator = _NoAccessLog  # type: ignore[misc,assignment]  # daphne's class, replaced before use


def _stop_gracefully_on_sigterm(loop: asyncio.AbstractEventLoop) -> None:
    """Replace the reactor's SIGTERM handler (installed as it started, just before this runs): the stop in
    approvals/runs/shutdown.py first, then the reactor's own. A second SIGTERM stops at once; SIGINT
    (Ctrl-C) keeps the reactor's immediate stop."""
    from twisted.internet import reactor
    from twisted.internet.error import ReactorNotRunning

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        # A context of its own: the signal lands in whatever request was running, and the stop is none of its doing.
        loop.call_soon_threadsafe(begin, context=contextvars.Context())

    def begin() -> None:
        if shutdown.is_stopping():
            logger.warning("a second SIGTERM: stopping now")
            stop_reactor()
            return
        shutdown.begin()  # now, not when the task first runs: readiness is false from the next probe on
        _boot_tasks.append(loop.create_task(stop()))

    def stop_reactor() -> None:
        try:
            reactor.stop()  # type: ignore[misc]  # twisted types the global reactor as a module, not an IReactorCore
        except ReactorNotRunning:  # already stopping
            pass

    async def stop() -> None:
        try:
            await shutdown.stop_gracefully()
            await discard_channels_of([PROCESS_ID])  # nobody declares this process dead: it left
        except Exception:
            logger.exception("the graceful stop failed; stopping now")
        finally:
            stop_reactor()

    signal.signal(signal.SIGTERM, on_sigterm)
