"""The Content-Security-Policy header (approvals/web/security.py's ``content_security_policy``, SECURE_CSP).

Every response carries the same policy: a page, an API answer, the admin, a refusal. The middleware
sets it on the event loop (no thread hop) and an operator's CONSOLE_CSP_EXTRA only adds sources.
Chromium's side, that no page breaks it, is tests/e2e/test_content_security_policy.py.
"""

import logging
import threading

import pytest
from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpResponse
from django.test import AsyncClient

from approvals.web import security
from tests.support.api_client import logged_in
from tests.support.live_console import console_env, manage
from toolnexus_site.deployment import DeploymentConfigError, content_security_policy

pytestmark = pytest.mark.django_db(transaction=True)

POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; object-src 'none'; form-action 'self'"
)


async def test_a_page_carries_the_policy():
    response = await AsyncClient().get("/accounts/login/")
    assert response.status_code == 200
    assert response["Content-Security-Policy"] == POLICY


async def test_an_api_answer_carries_the_policy(alice, issue_token):
    secret = await sync_to_async(issue_token)(alice)
    response = await AsyncClient().get("/api/v1/requests", headers={"Authorization": f"Bearer {secret}"})
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Security-Policy"] == POLICY


async def test_an_admin_page_carries_the_policy(make_user):
    admin = await sync_to_async(make_user)("admin", is_staff=True, is_superuser=True)
    client = await logged_in(admin)
    response = await client.get("/admin/approvals/policy/add/")
    assert response.status_code == 200
    assert response["Content-Security-Policy"] == POLICY


async def test_refusals_carry_it_too(settings):
    # The JSON refusal of a host the console does not serve comes from the first middleware after this one.
    bad_host = await AsyncClient().get("/api/v1/requests", headers={"Host": "evil.example"})
    assert bad_host.status_code == 400
    assert bad_host["Content-Security-Policy"] == POLICY
    refused = await AsyncClient(enforce_csrf_checks=True).post("/accounts/login/", {"username": "a", "password": "b"})
    assert refused.status_code == 403 and b"Form refused (403)" in refused.content  # not Django's inline-styled page
    assert refused["Content-Security-Policy"] == POLICY
    settings.DEBUG = False
    not_found = await AsyncClient().get("/no/such/page/")
    assert not_found.status_code == 404 and b'id="not-found"' in not_found.content
    assert not_found["Content-Security-Policy"] == POLICY


async def test_djangos_debug_pages_go_without_it(settings):
    # With DEBUG on, a 404 is Django's technical page: inline styles and scripts, for the developer only.
    settings.DEBUG = True
    response = await AsyncClient().get("/no/such/page/")
    assert response.status_code == 404
    assert "Content-Security-Policy" not in response


def test_a_view_that_sets_its_own_policy_keeps_it():
    def view(request):
        response = HttpResponse("a page")
        response["Content-Security-Policy"] = "default-src 'none'"
        return response

    assert security.content_security_policy(view)(None)["Content-Security-Policy"] == "default-src 'none'"


async def test_the_header_is_set_on_the_loops_own_thread(monkeypatch):
    loop_thread, seen = threading.current_thread(), []
    original = security._debug_page

    def recording(response):
        seen.append(threading.current_thread())
        return original(response)

    monkeypatch.setattr(security, "_debug_page", recording)
    response = await AsyncClient().get("/accounts/login/")
    assert response["Content-Security-Policy"] == POLICY
    assert seen == [loop_thread]


def test_the_async_middleware_chain_takes_no_thread_hop_for_it(caplog, settings):
    # With DEBUG, Django logs each middleware it had to wrap in sync_to_async / async_to_sync for the chain.
    settings.DEBUG = True
    with caplog.at_level(logging.DEBUG, logger="django.request"):
        ASGIHandler().load_middleware(is_async=True)
    adapted = [record.getMessage() for record in caplog.records if "adapted" in record.getMessage()]
    assert not [message for message in adapted if "content_security_policy" in message], adapted


# -- CONSOLE_CSP_EXTRA ---------------------------------------------------------------------------


def test_without_extra_sources_the_policy_is_the_consoles_own():
    assert security.policy_header(content_security_policy(None)) == POLICY
    assert security.policy_header(content_security_policy("")) == POLICY


def test_extra_sources_are_added_to_their_directives():
    policy = content_security_policy(
        "script-src https://analytics.example.com; connect-src https://analytics.example.com 'self'"
    )
    assert policy["script-src"] == ["'self'", "https://analytics.example.com"]
    assert policy["connect-src"] == ["'self'", "https://analytics.example.com"]  # 'self' is not repeated
    assert policy["style-src"] == ["'self'"]


def test_a_directive_the_policy_does_not_name_starts_from_default_src():
    # Without font-src the browser used default-src's 'self' for fonts: adding an origin must keep it.
    assert content_security_policy("font-src https://fonts.example.com")["font-src"] == [
        "'self'",
        "https://fonts.example.com",
    ]


def test_a_source_added_to_a_none_directive_replaces_none():
    # 'none' with any other source is ignored by browsers: the result would allow nothing.
    assert content_security_policy("frame-ancestors https://portal.example.com")["frame-ancestors"] == [
        "https://portal.example.com"
    ]


@pytest.mark.parametrize("extra", ["script-src", "https://analytics.example.com", "Script_Src https://a.example"])
def test_a_malformed_extra_is_refused_with_an_example(extra):
    with pytest.raises(DeploymentConfigError, match="CONSOLE_CSP_EXTRA.*script-src https://analytics"):
        content_security_policy(extra)


def test_a_malformed_extra_stops_the_console_at_start_up_with_its_message(tmp_path):
    env = console_env(tmp_path / "unused.sqlite3", CONSOLE_CSP_EXTRA="script-src")
    with pytest.raises(RuntimeError, match=r"DeploymentConfigError: CONSOLE_CSP_EXTRA: 'script-src' is not"):
        manage(env, "check")


def test_an_extra_reaches_the_header_the_console_sends(tmp_path):
    env = console_env(tmp_path / "unused.sqlite3", CONSOLE_CSP_EXTRA="img-src https://avatars.example.com")
    script = "from django.conf import settings; from approvals.web.security import policy_header as p; "
    printed = manage(env, "shell", "--no-imports", "-c", script + "print(p(settings.SECURE_CSP))")
    assert printed.strip() == POLICY.replace("img-src 'self' data:", "img-src 'self' data: https://avatars.example.com")
