"""A soak: two consoles on PostgreSQL and Redis under steady work, one of them killed (SIGKILL) and
started again every ``kill_every`` seconds; then what must hold once everything settled (issue 27).

The work, all from outside, as hosts and reviewers do it:

- host request openers: ``POST /api/v1/requests`` (``requests_per_second``), then each long-polls
  ``GET /api/v1/requests/<id>/answer?wait=`` until it has its answer;
- run starters: ``POST /api/v1/runs`` with the cluster tool ``cluster_approve`` (``runs_per_second``),
  which records each execution (tests/cluster/cluster_tools.py) and suspends once on an approval;
- two reviewers: each lists the open requests every half second and answers each one it sees
  through the API ``answer_delay`` seconds later (a ``decline_share`` of them declined); both answer
  every request, so the second answer of each is a refusal (409);
- a dashboard tab on each console (tests/cluster/fault_helpers.py's ``DashboardTab``, as the
  dashboard's sync.js) that also keeps the totals as the dashboard does: the snapshot's ``counts``
  plus each event's ``count_change``; it reconnects when its console dies.

An HTTP call to a console that is being killed fails to connect or is cut: that is counted
(``connection_errors``) and tried again on the other console when it is safe to (the openers' POST is
idempotent on its id, an answer's is refused once given); a status of 500 or more is a failure.

``Soak.checks()`` is what a test asserts and the benchmark reports, each a count that must be 0:

- ``answers_not_acted_on``: a request a reviewer answered or declined whose run is still active, was
  interrupted without its answer claimed, or did not end as §10 says (an approval: the tool re-executed
  with it and the run succeeded; a decline: the run failed);
- ``answers_acted_on_wrongly``: a re-execution with another answer than the one stored, or after a decline;
- ``double_executions``: a run's tool executed twice with the answer, or its first call twice;
- ``double_resolutions``: a request with more than one resolving audit event;
- ``accepted_answers_lost``: an answer accepted (200) that the database does not hold;
- ``http_5xx``; ``hosts_without_their_answer``: a host's long-poll that did not get the stored answer;
- ``audit_chain_broken``: ``manage.py verify_audit`` failed;
- ``dashboards_not_converged`` and ``dashboard_negative_counts``: a tab whose totals did not come to the
  database's, or went below 0 on the way;
- ``dead_channels_in_groups``: console-group members whose prefix is not a live process's;
- ``runs_left_active`` and ``requests_left_open`` after the settle.
"""

import asyncio
import json
import random
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

import redis

from tests.cluster.fault_helpers import DashboardTab
from tests.cluster.harness import REVIEWER
from tests.support.live_console import manage

CONNECTION_ERRORS = (OSError,)  # urllib's URLError, a refused connect, a reset or cut response are all OSErrors
ACTIVE = ("queued", "running", "waiting")
RESOLVING = ("request.answered", "request.declined", "request.cancelled", "request.expired")
LONG_POLL_SECONDS = 10
LIST_EVERY_SECONDS = 0.5
CALL_TIMEOUT_SECONDS = 30


@dataclass
class SoakPlan:
    duration: float = 300.0  # seconds of work, kills included
    kill_every: float = 30.0
    requests_per_second: float = 4.0
    runs_per_second: float = 1.0
    answer_delay: tuple = (1.0, 3.0)
    decline_share: float = 0.2
    settle_seconds: float = 60.0  # at most, after the work stops, for every answer to be acted on
    converge_seconds: float = 15.0  # at most, for a dashboard's totals to come to the database's
    seed: int = 27


@dataclass
class CountingTab(DashboardTab):
    """A dashboard tab that also keeps the totals (open requests, active runs) as the dashboard's notifications.js."""

    counts: dict = field(default_factory=dict)
    lowest: dict = field(default_factory=lambda: {"requests": 0, "runs": 0})

    async def _apply(self, frame):
        kind = frame.get("type")
        if kind == "snapshot":
            self.counts = {"requests": frame["counts"]["requests"], "runs": frame["counts"]["runs"]}
        elif kind == "event" and frame["seq"] > self.seq and frame["prev"] == self.seq:
            change = frame.get("count_change") or {}
            for key in ("requests", "runs"):
                self.counts[key] += change.get(key, 0)
                self.lowest[key] = min(self.lowest[key], self.counts[key])
        await super()._apply(frame)


