"""An API call's database work runs on the one shared database thread (approvals/hotpath/database_thread.py):
every call on SQLite, the calls of a few rows by their keys on PostgreSQL (tests/cluster runs this module there).

Through Django's real ASGI handler (channels.testing.HttpCommunicator), which gives each
request a ThreadSensitiveContext and so, without the decorator, a thread of its own.
"""

import json
import threading

import pytest
from asgiref.sync import sync_to_async
from channels.testing import HttpCommunicator
from django.core.asgi import get_asgi_application
from django.core.signals import request_started
from django.db import connection
from django.db.backends.signals import connection_created

from approvals.hotpath import database_thread
from approvals.models import Run, RunStatus
from approvals.team import tokens

pytestmark = pytest.mark.django_db(transaction=True)


async def get(application, secret, path):
    communicator = HttpCommunicator(
        application,
        "GET",
        path,
        headers=[(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {secret}".encode())],
    )
    response = await communicator.get_response(timeout=10)
    return response["status"], json.loads(response["body"])


async def get_run(application, secret, run_id):
    return await get(application, secret, f"/api/v1/runs/{run_id}")


@pytest.fixture
def threads_authenticating(monkeypatch):
    """The thread each API call's token check ran on."""
    seen = []

    def authenticate(secret, **kwargs):
        seen.append(threading.get_ident())
        return tokens.authenticate(secret, **kwargs)

    monkeypatch.setattr(tokens, "aauthenticate", sync_to_async(authenticate))
    return seen


async def test_a_call_of_one_row_uses_the_shared_database_thread_and_on_sqlite_opens_no_connection(
    make_user, issue_token, threads_authenticating
):
    user = await sync_to_async(make_user)("svc", password=None)
    secret = await sync_to_async(issue_token)(user)
    run = await Run.objects.acreate(tool="deploy", status=RunStatus.SUCCEEDED, started_by=user)
    shared_thread = await sync_to_async(threading.get_ident)()  # no request context: asgiref's single thread
    application = get_asgi_application()
    assert database_thread.shares_the_database_thread("GET", f"/api/v1/runs/{run.pk}")

    opened = []

    def note(sender, connection, **kwargs):
        opened.append(threading.get_ident())

    connection_created.connect(note)
    try:
        for _ in range(3):
            status, body = await get_run(application, secret, run.pk)
            assert (status, body["id"], body["started_by"]) == (200, run.pk, "svc")
    finally:
        connection_created.disconnect(note)
    assert threads_authenticating == [shared_thread] * 3
    if connection.vendor == "sqlite":  # PostgreSQL's pool hands a connection out per use: Django says "created"
        assert opened == []  # the shared thread's connection was open already


async def test_a_list_of_requests_shares_the_thread_on_sqlite_only(make_user, issue_token, threads_authenticating):
    # On PostgreSQL a read that grows with the data keeps a thread of its own: it never holds up runs and sockets.
    user = await sync_to_async(make_user)("svc", password=None)
    secret = await sync_to_async(issue_token)(user)
    shared_thread = await sync_to_async(threading.get_ident)()
    status, body = await get(get_asgi_application(), secret, "/api/v1/requests")
    assert (status, body["requests"]) == (200, [])
    assert (threads_authenticating == [shared_thread]) == (connection.vendor == "sqlite")


@pytest.mark.parametrize(
    ("method", "path", "on_postgresql"),
    [
        ("POST", "/api/v1/runs", True),
        ("GET", "/api/v1/runs/12", True),
        ("POST", "/api/v1/runs/12/cancel", True),
        ("POST", "/api/v1/runs/12/retry", True),
        ("POST", "/api/v1/requests", True),
        ("GET", "/api/v1/requests/pnd-1", True),
        ("GET", "/api/v1/requests/pnd-1/answer", True),
        ("POST", "/api/v1/requests/pnd-1/answer", True),
        ("POST", "/api/v1/requests/pnd-1/hand", True),
        ("GET", "/api/v1/requests", False),  # the inbox: a search over every open request
        ("POST", "/api/v1/requests/bulk", False),  # as many requests as match a filter
        ("GET", "/api/v1/runs/12/transcript", False),  # as long as the run's conversation
        ("GET", "/api/v1/openapi.json", False),
        ("GET", "/api/v1/runs/12/answer", False),  # no such call: Django's way
    ],
)
def test_which_calls_share_the_thread(method, path, on_postgresql):
    assert database_thread.shares_on("postgresql", method, path) is on_postgresql
    assert database_thread.shares_on("sqlite", method, path) is True
    assert database_thread.shares_on("sqlite", method, "/dashboard/") is False


async def test_without_it_each_request_gets_a_thread_of_its_own(
    make_user, issue_token, threads_authenticating, monkeypatch
):
    # What the decorator changes: Django's handler gives every request its own thread.
    monkeypatch.setattr(database_thread, "shares_the_database_thread", lambda method, path: False)
    user = await sync_to_async(make_user)("svc", password=None)
    secret = await sync_to_async(issue_token)(user)
    run = await Run.objects.acreate(tool="deploy", status=RunStatus.SUCCEEDED)
    shared_thread = await sync_to_async(threading.get_ident)()
    application = get_asgi_application()
    for _ in range(2):
        status, _ = await get_run(application, secret, run.pk)
        assert status == 200
    assert shared_thread not in threads_authenticating


async def test_through_the_consoles_handler_an_api_call_on_sqlite_starts_no_thread_of_its_own(make_user, issue_token):
    # Django's handler runs a request's request_started receivers (close_old_connections) on a thread started
    # for that request; the console's (toolnexus_site/asgi.py) runs them on the shared database thread.
    user = await sync_to_async(make_user)("svc", password=None)
    secret = await sync_to_async(issue_token)(user)
    run = await Run.objects.acreate(tool="deploy", status=RunStatus.SUCCEEDED)
    shared_thread = await sync_to_async(threading.get_ident)()
    started_on = []

    def note(**kwargs):
        started_on.append(threading.get_ident())

    request_started.connect(note)
    try:
        for application in (get_asgi_application(), database_thread.get_asgi_application()):
            status, _ = await get_run(application, secret, run.pk)
            assert status == 200
    finally:
        request_started.disconnect(note)
    djangos, consoles = started_on
    assert djangos != shared_thread
    assert consoles == shared_thread
