"""Console start-up: load the tool modules at import, start the run supervisor on the first connection.

Tool modules are imported when the ASGI application is, so a bad module path stops
the server before it listens. The supervisor needs the server's event loop (and a
migrated database), so it starts on the first HTTP request or WebSocket instead.
"""
from .runner import ensure_started
from .toolkit import configured_tools


def load_tools():
    """Import the configured tool modules now; raises ImproperlyConfigured naming a bad one."""
    return configured_tools()


class StartSupervisorMiddleware:
    """ASGI wrapper that makes sure this process's supervisor is running before any request is served."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket"):
            await ensure_started()
        return await self.application(scope, receive, send)
