"""Django's stock middleware with its hooks on the event loop (approvals/hotpath/loop_middleware.py).

Through Django's real ASGI handler (AsyncClient): the hooks run on the loop's own thread and do
what Django's own classes do: security headers, the frame policy, CSRF cookies and refusals,
the slash redirect, the user on the request.
"""

import threading

import pytest
from django.test import AsyncClient

from approvals.hotpath import loop_middleware

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def hook_threads(monkeypatch):
    """The thread each converted middleware's hooks ran in, per class and hook."""
    seen = []
    for cls in (
        loop_middleware.Security,
        loop_middleware.Session,
        loop_middleware.Common,
        loop_middleware.Csrf,
        loop_middleware.Authentication,
        loop_middleware.Messages,
        loop_middleware.XFrameOptions,
    ):
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
    assert {
        "Security.process_request",
        "Security.process_response",
        "Session.process_request",
        "Session.process_response",
        "Common.process_request",
        "Csrf.process_request",
        "Csrf.process_response",
        "Authentication.process_request",
        "Messages.process_request",
        "Messages.process_response",
        "XFrameOptions.process_response",
    } <= names
    assert all(thread is loop_thread for _, thread in hook_threads)


async def test_the_csrf_view_check_runs_on_the_loop_too(monkeypatch):
    from django.middleware.csrf import CsrfViewMiddleware

    loop_thread, seen = threading.current_thread(), []
    original = CsrfViewMiddleware.process_view

    def recording(self, *args):
        seen.append(threading.current_thread())
        return original(self, *args)

    monkeypatch.setattr(CsrfViewMiddleware, "process_view", recording)
    assert (await AsyncClient().get("/accounts/login/")).status_code == 200
    # The middleware's check; the login view's own @csrf_protect checks again wherever that view runs.
    assert seen[0] is loop_thread


async def test_a_login_saves_its_session_through_djangos_thread(hook_threads, make_user):
    from asgiref.sync import sync_to_async
    from django.contrib.sessions.models import Session

    await sync_to_async(make_user)("saver", password="pw-for-tests-1")
    loop_thread = threading.current_thread()
    client = AsyncClient()
    await client.get("/accounts/login/")
    response = await client.post("/accounts/login/", {"username": "saver", "password": "pw-for-tests-1"})
    assert response.status_code == 302
    saved_in = [thread for name, thread in hook_threads if name == "Session.process_response"]
    assert saved_in[-1] is not loop_thread  # the modified session was written off the loop
    assert await Session.objects.filter(session_key=response.cookies["sessionid"].value).aexists()


async def test_with_csrf_in_the_session_the_csrf_hooks_go_back_to_djangos_threads(hook_threads, settings):
    settings.CSRF_USE_SESSIONS = True
    loop_thread = threading.current_thread()
    response = await AsyncClient().get("/accounts/login/")
    assert response.status_code == 200
    csrf = [thread for name, thread in hook_threads if name.startswith("Csrf.")]
    assert csrf and all(thread is not loop_thread for thread in csrf)
    # The secret is now written into the session, so saving it goes off the loop too.
    assert [t for name, t in hook_threads if name == "Session.process_response"][-1] is not loop_thread
    assert all(
        thread is loop_thread
        for name, thread in hook_threads
        if not name.startswith("Csrf.") and name != "Session.process_response"
    )


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
