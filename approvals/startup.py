"""Console start-up: load the tool modules at import, start the run supervisor with the server.

Tool modules are imported when the ASGI application is, so a bad module path stops
the server before it listens. The supervisor needs the server's event loop (and a
migrated database): under daphne it starts as soon as the loop runs, so a cluster
member beats and takes over a dead member's runs before anyone connects to it;
otherwise (tests, other servers) on the first HTTP request or WebSocket.
"""

import asyncio
import logging
import os
import sys

from asgiref.typing import ASGI3Application, ASGIReceiveCallable, ASGISendCallable, Scope
from toolnexus import Tool

from approvals.hotpath.gc_freeze import freeze_start_up_objects
from approvals.runs.runner import ensure_started
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
    """Under the daphne command, start the supervisor when daphne's event loop starts running."""
    if not os.path.basename(sys.argv[0] or "").startswith("daphne") or "daphne.server" not in sys.modules:
        return False
    from daphne.server import twisted_loop

    async def start() -> None:
        await ensure_started()
        freeze_start_up_objects()

    def boot() -> None:
        task = twisted_loop.create_task(start())
        task.add_done_callback(_report_boot)
        _boot_tasks.append(task)

    twisted_loop.call_soon(boot)
    return True


def _report_boot(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("the run supervisor did not start (it retries on the first request): %s", task.exception())
