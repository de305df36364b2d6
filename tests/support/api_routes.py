"""The API's routes as api_urls.py declares them, and each one's path as the OpenAPI document writes it."""

import re

from django.urls import URLPattern

from approvals import api_urls


def documented_path(pattern):
    """``requests/<str:request_id>/answer`` -> ``/requests/{request_id}/answer``."""
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", str(pattern.pattern))


def api_routes():
    return [p for p in api_urls.urlpatterns if isinstance(p, URLPattern) and p.name != "api-not-found"]
