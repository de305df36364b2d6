"""A console cluster for tests: several daphne processes on one PostgreSQL database and one Redis.

Nothing is mocked: real redis-server and postgres (tests/support/services.py), real daphne
processes started the way ``make run-cluster`` starts them, each told
DATABASE_URL and REDIS_URL. The fixtures in tests/cluster/conftest.py build them;
tests drive and watch the members through the HTTP API (API tokens) and through
reviewers' dashboard sockets (a real login, then ``websockets`` with the console's
own Origin), and read the database with psql only for what no API shows (who owns a run).

The API, for test_cross_process.py and test_faults.py:

``Cluster``
    ``members`` (``a, b = cluster.members``), ``member("a")``; ``executions(label)``: what the
    cluster tools recorded for that label (tests/cluster/cluster_tools.py), and
    ``wait_for_execution(label, event)``; ``sql(query)`` (rows of ``|``-separated text);
    ``owner_of(run_id)``; ``heal()``: every member running and not stopped; ``env``: what every
    member was started with (plus tests.support.live_console.console_env).
``Entrance`` (a ``tests.support.live_console.LiveConsole``, so ``call``, ``host_token``, ``reviewer_token``):
    the cluster at one URL, a member's or a proxy's (``cluster.through(proxy.url)``, with
    tests/support/proxy.py). ``start_run(body)`` (as the host service account) -> run id;
    ``answer(request_id, ...)``; ``wait_for_run(run_id, until)``; ``wait_for_request(run_id)``: the
    run's open request; ``dashboard()``: an async context manager giving a ``Dashboard``;
    ``open_dashboard()`` the same without the block (``await dashboard.close()``).
``Member`` (an ``Entrance`` at its own port)
    ``logged(text)``: waits for a line of its daphne log;
    ``kill()`` (SIGKILL, reaped), ``freeze()`` / ``thaw()`` (SIGSTOP / SIGCONT), ``restart()``
    (a new process on the same port); ``pid``, ``process_id`` (its ``Run.owner`` value).
``Dashboard``
    ``snapshot``; ``await event(action, **fields)``: the first event frame with that action and
    those top-level fields (``run_id=7``), received or still to come; ``await answer(request_id,
    ok=True, data=None)`` and ``await cancel_run(run_id)``: send the frame, return the reply;
    ``out_of_order``: event frames whose ``prev`` was not the seq before them (should stay empty).
``eventually(check, what)``: a bounded poll for what only a file or a table shows.
"""

import asyncio
import contextlib
import http.cookiejar
import itertools
import json
import signal
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from websockets.asyncio.client import connect

from tests.support.live_console import (
    CREATE_USERS,
    POLL_DEADLINE_SECONDS,
    LiveConsole,
    console_env,
    daphne_process,
    manage,
    open_requests_of,
    poll,
    start,
)

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
TEMPLATE_DATABASE = "cluster_template"
REVIEWER = "reviewer"
REVIEWER_PASSWORD = "live-Reviewer-pass-5521"  # the one tests.support.live_console.CREATE_USERS gives
FRAME_TIMEOUT_SECONDS = 10.0

# Short enough that a test sees a takeover in about two seconds; the defaults are 2 s and 10 s.
CLUSTER_ENV = {
    "TOOLNEXUS_TOOL_MODULES": "tests.cluster.cluster_tools",
    "CONSOLE_HEARTBEAT_SECONDS": "0.2",
    "CONSOLE_HEARTBEAT_TIMEOUT_SECONDS": "1.5",
}

# Users and their tokens in one interpreter (each manage.py start costs a second or two).
CREATE_USERS_AND_TOKENS = (
    CREATE_USERS
    + """
import json
from approvals.team import tokens
print(json.dumps({u.username: tokens.issue_token(u, "cluster-tests")[1] for u in User.objects.all()}))
"""
)


def database_url(postgres, name):
    return f"postgresql://{postgres.user}@127.0.0.1:{postgres.port}/{name}"


