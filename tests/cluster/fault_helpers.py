"""What the fault tests add to the cluster harness: a dashboard tab that behaves like the dashboard's sync.js,
the database's view to compare it with, the embedded single-process console, and a busy database.

``DashboardTab`` is a socket client written from static/approvals/console/sync.js: it applies
the snapshot and the numbered events, sends ``resync`` when an event's ``prev`` is not
the ``seq`` it holds, and when its socket closes it reconnects with the same backoff
(500 ms doubling to 5 s) and gets a fresh snapshot. What it shows (open requests, active
runs and their status) is compared with what the API reads from the database.
"""

import asyncio
import contextlib
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from websockets.asyncio.client import connect
from websockets.exceptions import WebSocketException

from tests.cluster.harness import (
    ARTIFACTS,
    CLUSTER_ENV,
    CREATE_USERS_AND_TOKENS,
    REVIEWER,
    REVIEWER_PASSWORD,
    Member,
    login,
)
from tests.support.live_console import console_env, daphne_process, manage

ACTIVE_STATUSES = {"queued", "running", "waiting"}
RECONNECT_FIRST_SECONDS = 0.5  # the dashboard's sync.js: retryDelay starts at 500 ms ...
RECONNECT_MAX_SECONDS = 5.0  # ... and doubles up to 5 s
CONVERGE_SECONDS = 15.0  # above the consumer's 5 s safety tick, with room for a loaded machine


@dataclass(frozen=True)
class ConsoleView:
    """What a dashboard shows that the database decides: the open requests and the active runs' statuses."""

    open_requests: frozenset
    active_runs: tuple  # sorted (run id, status) pairs

    @classmethod
    def of(cls, request_ids, run_statuses):
        active = {run_id: status for run_id, status in run_statuses.items() if status in ACTIVE_STATUSES}
        return cls(frozenset(request_ids), tuple(sorted(active.items())))


def database_view(member, run_ids):
    """What the database says every dashboard should show, read through one member's API.

    There is no API listing runs, so the active ones are looked for among ``run_ids`` (the
    test's own); a run some other test left active would show on the tabs and fail the comparison.
    """
    status, body = member.call("GET", "/api/v1/requests?status=open")
    assert status == 200, body
    return ConsoleView.of([r["id"] for r in body["requests"]], {i: member.run(i)["status"] for i in run_ids})


@dataclass
class DashboardTab:
    """One dashboard tab: a socket to ``/ws/console/`` that reconnects and resyncs as the dashboard's sync.js does."""

    base_url: str
    session: str
    name: str = "tab"
    seq: int = 0
    requests: dict = field(default_factory=dict)  # open request id -> its view
    runs: dict = field(default_factory=dict)  # active run id -> status
    snapshots: int = 0
    resyncs: int = 0
    connections: int = 0
    socket: object = None
    task: asyncio.Task | None = None
    replies: dict = field(default_factory=dict)  # ref -> the reply frame
    refs: int = 0
    back: asyncio.Event = field(default_factory=asyncio.Event)  # cleared while the tab stays away
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def open(self):
        """Connect and wait for the first snapshot."""
        self.back.set()
        self.task = asyncio.ensure_future(self._stay_connected())
        await self.until(lambda: self.snapshots >= 1, "the first snapshot")
        return self

    async def close(self):
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    async def _stay_connected(self):
        delay = RECONNECT_FIRST_SECONDS
        while True:
            await self.back.wait()
            try:
                async with connect(
                    self.base_url.replace("http://", "ws://") + "/ws/console/",
                    origin=self.base_url,
                    additional_headers={"Cookie": f"sessionid={self.session}"},
                    proxy=None,
                    open_timeout=10,
                    ping_interval=None,  # tests block their loop on HTTP calls; no keep-alive timeouts meanwhile
                ) as socket:
                    self.socket = socket
                    self.connections += 1
                    delay = RECONNECT_FIRST_SECONDS
                    async for message in socket:
                        await self._apply(json.loads(message))
            except (OSError, WebSocketException, TimeoutError):
                pass  # dropped, or the handshake was refused: like the dashboard's sync.js, try again
            self.socket = None
            await asyncio.sleep(delay)  # the dashboard's sync.js: setTimeout(connect, retryDelay), then it doubles
            delay = min(delay * 2, RECONNECT_MAX_SECONDS)

    async def _apply(self, frame):
        kind = frame.get("type")
        if kind == "snapshot":
            self.seq = frame["seq"]
            self.requests = {r["id"]: r for r in frame["requests"]}
            self.runs = {r["id"]: r["status"] for r in frame["runs"]}
            self.snapshots += 1
        elif kind == "event" and frame["seq"] > self.seq:
            if frame["prev"] != self.seq:
                # A gap: the dashboard's sync.js asks for a fresh snapshot and applies nothing until it comes.
                self.resyncs += 1
                await self.socket.send(json.dumps({"type": "resync"}))
                return
            self.seq = frame["seq"]
            if frame.get("request"):
                self._show_request(frame["request"])
            if frame.get("run"):
                self._show_run(frame["run"])
        elif frame.get("ref") is not None:
            self.replies[frame["ref"]] = frame
        async with self.changed:
            self.changed.notify_all()

    def _show_request(self, view):
        if view["status"] == "open":
            self.requests[view["id"]] = view
        else:
            self.requests.pop(view["id"], None)

    def _show_run(self, view):
        if view["status"] in ACTIVE_STATUSES:
            self.runs[view["id"]] = view["status"]
        else:
            self.runs.pop(view["id"], None)

    def view(self):
        return ConsoleView.of(self.requests, self.runs)

    async def until(self, condition, what, timeout=CONVERGE_SECONDS):
        """Wait on the frames this tab applies (not on a clock) until ``condition()`` holds."""

        async def wait():
            async with self.changed:
                await self.changed.wait_for(condition)

        try:
            await asyncio.wait_for(wait(), timeout)
        except TimeoutError:
            raise AssertionError(
                f"{self.name}: {what} did not happen within {timeout:g}s; it shows {self.view()}"
            ) from None

    async def converge(self, expected, timeout=CONVERGE_SECONDS):
        """Wait until this tab shows ``expected``; returns how many seconds that took."""
        began = time.monotonic()
        await self.until(lambda: self.view() == expected, f"showing {expected}", timeout)
        return time.monotonic() - began

    def drop(self, *, stay_away=False):
        """Cut the connection without a closing handshake, as a network drop does; ``stay_away`` until ``come_back``."""
        if stay_away:
            self.back.clear()
        self.socket.transport.abort()

    async def come_back(self):
        """Reconnect now (a tab kept away by ``drop(stay_away=True)``); returns once the new snapshot is applied."""
        snapshots = self.snapshots
        self.back.set()
        await self.until(lambda: self.snapshots > snapshots, "the snapshot after reconnecting")

    async def send_answer(self, request_id, ok=True):
        """Send an answer frame, like the Approve button; returns its ``ref`` (the reply may never come)."""
        self.refs += 1
        ref = f"{self.name}-{self.refs}"
        await self.socket.send(json.dumps({"type": "answer", "request": request_id, "ok": ok, "ref": ref}))
        return ref

    async def answer(self, request_id, ok=True):
        ref = await self.send_answer(request_id, ok)
        await self.until(lambda: ref in self.replies, f"the reply to {ref}")
        return self.replies.pop(ref)


