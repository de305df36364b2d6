"""A benchmark's view of a live console: logged-in dashboard sockets and keep-alive API clients.

A dashboard here is what the browser's ``console.js`` is to the server: a
``/ws/console/`` socket opened with the reviewer's session cookie and the
console's own ``Origin``, receiving the snapshot and the numbered event frames.
Each frame is stamped with ``time.time_ns()`` the moment it is received, before
it is parsed, so the benchmark compares that stamp with the one a tool took in
the console's process (``bench/bench_tools.py``).
"""

import asyncio
import http.client
import http.cookiejar
import json
import re
import time
import urllib.parse
import urllib.request

from websockets.asyncio.client import connect

FRAME_TIMEOUT_SECONDS = 10.0


def login_session(base_url, username, password):
    """Log in through the login form, as a browser does; returns the ``sessionid`` cookie."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPCookieProcessor(jar))
    with opener.open(f"{base_url}/accounts/login/", timeout=30) as response:
        page = response.read().decode()
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    form = urllib.parse.urlencode({"username": username, "password": password, "csrfmiddlewaretoken": csrf}).encode()
    request = urllib.request.Request(
        f"{base_url}/accounts/login/", data=form, headers={"Referer": f"{base_url}/accounts/login/"}
    )
    with opener.open(request, timeout=30):
        pass
    session = next((c.value for c in jar if c.name == "sessionid"), None)
    if session is None:
        raise RuntimeError(f"could not log in as {username} at {base_url}")
    return session


class Dashboard:
    """One dashboard socket; every frame it receives is kept as ``(received_ns, frame)``."""

    def __init__(self, socket):
        self.socket = socket
        self.frames = []
        self.arrived = asyncio.Event()
        self.reader = asyncio.ensure_future(self._read())

    @classmethod
    async def open(cls, base_url, session):
        origin = base_url
        url = base_url.replace("http://", "ws://", 1) + "/ws/console/"
        socket = await connect(
            url,
            origin=origin,
            additional_headers={"Cookie": f"sessionid={session}"},
            max_size=None,
            compression=None,
            open_timeout=FRAME_TIMEOUT_SECONDS,
        )
        dashboard = cls(socket)
        await dashboard.next_frame(lambda f: f.get("type") == "snapshot")
        return dashboard

    async def _read(self):
        try:
            async for raw in self.socket:
                received_ns = time.time_ns()
                self.frames.append((received_ns, json.loads(raw), len(raw)))
                self.arrived.set()
        except Exception:  # closed: the waiters time out and say what they were waiting for
            self.arrived.set()

    def mark(self):
        """Where the frames received from now on start (see ``next_frame``)."""
        return len(self.frames)

    async def next_frame(self, matches, *, since=0, timeout=FRAME_TIMEOUT_SECONDS):
        """The first ``(received_ns, frame, size)`` from index ``since`` on for which ``matches(frame)``."""
        deadline = time.monotonic() + timeout
        scanned = since
        while True:
            for index in range(scanned, len(self.frames)):
                if matches(self.frames[index][1]):
                    return self.frames[index]
            scanned = len(self.frames)
            self.arrived.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.reader.done():
                raise TimeoutError(f"no matching frame within {timeout:g}s (socket closed: {self.reader.done()})")
            try:
                await asyncio.wait_for(self.arrived.wait(), remaining)
            except TimeoutError:
                pass

    def forget_before(self, index):
        """Drop frames already looked at (long benchmarks keep memory bounded)."""
        del self.frames[:index]

    async def send(self, frame):
        """Send a frame; returns ``time.time_ns()`` taken just before it went out."""
        text = json.dumps(frame)
        sent_ns = time.time_ns()
        await self.socket.send(text)
        return sent_ns

    async def close(self):
        await self.socket.close()
        self.reader.cancel()


def event(action, *, run=None):
    """A matcher for the event frame of ``action`` about ``run``."""
    return lambda f: f.get("type") == "event" and f.get("action") == action and (run is None or f.get("run_id") == run)


class ApiClient:
    """JSON calls over one keep-alive HTTP connection with a bearer token (one per thread)."""

    def __init__(self, base_url, token):
        parts = urllib.parse.urlsplit(base_url)
        self.connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        self.connection.request(method, path, body=data, headers=self.headers)
        response = self.connection.getresponse()
        raw = response.read()
        return response.status, json.loads(raw or b"null")

    def close(self):
        self.connection.close()