@dataclass
class ClusterTemplate:
    """A migrated database with the users and their tokens; each cluster starts from a copy of it."""

    postgres: object
    name: str
    tokens: dict

    @classmethod
    def create(cls, postgres, name=TEMPLATE_DATABASE):
        postgres.psql(f'CREATE DATABASE "{name}"')
        env = console_env(REPO / "var" / "unused.sqlite3", DATABASE_URL=database_url(postgres, name))
        manage(env, "migrate", "--noinput")
        tokens = json.loads(manage(env, "shell", "-c", CREATE_USERS_AND_TOKENS, "--no-imports").splitlines()[-1])
        return cls(postgres=postgres, name=name, tokens=tokens)

    def copy(self, name):
        """A new database with the template's tables, users and tokens (PostgreSQL copies it in well under a second)."""
        self.postgres.psql(f'CREATE DATABASE "{name}" TEMPLATE "{self.name}"')
        return database_url(self.postgres, name)


@dataclass
class Entrance(LiveConsole):
    """The cluster as a client reaches it at ``base_url``: a member, or a proxy in front of them.

    Starts runs (as the host service account), answers and opens reviewers' dashboards there.
    """

    cluster: object = None

    def start_run(self, body):
        return start(self, body)

    def run(self, run_id):
        status, body = self.call("GET", f"/api/v1/runs/{run_id}")
        assert status == 200, body
        return body

    def wait_for_run(self, run_id, until, what=None):
        return poll(self, f"/api/v1/runs/{run_id}", until, what=what or f"run {run_id} at {self.base_url}")

    def wait_for_request(self, run_id):
        """The run's one open request, once it is open."""
        poll(
            self,
            "/api/v1/requests?status=open",
            lambda body: any(r["run"] == run_id for r in body["requests"]),
            what=f"a request of run {run_id} open at {self.base_url}",
        )
        [request] = open_requests_of(self, run_id)
        return request

    def answer(self, request_id, ok=True, data=None):
        body = {"ok": ok} if data is None else {"ok": ok, "data": data}
        return self.call("POST", f"/api/v1/requests/{request_id}/answer", body)

    async def open_dashboard(self, username=REVIEWER):
        """A reviewer's dashboard socket here, once its snapshot came (the session comes from a
        real login); ``await dashboard.close()`` closes it. Raises as the handshake or the snapshot fails."""
        socket = await connect(
            "ws" + self.base_url.removeprefix("http") + "/ws/console/",
            origin=self.base_url,
            additional_headers={"Cookie": f"sessionid={self.cluster.session(username)}"},
            proxy=None,
            ping_interval=None,  # tests block the loop on HTTP calls; the socket must not time out meanwhile
        )
        dashboard = Dashboard(socket)
        try:
            await dashboard.frame(lambda f: f.get("type") == "snapshot")
        except BaseException:
            await dashboard.close()
            raise
        return dashboard

    @contextlib.asynccontextmanager
    async def dashboard(self, username=REVIEWER):
        """``open_dashboard`` for the ``async with`` block."""
        dashboard = await self.open_dashboard(username)
        try:
            yield dashboard
        finally:
            await dashboard.close()


