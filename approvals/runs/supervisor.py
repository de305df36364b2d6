"""A console process's supervisor state: the tasks of the runs it owns, their cancel tokens, the
requests they wait on, and what a wait inside a run needs to know (its scope).

Starting the supervisor, its background tasks and adopting runs are ``runner``'s; this module holds
only the state they and the waits share, so the waits need not import the runner.
"""

import asyncio
import contextvars
import json
import math
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, cast

from django.db import connections
from toolnexus import Answer, Request

from approvals import models
from approvals.models import RESOLVING_ACTIONS, THIS_PROCESS_ID, AnswerReason, AuditEvent, RequestStatus, RunStatus
from approvals.review import decisions
from approvals.runs.cancel import CancelToken
from approvals.runs.clock import RunClock

PROCESS_ID = THIS_PROCESS_ID

# Cancels remembered for runs without a token here. The one that matters was heard in the moment between a
# run's row committing and its token being registered (runner.supervise): no process cancels this many runs
# in that moment.
CANCELS_HEARD_KEPT = 1024

STATUS_FOR_TRIP = {"cancelled": RunStatus.CANCELLED, "timeout": RunStatus.TIMED_OUT, "shutdown": RunStatus.INTERRUPTED}


class ToolStopped(Exception):
    """The tool did not return within the grace period after its token was tripped."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# How long the safety net keeps re-reading an audit id that no committed event held (note_unseen).
UNSEEN_SECONDS = 60.0


@dataclass
class RunScope:
    """What a wait inside a run needs to know: the run, its token and its own-time clock."""

    run_id: int
    tool: str
    args: dict[str, Any]
    token: CancelToken | None  # None: a wait outside any run (console_wait_for)
    clock: RunClock | None = None  # None: no timeout (a wait outside any run)
    tool_input_schema: dict[str, Any] | None = None
    # Requests asked from inside this call (not §10 suspensions): withdrawn when the call ends.
    asked: set[str] = field(default_factory=set)
    # Told of each request asked from inside the call, once it is open (an agent run's transcript).
    on_asked: Callable[[Request, "RunScope"], Awaitable[None]] | None = None
    # The request whose approved retry this run is executing (review/execution.py): its outcome is written when the
    # run finishes.
    executing: str | None = None
    # That retry's own output, before any words for the model (the edit notice): what its outcome records.
    executed_output: str | None = None

    def remaining(self) -> float | None:
        """The run's own seconds left (what ``ctx.timeout`` says); None without a timeout."""
        return None if self.clock is None else self.clock.remaining()


# The run a task works for, set while its tool runs: the waits (waiting.console_wait_for) and the loop rule
# read it to tie a request asked from inside a tool call to that call's run, token and deadline.
current_scope: contextvars.ContextVar[RunScope | None] = contextvars.ContextVar(
    "toolnexus_console_run_scope", default=None
)


class Wakeup:
    """What one wait for a request's answer sleeps on: set by the supervisor (``wake``) whenever the request
    may have been answered, kept set until the wait clears it before its next read. Lighter than an
    ``asyncio.Event``: a flag and the one future the wait sleeps on (``attach``)."""

    __slots__ = ("_set", "_future")

    def __init__(self) -> None:
        self._set = False
        self._future: asyncio.Future[None] | None = None

    def set(self) -> None:
        self._set = True
        future = self._future
        if future is not None and not future.done():
            future.set_result(None)

    def clear(self) -> None:
        self._set = False

    def is_set(self) -> bool:
        return self._set

    def attach(self, future: asyncio.Future[None]) -> None:
        """Resolve ``future`` at the next ``set``, or now if set. One wait at a time: each has its own Wakeup."""
        assert self._future is None or self._future.done(), "a Wakeup serves one wait at a time"
        self._future = future
        if self._set and not future.done():
            future.set_result(None)

    def detach(self) -> None:
        self._future = None


