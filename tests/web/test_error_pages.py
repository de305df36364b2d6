"""The console's own 500 page (templates/500.html) as Django's handler500 renders it: with no context, no
request, no database (this module may not touch it), and nothing of Django's debug page with DEBUG off."""

import pytest
from django.db import OperationalError
from django.templatetags.static import static
from django.test import Client
from django.urls import include, path


def a_page_that_fails(request):
    raise OperationalError("database is locked")


urlpatterns = [path("fails/", a_page_that_fails), path("", include("toolnexus_site.urls"))]


@pytest.mark.urls(__name__)
def test_a_server_error_is_the_consoles_own_page_without_the_database(settings):
    settings.DEBUG = False
    response = Client(raise_request_exception=False).get("/fails/")
    assert response.status_code == 500
    content = response.content.decode()
    assert "<title>Server error · toolnexus console</title>" in content
    assert '<h1 id="server-error-title">Something went wrong</h1>' in content
    assert '<a href="/" id="server-error-inbox">Back to the inbox</a>' in content
    assert 'name="viewport"' in content and static("approvals/console.css") in content
    assert "database is locked" not in content and "Traceback" not in content
