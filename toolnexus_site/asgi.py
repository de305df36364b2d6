"""ASGI entry point: HTTP through Django, WebSockets through Channels.

Importing this module is the console's start-up: it loads the configured tool
modules (a bad module path stops the server with its name). The run supervisor
starts with daphne's event loop (or on the first connection elsewhere): it beats,
and takes over the runs of console processes that stopped; on SIGTERM it stops gracefully.
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolnexus_site.settings")

from approvals.hotpath.database_thread import get_asgi_application  # noqa: E402

# Django's handler, with no thread started per API call on SQLite (approvals/hotpath/database_thread.py).
django_asgi_app = get_asgi_application()

from approvals.hotpath.static_files import StaticFilesOnTheLoop  # noqa: E402

# Static files (collected by `manage.py collectstatic`) by WhiteNoise, answered on the event loop
# before Django's middleware chain (approvals/hotpath/static_files.py).
static_and_django = StaticFilesOnTheLoop(django_asgi_app)

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from approvals import routing, startup  # noqa: E402
from approvals.telemetry.access import AccessLog  # noqa: E402
from approvals.web.health import HealthProbes  # noqa: E402
from approvals.web.metrics import MetricsEndpoint  # noqa: E402
from approvals.web.proxy_headers import TrustedProxyHeaders  # noqa: E402

startup.load_tools()
startup.start_supervisor_with_daphne()

# The client address and scheme that everything inside sees, forwarded only by trusted proxies (an
# X-Request-ID too); then the access log, which sets the request id everything below logs with.
application = TrustedProxyHeaders(
    AccessLog(
        # /healthz and /readyz: any Host, plain http, no middleware, no supervisor start of their own.
        HealthProbes(
            # /metrics, for the metrics token or an allowed client address as the proxies leave it.
            MetricsEndpoint(
                startup.StartSupervisorMiddleware(
                    ProtocolTypeRouter(
                        {
                            "http": static_and_django,
                            # Each socket route carries its own origin and login checks (approvals/routing.py).
                            "websocket": URLRouter(routing.websocket_urlpatterns),
                        }
                    )
                )
            )
        )
    )
)