@contextlib.asynccontextmanager
async def dashboard_tabs(deployment, members):
    """A reviewer's tab on each of ``members``, open until the block ends."""
    session = deployment.session(REVIEWER)
    tabs = [DashboardTab(m.base_url, session, name=f"tab-{i}-{m.port}") for i, m in enumerate(members)]
    try:
        await asyncio.gather(*(tab.open() for tab in tabs))
        yield tabs
    finally:
        await asyncio.gather(*(tab.close() for tab in tabs))


# -- the embedded default: one daphne, SQLite and the in-memory channel layer --------------------


@dataclass
class SqliteTemplate:
    """A migrated SQLite file with the users and their tokens; each embedded console starts from a copy."""

    path: Path
    tokens: dict

    @classmethod
    def create(cls, workdir):
        path = Path(workdir) / "template.sqlite3"
        env = console_env(path)
        manage(env, "migrate", "--noinput")
        tokens = json.loads(manage(env, "shell", "-c", CREATE_USERS_AND_TOKENS, "--no-imports").splitlines()[-1])
        return cls(path=path, tokens=tokens)


@dataclass
class EmbeddedConsole:
    """The console as ``make run`` serves it, one process, with the cluster tools: ``members``,
    ``executions`` and ``session`` as a harness Cluster has them, so a test can take either."""

    member: Member
    executions_log: Path

    @property
    def members(self):
        return [self.member]

    def executions(self, label):
        return [r for r in map(json.loads, self.executions_log.read_text().splitlines()) if r["label"] == label]

    def session(self, username):
        return login(self.member.base_url, username, REVIEWER_PASSWORD)


@contextlib.contextmanager
def embedded_console(template, workdir, **env):
    """Serve a copy of ``template`` under one daphne with ``env`` (and the cluster tools) until the block ends."""
    workdir = Path(workdir)
    db_path = workdir / "console.sqlite3"
    shutil.copyfile(template.path, db_path)
    log = workdir / "executions.jsonl"
    log.touch()
    env = console_env(db_path, **{**CLUSTER_ENV, "CLUSTER_EXECUTIONS_LOG": str(log), **env})
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = ARTIFACTS / f"faults-{workdir.name}.log"
    with daphne_process(env, log_path) as process:
        # A harness Member for its API helpers (start_run, answer, run, wait_for_run); it has no cluster.
        member = Member(
            base_url=f"http://127.0.0.1:{process.port}",
            port=process.port,
            db_path=db_path,
            log_path=log_path,
            env=env,
            tokens=template.tokens,
            name="embedded",
            process=process,
        )
        yield EmbeddedConsole(member=member, executions_log=log)


# -- a busy database ---------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def database_held(connect_and_lock):
    """Keep the lock ``connect_and_lock()`` takes (it returns the connection, inside the locking
    transaction) until the block ends; then roll back, which releases it at once."""
    connection = await asyncio.to_thread(connect_and_lock)  # may wait for transactions in flight
    try:
        yield
    finally:
        connection.rollback()
        connection.close()