@dataclass
class Supervisor:
    loop: asyncio.AbstractEventLoop
    tasks: dict[int, asyncio.Task[None]] = field(default_factory=dict)  # run id -> asyncio.Task
    tokens: dict[int, CancelToken] = field(default_factory=dict)  # run id -> CancelToken
    # request id -> the Wakeup of each task waiting for its answer
    waiters: dict[str, set[Wakeup]] = field(default_factory=dict)
    listener: asyncio.Task[None] | None = None
    expiry_timer: asyncio.Task[None] | None = None
    # Set when a request opens with a deadline before the timer's next read (or the
    # timer must re-read for another reason); requests that expire later leave it asleep.
    expiry_wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    # When the expiry timer next reads the database (time.time()); infinite while it reads.
    next_expiry_check: float = math.inf
    started: bool = False
    starting: asyncio.Lock = field(default_factory=asyncio.Lock)
    # The scopes of MCP tool calls in flight: an MCP server's elicitation arrives on its
    # session's own task, outside any run's context, and is tied to the call it interrupts.
    mcp_calls: list[RunScope] = field(default_factory=list)
    heartbeat: asyncio.Task[None] | None = None
    pulse: asyncio.Task[None] | None = None  # writes the heartbeat itself, apart from the heartbeat's other work
    publisher: asyncio.Task[None] | None = None  # sends this loop's committed events (events.Outbox)
    safety_poll: asyncio.Task[None] | None = None
    # Set to make the heartbeat beat now (the channel layer came back, a test wants it).
    beat_wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    # Runs another process took over while this one looked dead: their tasks stop
    # without touching the database (the new owner carries on from there).
    relinquished: set[int] = field(default_factory=set)
    listen_channel: str | None = None  # the listener's channel, rejoined to the group on every beat
    # The newest audit event the safety net has looked at: it reads only what was recorded after it.
    seen_seq: int = 0
    # Ids at or below seen_seq that no committed event held when last read (PostgreSQL: a transaction still
    # open took them), with when they were first missed: re-read on every look until they come or expire.
    unseen: dict[int, float] = field(default_factory=dict)
    catching_up: asyncio.Lock = field(default_factory=asyncio.Lock)
    # Set whenever one of its runs' §10 suspensions opens: a stopping process hands that run over then.
    suspended: asyncio.Event = field(default_factory=asyncio.Event)
    # Runs whose cancel was heard while they had no token here, newest last: a run this process has just
    # created gets its token a moment after its row commits, and a cancel heard in between trips it then
    # (``take_cancel_heard``), so a new run's task need not read its cancel flag.
    cancels_heard: dict[int, None] = field(default_factory=dict)

    # request id -> its Answer, handed over by this process's own answer that claimed the run's resume here
    # (``committed_here``): the run's waiter takes it instead of reading the row the answer just wrote.
    answers_handed: dict[str, Answer] = field(default_factory=dict)

    def wake(self, request_id: str) -> None:
        for waiter in self.waiters.get(request_id, ()):
            waiter.set()

    def listen(self, request_id: str) -> Wakeup:
        """A new waiter for ``request_id``: set by every resolving change of it from now on (``wake``)."""
        waiter = Wakeup()
        self.waiters.setdefault(request_id, set()).add(waiter)
        return waiter

    def stop_listening(self, request_id: str, waiter: Wakeup) -> None:
        waiters = self.waiters.get(request_id)
        if waiters is not None:
            waiters.discard(waiter)
            if not waiters:
                del self.waiters[request_id]
                self.answers_handed.pop(request_id, None)

    def committed_here(self, event: AuditEvent) -> None:
        """This process committed ``event`` (the outbox calls it on the loop, before the event's frame).

        An answer that claimed its run's resume for this process (``run_state.claim_resume_here``) hands its
        Answer, as committed, to the run's waiter (``take_handed_answer``), where the database gives back
        the JSON as it was written (SQLite's text; PostgreSQL's jsonb orders keys and rewrites numbers, so
        there the waiter reads the row). Then every waiter is woken as ``wake_for`` wakes them.
        """
        try:
            request = _request_in_hand(event)
            if (
                request is not None
                and request.resumed_by == PROCESS_ID
                and request.status != RequestStatus.OPEN
                and request.pk in self.waiters
                and _json_reads_back_as_written()
            ):
                self.answers_handed[request.pk] = Answer(
                    id=request.pk,
                    ok=bool(request.answer_ok),
                    data=_as_read_back(request.answer_data),
                    reason=cast(AnswerReason | None, request.answer_reason),
                )
        finally:  # a hand-over that failed leaves the waiter to read the row: it is woken all the same
            self.wake_for(event.action, event.run_id, event.request_id)

    def take_handed_answer(self, request_id: str) -> Answer | None:
        """The Answer this process's own answer handed over for ``request_id`` (forgetting it), if any."""
        return self.answers_handed.pop(request_id, None)

    def background_tasks(self) -> list[asyncio.Task[None]]:
        """The supervisor's own tasks: listener, expiry timer, safety poll, heartbeat and its pulse."""
        tasks = (self.publisher, self.listener, self.expiry_timer, self.safety_poll, self.heartbeat, self.pulse)
        return [t for t in tasks if t is not None]

    def note_unseen(self, missing: list[int]) -> None:
        """Keep the ids the safety net found missing (``processes.changes_after``) for its next look; forget
        those that came and those missing for UNSEEN_SECONDS (a rollback lost them: no transaction stays open
        that long after taking an id)."""
        now = time.monotonic()
        kept = {pk: self.unseen.get(pk, now) for pk in missing}
        self.unseen = {pk: since for pk, since in kept.items() if now - since < UNSEEN_SECONDS}

    def relinquish(self, run_id: int) -> None:
        task = self.tasks.get(run_id)
        if task is not None and not task.done():
            self.relinquished.add(run_id)
            task.cancel()

    def wake_for(self, action: str | None, run_id: int | None, request_id: str | None) -> None:
        """Wake the waiters of a resolved request, trip the token of a run whose cancel was asked.

        For this process's own commits the outbox calls it at once, ahead of the event's frame;
        the frame then comes through the listener (on_change) and wakes them again, which changes nothing.
        """
        if action in RESOLVING_ACTIONS and request_id:
            self.wake(request_id)
        elif action == AuditEvent.Action.RUN_CANCEL_REQUESTED and run_id is not None:
            token = self.tokens.get(run_id)
            if token is not None:
                token.trip("cancelled")
            else:
                self.cancels_heard[run_id] = None
                if len(self.cancels_heard) > CANCELS_HEARD_KEPT:  # most are other processes' runs
                    del self.cancels_heard[next(iter(self.cancels_heard))]

    def take_cancel_heard(self, run_id: int) -> bool:
        """Whether a cancel of ``run_id`` was heard before its token was here (forgetting it)."""
        return self.cancels_heard.pop(run_id, False) is None

    def on_change(self, frame: dict[str, Any]) -> None:
        """Wake whoever this change concerns: a waiter for a resolved request, a token for a cancel."""
        action = frame.get("action")
        if action == AuditEvent.Action.REQUEST_OPENED:
            if self.expires_before_next_check(frame.get("request")):
                self.expiry_wakeup.set()
        else:
            self.wake_for(action, frame.get("run_id"), frame.get("request_id"))

    def expires_before_next_check(self, request: dict[str, Any] | None) -> bool:
        """Whether a request that just opened must wake the expiry timer (when unsure: it must)."""
        if request is None:
            return True
        if not request.get("expiresAt"):
            return False
        try:
            deadline = decisions.parse_expiry(request["expiresAt"])
        except decisions.DecisionError:
            return True
        return deadline is None or deadline.timestamp() < self.next_expiry_check

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        # A fresh context: a run must not inherit the HTTP request's thread-sensitive
        # executor, which Django closes when that request ends.
        return self.loop.create_task(coro, context=contextvars.Context())


def _json_reads_back_as_written() -> bool:
    """Whether the database gives a JSON column back as its encoder wrote it (SQLite stores the text)."""
    return connections["default"].vendor == "sqlite"


def _as_read_back(data: object) -> Any:
    """``data`` as ``Request.answer_data`` reads it back from the database (a JSON round trip through the
    field's encoder and decoder): the same values a read would give, and the tool's own copy."""
    field = models.Request._meta.get_field("answer_data")
    return json.loads(json.dumps(data, cls=field.encoder), cls=field.decoder)


def _request_in_hand(event: AuditEvent) -> models.Request | None:
    """The request ``event`` was recorded with, as its transaction left it; None when it was not in hand
    (reading it here would query the database from the event loop)."""
    if event.request_id is None:
        return None
    return cast(models.Request | None, AuditEvent._meta.get_field("request").get_cached_value(event, default=None))


# Each event loop's supervisor (supervisor() makes it on first use); a test drops one to start afresh.
supervisors_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Supervisor] = weakref.WeakKeyDictionary()


def supervisor() -> Supervisor:
    loop = asyncio.get_running_loop()
    sup = supervisors_by_loop.get(loop)
    if sup is None:
        sup = supervisors_by_loop[loop] = Supervisor(loop=loop)
    return sup
