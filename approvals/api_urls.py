from django.urls import URLPattern, re_path

from approvals.web import api


def _routes() -> list[URLPattern]:
    """Ninja's routes, one per path (a GET and a POST on one path share a view), without its root page."""
    routes: dict[str, URLPattern] = {}
    for pattern in api.api.urls[0]:
        if isinstance(pattern, URLPattern) and pattern.name != "api-root":
            routes.setdefault(str(pattern.pattern), pattern)
    return list(routes.values())


urlpatterns = [
    *_routes(),
    # Last: any other path under /api/v1/ is a JSON 404, not the HTML page a program cannot read.
    re_path(r"", api.no_such_endpoint, name="api-not-found"),
]
