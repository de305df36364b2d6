"""WebSocket origin check against full scheme://host:port values.

Channels' AllowedHostsOriginValidator compares host names only, so any page served
from another port of the same host would pass. This validator sits inside it and
also requires the exact origin: one listed in CONSOLE_ALLOWED_ORIGINS, or the
console's own (the scheme and Host header the socket was opened with).
"""
from channels.security.websocket import WebsocketDenier
from django.conf import settings


def _header(scope, name):
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin1")
    return None


def origin_allowed(scope):
    origin = _header(scope, b"origin")
    if not origin:
        return False
    if origin in settings.CONSOLE_ALLOWED_ORIGINS:
        return True
    host = _header(scope, b"host")
    if not host:
        return False
    scheme = "https" if scope.get("scheme") == "wss" else "http"
    return origin == f"{scheme}://{host}"


class ExactOriginValidator:
    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and not origin_allowed(scope):
            denier = WebsocketDenier()
            return await denier(scope, receive, send)
        return await self.application(scope, receive, send)
