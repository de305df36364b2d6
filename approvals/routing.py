"""WebSocket routes, each behind its own checks.

/ws/console/ is the dashboard's: the browser origin is checked exactly and the
session login decides. /ws/host/ is for programs: an API token decides, and a
browser Origin, when one is sent, must still be the console's own
(security.HostSocketOriginValidator).
"""

from channels.auth import AuthMiddlewareStack
from channels.security.websocket import AllowedHostsOriginValidator
from django.urls import path

from approvals.web import consumers
from approvals.web.security import ExactOriginValidator, HostSocketOriginValidator, TokenAuthMiddleware

websocket_urlpatterns = [
    path(
        "ws/console/",
        AllowedHostsOriginValidator(ExactOriginValidator(AuthMiddlewareStack(consumers.ConsoleConsumer.as_asgi()))),
    ),
    path("ws/host/", HostSocketOriginValidator(TokenAuthMiddleware(consumers.HostConsumer.as_asgi()))),
]
