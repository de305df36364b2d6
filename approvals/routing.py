"""WebSocket routes, each behind its own checks.

/ws/console/ is the dashboard's: the browser origin is checked exactly and the
session login decides. /ws/host/ is for programs: an API token decides, and a
browser Origin, when one is sent, must still be the console's own
(security.HostSocketOriginValidator).
"""

from typing import TYPE_CHECKING

from channels.auth import AuthMiddlewareStack
from channels.security.websocket import AllowedHostsOriginValidator
from django.urls import path

from approvals.web import consumers
from approvals.web.security import (
    ExactOriginValidator,
    HostSocketOriginValidator,
    SocketApplication,
    TokenAuthMiddleware,
)

if TYPE_CHECKING:
    # What Channels' stubs call a route whose callback is an ASGI application, and what URLRouter takes.
    from channels.routing import URLRouter, _ExtendedURLPattern


def socket_route(route: str, application: SocketApplication) -> "_ExtendedURLPattern":
    """``path()`` for a socket: the pattern URLRouter matches, with an ASGI application as its callback."""
    # Django's stubs type path()'s view as an HTTP view returning a response; Channels routes to ASGI apps.
    return path(route, application)  # type: ignore[arg-type, return-value]


def session_login(application: SocketApplication) -> SocketApplication:
    """Channels' session and login scope (``scope["user"]``) in front of ``application``."""
    # channels-stubs type AuthMiddlewareStack's result as any ASGI application, ASGI 2 classes included;
    # Channels 4's is an ASGI 3 middleware, called as (scope, receive, send) like the checks around it.
    return AuthMiddlewareStack(application)  # type: ignore[return-value]


websocket_urlpatterns: list["_ExtendedURLPattern | URLRouter"] = [
    socket_route(
        "ws/console/",
        AllowedHostsOriginValidator(ExactOriginValidator(session_login(consumers.ConsoleConsumer.as_asgi()))),
    ),
    socket_route("ws/host/", HostSocketOriginValidator(TokenAuthMiddleware(consumers.HostConsumer.as_asgi()))),
]