@dataclass
class Member(Entrance):
    """One console process of the cluster."""

    name: str = ""
    process: object = None  # the daphne Popen
    process_id: str = ""  # runner.PROCESS_ID: what Run.owner says when this process owns a run
    lives: int = 0
    frozen: bool = False
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    @property
    def pid(self):
        return self.process.pid

    def serve(self):
        """Start daphne (on the same port as before, if there was a before) and wait until it beats."""
        self.lives += 1
        self.log_path = ARTIFACTS / f"cluster-{self.cluster.database}-{self.name}-{self.lives}.log"
        self.stack = contextlib.ExitStack()
        self.process = self.stack.enter_context(daphne_process(self.env, self.log_path, port=self.port or None))
        self.port = self.process.port
        self.base_url = f"http://127.0.0.1:{self.port}"
        # The first request starts the supervisor, whose first heartbeat is written before it answers.
        status, _ = self.call("GET", "/api/v1/openapi.json")
        assert status == 200, f"{self.name} did not serve its first request ({status}); see {self.log_path}"
        self.process_id = self.cluster.sql(
            f"SELECT id FROM approvals_consoleprocess WHERE pid = {self.pid} ORDER BY started_at DESC LIMIT 1"
        )[0]
        return self

    def is_running(self):
        """Its process exists (frozen or not)."""
        return self.process is not None and self.process.poll() is None

    def kill(self):
        """SIGKILL: no clean-up at all. Reaped at once, so the pid is gone (not a zombie) for the others."""
        self.process.kill()
        self.process.wait()

    def freeze(self):
        """SIGSTOP: alive to the kernel, silent to the cluster (no heartbeat, no answers) until ``thaw``."""
        self.process.send_signal(signal.SIGSTOP)
        self.frozen = True

    def thaw(self):
        self.process.send_signal(signal.SIGCONT)
        self.frozen = False

    def stop(self):
        """SIGTERM (after a SIGCONT, so a frozen process can hear it) and wait for the exit."""
        if self.is_running():
            self.thaw()
        self.stack.close()

    def restart(self):
        self.stop()
        return self.serve()

    def logged(self, *texts):
        """Wait until this process's log (its current life's) has a line with one of ``texts``; returns it."""

        def line():
            return next((ln for ln in self.log_path.read_text().splitlines() if any(t in ln for t in texts)), None)

        return eventually(line, f"{self.name}'s log saying {' or '.join(map(repr, texts))}")


class Dashboard:
    """What a dashboard socket received, in order, and the two frames a reviewer sends."""

    def __init__(self, socket):
        self.socket = socket
        self.frames = []
        self.arrived = asyncio.Event()
        self.seq = None
        self.out_of_order = []
        self.refs = itertools.count(1)
        self.reader = asyncio.ensure_future(self.read())

    async def close(self):
        await self.socket.close()
        self.reader.cancel()
        await asyncio.gather(self.reader, return_exceptions=True)

    @property
    def snapshot(self):
        return next(f for f in self.frames if f.get("type") == "snapshot")

    async def read(self):
        async for raw in self.socket:
            frame = json.loads(raw)
            if frame.get("type") == "event" and frame.get("prev") != self.seq:
                self.out_of_order.append(frame)
            if "seq" in frame:
                self.seq = frame["seq"]
            self.frames.append(frame)
            self.arrived.set()

    async def frame(self, match, timeout=FRAME_TIMEOUT_SECONDS):
        """The first frame ``match(frame)`` accepts, among those received or the next ones."""
        seen = 0
        async with asyncio.timeout(timeout):
            while True:
                for frame in self.frames[seen:]:
                    if match(frame):
                        return frame
                seen = len(self.frames)
                self.arrived.clear()
                await self.arrived.wait()

    async def event(self, action, timeout=FRAME_TIMEOUT_SECONDS, **fields):
        def match(frame):
            return (
                frame.get("type") == "event"
                and frame.get("action") == action
                and all(frame.get(key) == value for key, value in fields.items())
            )

        try:
            return await self.frame(match, timeout)
        except TimeoutError:
            raise AssertionError(f"no {action} event with {fields} within {timeout:g}s") from None

    async def send(self, frame):
        """Send a frame with a fresh ``ref``; returns the reply that carries it."""
        ref = f"t{next(self.refs)}"
        await self.socket.send(json.dumps({**frame, "ref": ref}))
        return await self.frame(lambda f: f.get("ref") == ref)

    async def answer(self, request_id, ok=True, data=None):
        return await self.send({"type": "answer", "request": request_id, "ok": ok, **({"data": data} if data else {})})

    async def cancel_run(self, run_id):
        return await self.send({"type": "cancel_run", "run": run_id})


