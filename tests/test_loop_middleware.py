"""Django's stock middleware with its hooks on the event loop (approvals/loop_middleware.py).

Through Django's real ASGI handler (AsyncClient): the hooks run on the loop's own thread and do
what Django's own classes do: security headers, the frame policy, CSRF cookies and refusals,
the slash redirect, the user on the request.
"""
import threading

import pytest
from django.test import AsyncClient

from approvals import loop_middleware

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def hook_threads(monkeypatch):
    """The thread each converted middleware's hooks ran in, per class and hook."""
    seen = []
    for cls in (loop_middleware.Security, loop_middleware.Common, loop_middleware.Csrf,
                loop_middleware.Authentication, loop_middleware.XFrameOptions):
        for hook in ("process_request", "process_response"):
            original = getattr(cls, hook, None)
            if original is None:
                continue

            def recording(self, *args, _original=original, _name=f"{cls.__name__}.{hook}"):
                seen.append((_name, threading.current_thread()))
                return _original(self, *args)

            monkeypatch.setattr(cls, hook, recording)
    return seen


async def test_every_hook_runs_on_the_loops_thread(hook_threads):
    loop_thread = threading.current_thread()
    response = await AsyncClient().get("/accounts/login/")
    assert response.status_code == 200
    names = {name for name, _ in hook_threads}
    assert {"Security.process_request", "Security.process_response", "Common.process_request",
            "Csrf.process_request", "Csrf.process_response", "Authentication.process_request",
            "XFrameOptions.process_response"} <= names
    assert all(thread is loop_thread for _, thread in hook_threads)


async def test_with_csrf_in_the_session_the_csrf_hooks_go_back_to_djangos_threads(hook_threads, settings):
    settings.CSRF_USE_SESSIONS = True
    loop_thread = threading.current_thread()
    response = await AsyncClient().get("/accounts/login/")
    assert response.status_code == 200
    csrf = [thread for name, thread in hook_threads if name.startswith("Csrf.")]
    assert csrf and all(thread is not loop_thread for thread in csrf)
    assert all(thread is loop_thread for name, thread in hook_threads if not name.startswith("Csrf."))


async def test_the_headers_django_sets_are_still_set():
    response = await AsyncClient().get("/accounts/login/")
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert "csrftoken" in response.cookies  # the login form's token, set by the CSRF hooks


async def test_a_form_post_without_its_csrf_token_is_still_refused():
    client = AsyncClient(enforce_csrf_checks=True)
    response = await client.post("/accounts/login/", {"username": "a", "password": "b"})
    assert response.status_code == 403


async def test_a_missing_slash_still_redirects():
    response = await AsyncClient().get("/accounts/login")
    assert response.status_code == 301 and response["Location"] == "/accounts/login/"


async def test_the_user_is_still_on_the_request(make_user):
    from asgiref.sync import sync_to_async

    user = await sync_to_async(make_user)("loop-user")
    client = AsyncClient()
    await client.aforce_login(user)
    response = await client.get("/")
    assert response.status_code == 200
    assert b"loop-user" in response.content
