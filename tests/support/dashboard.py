"""The console's sockets in process, through the real ASGI application: the dashboard's (logged in by
a session cookie) and a remote host's (by its token); users in groups and runs waiting on a request."""

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
from toolnexus_site.asgi import application

HOST = "127.0.0.1:8000"
ORIGIN = f"http://{HOST}"
WS_PATH = "/ws/console/"
RECEIVE_TIMEOUT = 5  # only reached when a test is about to fail


def put_in_group(user, name):
    group, _ = Group.objects.get_or_create(name=name)
    user.groups.add(group)
    return group


def waiting_request(
    request_id,
    *,
    starter=None,
    tool="refund",
    kind="approval",
    data=None,
    prompt=None,
    args=None,
    run=None,
    expires=None,
    resumable=False,
):
    """A run started by ``starter`` that waits on one request (no tool executes); returns the Request row.

    ``run``: an existing run to ask in instead (it waits on one more); ``expires``: the wire ``expiresAt``;
    ``resumable``: the request is the suspension the run's tool returned (else it was asked from inside the call,
    and takes no reply: answers.responses_for)."""
    # Owned by this process, so the supervisor does not take it for a stopped console's run.
    if run is None:
        run = Run.objects.create(tool=tool, status=RunStatus.RUNNING, started_by=starter, owner=runner.PROCESS_ID)
    wire = WireRequest(id=request_id, kind=kind, prompt=prompt or f"{tool}: go ahead?", data=data, expiresAt=expires)
    return decisions.open_request(wire, run_id=run.pk, tool=tool, args=args, resumable=resumable)


async_waiting_request = sync_to_async(waiting_request)


@sync_to_async
def session_key_for(user):
    client = Client()
    client.force_login(user)
    return client.cookies[django_settings.SESSION_COOKIE_NAME].value


def socket_headers(session_key=None, origin=ORIGIN, host=HOST):
    """A browser's headers; ``None`` leaves one out."""
    headers = []
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    if host is not None:
        headers.append((b"host", host.encode()))
    if session_key is not None:
        headers.append((b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={session_key}".encode()))
    return headers


class Dashboard:
    """One dashboard socket and every frame it was sent, in order (``frames``)."""

    def __init__(self, communicator):
        self.communicator = communicator
        self.frames = []
        self.snapshot = None

    async def receive(self, timeout=RECEIVE_TIMEOUT):
        frame = await self.communicator.receive_json_from(timeout=timeout)
        self.frames.append(frame)
        return frame

    async def next(self, type_, timeout=RECEIVE_TIMEOUT, **fields):
        """The next frame of this type with these top-level fields, skipping the others."""
        while True:
            frame = await self.receive(timeout)
            if frame.get("type") == type_ and all(frame.get(k) == v for k, v in fields.items()):
                return frame

    async def expect(self, type_, **fields):
        """The very next frame, which must have this type and these top-level fields."""
        frame = await self.receive()
        assert frame["type"] == type_, frame
        for key, value in fields.items():
            assert frame.get(key) == value, (key, frame)
        return frame

    async def expect_event(self, action, **fields):
        return await self.expect("event", action=action, **fields)

    async def send(self, frame):
        await self.communicator.send_json_to(frame)

    async def resync(self):
        await self.send({"type": "resync"})
        return await self.expect("snapshot")


@contextlib.asynccontextmanager
async def open_socket(headers, path=WS_PATH):
    """Connect; yields (accepted, close_code_or_subprotocol, communicator) and always tears the socket down."""
    communicator = WebsocketCommunicator(application, path, headers=headers)
    accepted, detail = await communicator.connect(timeout=RECEIVE_TIMEOUT)
    try:
        yield accepted, detail, communicator
    finally:
        await communicator.disconnect()


@contextlib.asynccontextmanager
async def dashboard_for(user, session_key=None, **header_overrides):
    """A logged-in, accepted dashboard; its first frame (the snapshot) is in ``dashboard.snapshot``."""
    key = session_key or await session_key_for(user)
    async with open_socket(socket_headers(key, **header_overrides)) as (accepted, detail, communicator):
        assert accepted, f"socket refused with close code {detail}"
        dashboard = Dashboard(communicator)
        dashboard.snapshot = await dashboard.expect("snapshot")
        yield dashboard


@contextlib.asynccontextmanager
async def host_socket(token=None, *, query_token=None, origin=None):
    """A remote host's ``/ws/host/`` socket, by bearer header or ``?token=``; yields (accepted, code, communicator)."""
    headers = [(b"host", HOST.encode())]
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    path = "/ws/host/" + (f"?token={query_token}" if query_token else "")
    async with open_socket(headers, path) as opened:
        yield opened