@dataclass
class Tally:
    """What the clients saw."""

    host_requests_opened: int = 0
    runs_started: int = 0
    run_starts_unsure: int = 0  # the POST was cut: the run may or may not exist (the database says)
    answers_accepted: int = 0
    answers_refused: int = 0  # 409: the other reviewer (or the console) resolved it first
    answers_other: dict = field(default_factory=dict)  # any other status -> count
    connection_errors: int = 0
    http_5xx: list = field(default_factory=list)  # (method, path, status, body)
    long_polls: int = 0
    kills: list = field(default_factory=list)  # {"member", "at", "back_after"}


class Soak:
    """Drive ``cluster`` (a tests.cluster.harness.Cluster, started) as ``plan`` says; ``label`` names its ids."""

    def __init__(self, cluster, plan, label, redis_url):
        self.cluster, self.plan, self.label, self.redis_url = cluster, plan, label, redis_url
        self.random = random.Random(plan.seed)
        self.tally = Tally()
        self.accepted = {}  # request id -> ok, for each answer a console accepted (200)
        self.host_answers = {}  # host request id -> the answer its long-poll got
        self.host_ids = []
        self.pool = ThreadPoolExecutor(96, thread_name_prefix="soak")
        self.stopping = asyncio.Event()  # the openers and starters stop
        self.done = asyncio.Event()  # everything stops
        self.killing = set()  # members being killed or started again
        self.tabs = []
        self.tasks = set()
        self.failures = []  # exceptions of the soak's own tasks: a broken driver must not pass for a quiet soak
        self.started_at = 0.0

    # -- HTTP, to whichever console is up ---------------------------------------------------------

    def members_up(self):
        up = [m for m in self.cluster.members if m.name not in self.killing]
        return up or list(self.cluster.members)

    async def call(self, method, path, body=None, *, token=None, timeout=CALL_TIMEOUT_SECONDS, member=None):
        """One call on ``member`` (by default a random console that is up): ``(status, body)``, or
        ``(None, None)`` when the connection failed or was cut."""
        member = member or self.random.choice(self.members_up())
        loop = asyncio.get_running_loop()
        try:
            status, answer = await loop.run_in_executor(
                self.pool, lambda: member.call(method, path, body, token=token, timeout=timeout)
            )
        except CONNECTION_ERRORS:
            self.tally.connection_errors += 1
            return None, None
        if status >= 500:
            self.tally.http_5xx.append((method, path, status, str(answer)[:300]))
        return status, answer

    async def call_until_answered(self, method, path, body=None, *, token=None, timeout=CALL_TIMEOUT_SECONDS):
        """``call`` again (on a console that is up) after each failed connection, until one answers or the soak ends."""
        while not self.done.is_set():
            status, answer = await self.call(method, path, body, token=token, timeout=timeout)
            if status is not None:
                return status, answer
            await asyncio.sleep(0.2)
        return None, None

    def spawn(self, coroutine):
        task = asyncio.ensure_future(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.finished)
        return task

    def finished(self, task):
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.failures.append(task.exception())

    # -- the work ---------------------------------------------------------------------------------

    async def steadily(self, per_second, start_one):
        """Call ``start_one(n)`` (as a task) ``per_second`` times a second until the work stops."""
        n, began = 0, time.monotonic()
        while not self.stopping.is_set():
            self.spawn(start_one(n))
            n += 1
            wait = began + n / per_second - time.monotonic()
            if wait > 0:
                try:
                    await asyncio.wait_for(self.stopping.wait(), wait)
                except TimeoutError:
                    pass

    async def host_request(self, n):
        """A remote host: open a request (the same body again after a failed connection), then long-poll its answer."""
        request_id = f"{self.label}-h{n}"
        token = self.cluster.members[0].host_token
        body = {"id": request_id, "kind": "approval", "prompt": f"Deploy {n}?", "host": "soak-host", "tool": "deploy"}
        status, opened = await self.call_until_answered("POST", "/api/v1/requests", body, token=token)
        if status not in (200, 201):
            if status is not None:
                self.tally.answers_other[f"open {status}"] = self.tally.answers_other.get(f"open {status}", 0) + 1
            return
        self.tally.host_requests_opened += 1
        self.host_ids.append(request_id)
        path = f"/api/v1/requests/{request_id}/answer?wait={LONG_POLL_SECONDS}"
        while not self.done.is_set():
            self.tally.long_polls += 1
            status, answer = await self.call_until_answered("GET", path, token=token, timeout=LONG_POLL_SECONDS + 20)
            if status == 200:
                self.host_answers[request_id] = answer
                return

    async def start_run(self, n):
        token = self.cluster.members[0].host_token
        body = {"tool": "cluster_approve", "args": {"label": f"{self.label}-r{n}"}}
        status, _ = await self.call("POST", "/api/v1/runs", body, token=token)
        if status == 201:
            self.tally.runs_started += 1
        elif status is None:
            self.tally.run_starts_unsure += 1  # not sent again: a second POST would start a second run
        else:
            self.tally.answers_other[f"run {status}"] = self.tally.answers_other.get(f"run {status}", 0) + 1

    async def reviewer(self, name):
        """List the open requests; answer each one seen ``answer_delay`` seconds after it first appeared."""
        seen = set()
        while not self.done.is_set():
            status, page = await self.call("GET", "/api/v1/requests?status=open&limit=200")
            if status == 200:
                for row in page["requests"]:
                    if row["id"] not in seen:
                        seen.add(row["id"])
                        self.spawn(self.answer_later(row["id"], self.random.uniform(*self.plan.answer_delay)))
            try:
                await asyncio.wait_for(self.done.wait(), LIST_EVERY_SECONDS)
            except TimeoutError:
                pass

    async def answer_later(self, request_id, delay):
        await asyncio.sleep(delay)
        ok = self.random.random() >= self.plan.decline_share
        status, _ = await self.call_until_answered("POST", f"/api/v1/requests/{request_id}/answer", {"ok": ok})
        if status == 200:
            self.tally.answers_accepted += 1
            self.accepted[request_id] = ok
        elif status == 409:
            self.tally.answers_refused += 1
        elif status is not None:
            self.tally.answers_other[f"answer {status}"] = self.tally.answers_other.get(f"answer {status}", 0) + 1

    async def killer(self):
        """Every ``kill_every`` seconds SIGKILL one console (in turn) and start it again on its port."""
        loop = asyncio.get_running_loop()
        for turn in range(int(self.plan.duration // self.plan.kill_every)):
            at = self.started_at + (turn + 1) * self.plan.kill_every
            if at >= self.started_at + self.plan.duration:
                return
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            victim = self.cluster.members[turn % len(self.cluster.members)]
            self.killing.add(victim.name)
            killed_at = time.monotonic()
            victim.kill()
            victim.stack.close()  # its daphne context: the process is reaped already
            await loop.run_in_executor(self.pool, victim.serve)  # listening, beating, its first request served
            back_after = time.monotonic() - killed_at
            self.killing.discard(victim.name)
            self.tally.kills.append(
                {"member": victim.name, "at": round(killed_at - self.started_at, 1), "back_after": round(back_after, 2)}
            )

    # -- the whole soak ---------------------------------------------------------------------------

    async def run(self):
        """The work for ``plan.duration`` seconds with the kills, then the settle; returns ``checks()``."""
        session = self.cluster.session(REVIEWER)
        self.tabs = [CountingTab(m.base_url, session, name=m.name) for m in self.cluster.members]
        await asyncio.gather(*(tab.open() for tab in self.tabs))
        self.started_at = time.monotonic()
        workers = [
            self.spawn(self.steadily(self.plan.requests_per_second, self.host_request)),
            self.spawn(self.steadily(self.plan.runs_per_second, self.start_run)),
            self.spawn(self.reviewer("first")),
            self.spawn(self.reviewer("second")),
        ]
        killer = self.spawn(self.killer())
        try:
            await asyncio.sleep(self.plan.duration)
            self.stopping.set()
            await killer
            self.settled_after = await self.settle()
            self.done.set()
            await asyncio.gather(*workers, return_exceptions=True)
            self.converged = await self.converge()
            if self.failures:
                raise self.failures[0]
            return self.checks()
        finally:
            self.done.set()
            self.stopping.set()
            for task in list(self.tasks):
                task.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)
            await asyncio.gather(*(tab.close() for tab in self.tabs))
            self.pool.shutdown(wait=False, cancel_futures=True)

    def database_open(self):
        [requests] = self.cluster.sql("SELECT count(*) FROM approvals_request WHERE status = 'open'")
        [runs] = self.cluster.sql(f"SELECT count(*) FROM approvals_run WHERE status IN {ACTIVE!r}")
        return {"requests": int(requests), "runs": int(runs)}

    async def settle(self):
        """Until nothing is open or active and every host has its answer (the reviewers go on answering),
        at most ``settle_seconds``; returns how long it took."""
        began = time.monotonic()
        loop = asyncio.get_running_loop()
        while time.monotonic() - began < self.plan.settle_seconds:
            opened = await loop.run_in_executor(self.pool, self.database_open)
            if opened == {"requests": 0, "runs": 0} and len(self.host_answers) == len(self.host_ids):
                break
            await asyncio.sleep(0.5)
        return round(time.monotonic() - began, 1)

    async def converge(self):
        """Each tab's totals once they equal the database's (at most ``converge_seconds`` each): tab -> seconds, or None."""
        expected = await asyncio.get_running_loop().run_in_executor(self.pool, self.database_open)
        took = {}
        for tab in self.tabs:
            began = time.monotonic()
            try:
                await tab.until(lambda tab=tab: tab.counts == expected, "its totals", self.plan.converge_seconds)
                took[tab.name] = round(time.monotonic() - began, 2)
            except AssertionError:
                took[tab.name] = None
        self.expected_counts = expected
        return took

    # -- what must hold -----------------------------------------------------------------------------

    def checks(self):
        cluster = self.cluster
        runs = {}
        for line in cluster.sql("SELECT id, status, args->>'label' FROM approvals_run"):
            run_id, status, label = line.split("|")
            runs[int(run_id)] = (status, label)
        requests = [
            line.split("|")
            for line in cluster.sql(
                "SELECT id, coalesce(run_id::text, ''), status, coalesce(answer_ok::text, ''), resumed_by "
                "FROM approvals_request"
            )
        ]
        executions = {}
        for record in map(json.loads, cluster.executions_log.read_text().splitlines()):
            executions.setdefault(record["label"], []).append(record)

        not_acted_on, acted_on_wrongly, interrupted_in_retry, resumed = [], [], [], 0
        for request_id, run_id, status, answer_ok, resumed_by in requests:
            if not run_id or status not in ("answered", "declined"):
                continue
            run_status, label = runs[int(run_id)]
            retries = [r for r in executions.get(label, []) if r["answer"] is not None]
            approved = answer_ok == "true"
            if run_status in ACTIVE:
                not_acted_on.append((request_id, run_status, resumed_by))
            elif run_status == "interrupted" and resumed_by:
                interrupted_in_retry.append(request_id)  # the retry was under way: never executed again (documented)
            elif run_status != ("succeeded" if approved else "failed") or (approved and not retries):
                not_acted_on.append((request_id, run_status, resumed_by))
            else:
                resumed += 1
            # §10: an approval re-executes the tool once with it; a decline ends the run without executing again.
            if any(r["answer"]["ok"] != approved for r in retries) or (retries and not approved):
                acted_on_wrongly.append(request_id)
        double_executions = [
            label
            for label, records in executions.items()
            if sum(r["answer"] is not None for r in records) > 1 or sum(r["answer"] is None for r in records) > 1
        ]
        resolving = ", ".join(f"'{action}'" for action in RESOLVING)
        double_resolutions = cluster.sql(
            f"SELECT request_id, count(*) FROM approvals_auditevent WHERE action IN ({resolving}) "
            "GROUP BY request_id HAVING count(*) > 1"
        )
        stored = {row[0]: (row[2], row[3]) for row in requests}
        accepted_lost = [
            request_id
            for request_id, ok in self.accepted.items()
            if stored.get(request_id) != ("answered" if ok else "declined", "true" if ok else "false")
        ]
        hosts_without = [
            request_id
            for request_id in self.host_ids
            if request_id not in self.host_answers
            or self.host_answers[request_id].get("ok") != (stored[request_id][1] == "true")
        ]
        try:
            verdict = manage(cluster.members[0].env, "verify_audit").splitlines()[0]
            audit_broken = 0
        except RuntimeError as exc:
            verdict, audit_broken = str(exc)[:500], 1
        actions = dict(
            line.split("|") for line in cluster.sql("SELECT action, count(*) FROM approvals_auditevent GROUP BY action")
        )
        back = [kill["back_after"] for kill in self.tally.kills]
        dead_channels = self.dead_channels()
        return {
            "plan": {**asdict(self.plan), "answer_delay": list(self.plan.answer_delay)},
            "figures": {
                "host_requests_opened": self.tally.host_requests_opened,
                "runs_started": self.tally.runs_started,
                "run_starts_unsure": self.tally.run_starts_unsure,
                "run_requests": sum(1 for r in requests if r[1]),
                "answers_accepted": self.tally.answers_accepted,
                "answers_refused_409": self.tally.answers_refused,
                "answers_other": self.tally.answers_other,
                "answers_resumed": resumed,
                "interrupted_in_retry": len(interrupted_in_retry),
                "runs_adopted": int(actions.get("run.adopted", 0)),
                "runs_interrupted": int(actions.get("run.interrupted", 0)),
                "requests_cancelled_by_console": sum(1 for r in requests if r[2] == "cancelled"),
                "connection_errors": self.tally.connection_errors,
                "long_polls": self.tally.long_polls,
                "kills": len(self.tally.kills),
                "back_after_seconds": {
                    "min": min(back, default=None),
                    "median": statistics.median(back) if back else None,
                    "max": max(back, default=None),
                },
                "kill_log": self.tally.kills,
                "settled_after_seconds": self.settled_after,
                "dashboards_converged_after_seconds": self.converged,
                "dashboard_resyncs": sum(tab.resyncs for tab in self.tabs),
                "dashboard_connections": sum(tab.connections for tab in self.tabs),
                "audit_events": sum(int(n) for n in actions.values()),
                "verify_audit": verdict,
            },
            "checks": {
                "answers_not_acted_on": len(not_acted_on),
                "answers_acted_on_wrongly": len(acted_on_wrongly),
                "double_executions": len(double_executions),
                "double_resolutions": len(double_resolutions),
                "accepted_answers_lost": len(accepted_lost),
                "http_5xx": len(self.tally.http_5xx),
                "hosts_without_their_answer": len(hosts_without),
                "audit_chain_broken": audit_broken,
                "dashboards_not_converged": sum(1 for took in self.converged.values() if took is None),
                "dashboard_negative_counts": sum(1 for tab in self.tabs if min(tab.lowest.values()) < 0),
                "dead_channels_in_groups": len(dead_channels),
                "runs_left_active": self.database_open()["runs"],
                "requests_left_open": self.database_open()["requests"],
            },
            "details": {
                "not_acted_on": not_acted_on[:20],
                "acted_on_wrongly": acted_on_wrongly[:20],
                "double_executions": double_executions[:20],
                "double_resolutions": double_resolutions[:20],
                "accepted_lost": accepted_lost[:20],
                "http_5xx": self.tally.http_5xx[:20],
                "hosts_without": hosts_without[:20],
                "dead_channels": dead_channels[:20],
                "tabs": {tab.name: {"counts": tab.counts, "lowest": tab.lowest} for tab in self.tabs},
                "database_counts": self.expected_counts,
            },
        }

    def dead_channels(self):
        """Members of the console group whose process prefix is not one of the live consoles' (asgi:console-processes)."""
        client = redis.Redis.from_url(self.redis_url)
        try:
            live = {client.hget("asgi:console-processes", m.process_id) for m in self.cluster.members}
            live = {f"specific.{prefix.decode()}" for prefix in live if prefix}
            members = [m.decode() for m in client.zrange("asgi:group:console", 0, -1)]
        finally:
            client.close()
        return [m for m in members if m.partition("!")[0] not in live]


def summary(result):
    """The soak's result in a few lines, for a person."""
    figures, checks = result["figures"], result["checks"]
    back = figures["back_after_seconds"]
    lines = [
        f"{figures['host_requests_opened']} host requests, {figures['runs_started']} runs "
        f"({figures['run_requests']} run requests), {figures['answers_accepted']} answers accepted, "
        f"{figures['answers_refused_409']} refused (409)",
        f"{figures['kills']} kills, back after {back['min']}-{back['max']} s (median {back['median']}); "
        f"{figures['runs_adopted']} runs adopted, {figures['runs_interrupted']} interrupted, "
        f"{figures['connection_errors']} connection errors",
        f"settled after {figures['settled_after_seconds']} s; dashboards converged after "
        f"{figures['dashboards_converged_after_seconds']}; {figures['verify_audit']}",
        "checks: " + ", ".join(f"{name} {count}" for name, count in checks.items()),
    ]
    return "\n".join(lines)
