"""On SQLite an API call's database work runs on the one shared database thread (approvals/hotpath/database_thread.py).

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
from django.db.backends.signals import connection_created

from approvals.hotpath import database_thread
from approvals.models import Run, RunStatus
from approvals.team import tokens

pytestmark = pytest.mark.django_db(transaction=True)


async def get_run(application, secret, run_id):
    communicator = HttpCommunicator(
        application,
        "GET",
        f"/api/v1/runs/{run_id}",
        headers=[(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {secret}".encode())],
    )
    response = await communicator.get_response(timeout=10)
    return response["status"], json.loads(response["body"])


@pytest.fixture
def threads_authenticating(monkeypatch):
    """The thread each API call's token check ran on."""
    seen = []

    def authenticate(secret, **kwargs):
        seen.append(threading.get_ident())
        return tokens.authenticate(secret, **kwargs)

    monkeypatch.setattr(tokens, "aauthenticate", sync_to_async(authenticate))
    return seen


async def test_an_api_call_on_sqlite_uses_the_shared_database_thread_and_opens_no_connection(
    make_user, issue_token, threads_authenticating
):
    user = await sync_to_async(make_user)("svc", password=None)
    secret = await sync_to_async(issue_token)(user)
    run = await Run.objects.acreate(tool="deploy", status=RunStatus.SUCCEEDED, started_by=user)
    shared_thread = await sync_to_async(threading.get_ident)()  # no request context: asgiref's single thread
    application = get_asgi_application()
    assert database_thread.shares_the_database_thread()

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
    assert opened == []  # the shared thread's connection was open already


async def test_without_it_each_request_gets_a_thread_of_its_own(
    make_user, issue_token, threads_authenticating, monkeypatch
):
    # What the decorator changes: Django's handler gives every request its own thread.
    monkeypatch.setattr(database_thread, "shares_the_database_thread", lambda: False)  # as on PostgreSQL
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