class Cluster:
    """``names`` console processes on a fresh copy of ``template`` and the Redis at ``redis_url``."""

    def __init__(self, template, redis_url, workdir, *, database, names=("a", "b"), env=None):
        self.template = template
        self.postgres = template.postgres
        self.database = database
        self.workdir = Path(workdir)
        self.executions_log = self.workdir / "executions.jsonl"
        self.env = {**CLUSTER_ENV, "CLUSTER_EXECUTIONS_LOG": str(self.executions_log), **(env or {})}
        self.env.update(DATABASE_URL=template.copy(database), REDIS_URL=redis_url)
        member_env = console_env(self.workdir / "unused.sqlite3", **self.env)
        self.members = [
            Member(
                base_url="",
                port=0,
                db_path=None,
                log_path=None,
                env=member_env,
                tokens=template.tokens,
                name=name,
                cluster=self,
            )
            for name in names
        ]
        self._sessions = {}

    def start(self):
        ARTIFACTS.mkdir(exist_ok=True)
        self.executions_log.touch()
        with ThreadPoolExecutor(len(self.members)) as pool:  # daphne starts take a second each: in parallel
            list(pool.map(Member.serve, self.members))
        return self

    def close(self):
        for member in self.members:
            member.stop()
        self.postgres.psql(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')

    def member(self, name):
        return next(m for m in self.members if m.name == name)

    def through(self, url):
        """The cluster as clients reach it at ``url`` (a proxy in front of the members)."""
        port = int(url.rpartition(":")[2])
        return Entrance(
            base_url=url, port=port, db_path=None, log_path=None, env={}, tokens=self.template.tokens, cluster=self
        )

    def heal(self):
        """After a test that killed or froze a member: all of them running and beating again."""
        for member in self.members:
            if member.is_running():
                member.thaw()
            else:
                member.restart()

    def sql(self, query):
        """Rows of ``query`` in this cluster's database, each a ``|``-separated line."""
        return self.postgres.psql(query, database=self.database).splitlines()

    def owner_of(self, run_id):
        return self.sql(f"SELECT owner FROM approvals_run WHERE id = {int(run_id)}")[0]

    def executions(self, label):
        """The cluster tools' records for ``label``, in the order they were written."""
        lines = self.executions_log.read_text().splitlines()
        return [record for record in map(json.loads, lines) if record["label"] == label]

    def wait_for_execution(self, label, event):
        """The first record of ``label`` with this ``event`` (e.g. "started"), once a tool has written it."""
        return eventually(
            lambda: next((r for r in self.executions(label) if r["event"] == event), None),
            f"a {event!r} record for {label}",
        )

    def session(self, username):
        """A session key for ``username``, from logging in on the login page (sessions live in the shared database)."""
        if username not in self._sessions:
            serving = next(m for m in self.members if m.is_running() and not m.frozen)
            self._sessions[username] = login(serving.base_url, username, REVIEWER_PASSWORD)
        return self._sessions[username]


def login(base_url, username, password):
    """Log in through the console's login form, as a browser does; returns the session key."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPCookieProcessor(jar))
    login_url = f"{base_url}/accounts/login/"
    opener.open(login_url, timeout=30).read()
    cookies = {cookie.name: cookie.value for cookie in jar}
    form = {"username": username, "password": password, "csrfmiddlewaretoken": cookies["csrftoken"]}
    opener.open(urllib.request.Request(login_url, data=urllib.parse.urlencode(form).encode()), timeout=30).read()
    cookies = {cookie.name: cookie.value for cookie in jar}
    if "sessionid" not in cookies:
        raise AssertionError(f"logging in as {username} on {login_url} gave no session")
    return cookies["sessionid"]


def eventually(check, what, deadline=POLL_DEADLINE_SECONDS):
    """``check()`` until it returns something truthy, which is returned.

    For what another process writes where no notification reaches a test (its log, the
    cluster tools' records, a table no API shows): a bounded poll, as ``poll`` does over HTTP.
    """
    give_up = time.monotonic() + deadline
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > give_up:
            raise AssertionError(f"{what} did not happen within {deadline:g}s")
        time.sleep(0.05)
