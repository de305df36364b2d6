"""Helpers for the team-console tests: users in groups, runs waiting on a request, dashboard sockets."""

import contextlib

from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.contrib.auth.models import Group
from django.test import Client
from toolnexus import Request as WireRequest

from approvals.models import Run, RunStatus
from approvals.review import decisions
from approvals.runs import runner

HOST = "127.0.0.1:8000"
ORIGIN = f"http://{HOST}"
RECEIVE_TIMEOUT = 5  # only reached when a test is about to fail


def put_in_group(user, name):
    group, _ = Group.objects.get_or_create(name=name)
    user.groups.add(group)
    return group


def waiting_request(request_id, *, starter=None, tool="refund", kind="approval", data=None, prompt=None):
    """A run started by ``starter`` that waits on one request (no tool executes); returns the Request row."""
    # Owned by this process, so the supervisor does not take it for a stopped console's run.
    run = Run.objects.create(tool=tool, status=RunStatus.RUNNING, started_by=starter, owner=runner.PROCESS_ID)
    wire = WireRequest(id=request_id, kind=kind, prompt=prompt or f"{tool}: go ahead?", data=data)
    return decisions.open_request(wire, run_id=run.pk, tool=tool)


async_waiting_request = sync_to_async(waiting_request)


@sync_to_async
def session_key_for(user):
    client = Client()
    client.force_login(user)
    return client.cookies[django_settings.SESSION_COOKIE_NAME].value


def socket_headers(session_key):
    return [
        (b"origin", ORIGIN.encode()),
        (b"host", HOST.encode()),
        (b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={session_key}".encode()),
    ]


class Dashboard:
    """One dashboard socket; ``next(type, **fields)`` skips frames until one matches."""

    def __init__(self, communicator):
        self.communicator = communicator
        self.snapshot = None

    async def receive(self, timeout=RECEIVE_TIMEOUT):
        return await self.communicator.receive_json_from(timeout=timeout)

    async def next(self, type_, timeout=RECEIVE_TIMEOUT, **fields):
        while True:
            frame = await self.receive(timeout)
            if frame.get("type") == type_ and all(frame.get(k) == v for k, v in fields.items()):
                return frame

    async def send(self, frame):
        await self.communicator.send_json_to(frame)


@contextlib.asynccontextmanager
async def dashboard_for(user, session_key=None):
    from toolnexus_site.asgi import application

    key = session_key or await session_key_for(user)
    communicator = WebsocketCommunicator(application, "/ws/console/", headers=socket_headers(key))
    accepted, detail = await communicator.connect(timeout=RECEIVE_TIMEOUT)
    assert accepted, f"socket refused with close code {detail}"
    dashboard = Dashboard(communicator)
    try:
        dashboard.snapshot = await dashboard.next("snapshot")
        yield dashboard
    finally:
        await communicator.disconnect()
