"""Executes runs server-side and applies the §10 loop rule.

Each console process keeps a supervisor: the asyncio tasks of the runs it owns,
their cancel tokens, and the requests they wait on. It listens to the channel
layer only to wake up early; it also re-reads the database on a short safety
interval (one query for all its waits), so a lost notification delays a resume,
never loses it. Its heartbeat says the process is alive, takes over the runs of
processes that stopped beating, and trips tokens whose cancel notice was lost.
"""
import asyncio
import contextvars
import logging
import math
import os
import socket
import time
import uuid
import weakref
from dataclasses import dataclass, field

from django.conf import settings
from toolnexus import Answer, Request, ToolContext, ToolResult, pending_of

from approvals.review import decisions
from approvals import events
from approvals.runs import processes, services as runs
from approvals.hotpath import sqlite_wal
from approvals.runs.cancel import CancelToken
from approvals.events import CONSOLE_GROUP
from approvals.models import RESOLVING_ACTIONS, AuditEvent, RunStatus
from approvals.runs.toolkit import get_toolkit

logger = logging.getLogger(__name__)

PROCESS_ID = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

STATUS_FOR_TRIP = {"cancelled": RunStatus.CANCELLED, "timeout": RunStatus.TIMED_OUT, "shutdown": RunStatus.INTERRUPTED}


class ToolStopped(Exception):
    """The tool did not return within the grace period after its token was tripped."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


@dataclass
class RunScope:
    """What a wait inside a run needs to know: the run, its token and its deadline."""

    run_id: int
    tool: str
    args: dict
    token: CancelToken
    deadline: float | None = None  # time.monotonic() value
    tool_input_schema: dict | None = None
    # Requests asked from inside this call (not §10 suspensions): withdrawn when the call ends.
    asked: set = field(default_factory=set)
    # Told of each request asked from inside the call, once it is open (an agent run's transcript).
    on_asked: object = None

    def remaining(self):
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())


_current_scope = contextvars.ContextVar("toolnexus_console_run_scope", default=None)


@dataclass
class Supervisor:
    loop: asyncio.AbstractEventLoop
    tasks: dict = field(default_factory=dict)  # run id -> asyncio.Task
    tokens: dict = field(default_factory=dict)  # run id -> CancelToken
    waiters: dict = field(default_factory=dict)  # request id -> set of asyncio.Event, one per waiting task
    listener: asyncio.Task | None = None
    expiry_timer: asyncio.Task | None = None
    # Set when a request opens with a deadline before the timer's next read (or the
    # timer must re-read for another reason); requests that expire later leave it asleep.
    expiry_wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    # When the expiry timer next reads the database (time.time()); infinite while it reads.
    next_expiry_check: float = math.inf
    started: bool = False
    starting: asyncio.Lock = field(default_factory=asyncio.Lock)
    # The scopes of MCP tool calls in flight: an MCP server's elicitation arrives on its
    # session's own task, outside any run's context, and is tied to the call it interrupts.
    mcp_calls: list = field(default_factory=list)
    heartbeat: asyncio.Task | None = None
    pulse: asyncio.Task | None = None  # writes the heartbeat itself, apart from the heartbeat's other work
    publisher: asyncio.Task | None = None  # sends this loop's committed events (events.Outbox)
    safety_poll: asyncio.Task | None = None
    # Set to make the heartbeat beat now (the channel layer came back, a test wants it).
    beat_wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    # Runs another process took over while this one looked dead: their tasks stop
    # without touching the database (the new owner carries on from there).
    relinquished: set = field(default_factory=set)
    listen_channel: str | None = None  # the listener's channel, rejoined to the group on every beat

    def wake(self, request_id):
        for waiter in self.waiters.get(request_id, ()):
            waiter.set()

    def background_tasks(self):
        """The supervisor's own tasks: listener, expiry timer, safety poll, heartbeat and its pulse."""
        tasks = (self.publisher, self.listener, self.expiry_timer, self.safety_poll, self.heartbeat, self.pulse)
        return [t for t in tasks if t is not None]

    def relinquish(self, run_id):
        task = self.tasks.get(run_id)
        if task is not None and not task.done():
            self.relinquished.add(run_id)
            task.cancel()

    def wake_for(self, action, run_id, request_id):
        """Wake the waiters of a resolved request, trip the token of a run whose cancel was asked.

        For this process's own commits the outbox calls it at once, ahead of the event's frame;
        the frame then comes through the listener (on_change) and wakes them again, which changes nothing.
        """
        if action in RESOLVING_ACTIONS and request_id:
            self.wake(request_id)
        elif action == AuditEvent.Action.RUN_CANCEL_REQUESTED:
            token = self.tokens.get(run_id)
            if token is not None:
                token.trip("cancelled")

    def on_change(self, frame):
        """Wake whoever this change concerns: a waiter for a resolved request, a token for a cancel."""
        action = frame.get("action")
        if action == AuditEvent.Action.REQUEST_OPENED:
            if self.expires_before_next_check(frame.get("request")):
                self.expiry_wakeup.set()
        else:
            self.wake_for(action, frame.get("run_id"), frame.get("request_id"))

    def expires_before_next_check(self, request):
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

    def spawn(self, coro):
        # A fresh context: a run must not inherit the HTTP request's thread-sensitive
        # executor, which Django closes when that request ends.
        return self.loop.create_task(coro, context=contextvars.Context())


_supervisors = weakref.WeakKeyDictionary()


def supervisor():
    loop = asyncio.get_running_loop()
    sup = _supervisors.get(loop)
    if sup is None:
        sup = _supervisors[loop] = Supervisor(loop=loop)
    return sup


async def ensure_started():
    """Start this process's supervisor once per event loop: recover orphaned runs, listen for changes."""
    sup = supervisor()
    if sup.started:
        return sup
    # Concurrent first requests wait for one start-up: none is served before this process
    # has beaten and taken over what dead processes left.
    async with sup.starting:
        if sup.started:
            return sup
        try:
            await processes.abeat(PROCESS_ID)
            sqlite_wal.hold_wal_open()
            sup.publisher = sup.spawn(events.open_outbox(on_committed=sup.wake_for).deliver())
            sup.listener = sup.spawn(_listen(sup))
            sup.expiry_timer = sup.spawn(_expire_on_time(sup))
            sup.safety_poll = sup.spawn(_poll_waited_requests(sup))
            await take_over_dead_processes(sup)
            sup.heartbeat = sup.spawn(_beat(sup))
            sup.pulse = sup.spawn(_pulse())
        except BaseException:
            # The database was not reachable yet: start from scratch on the next request.
            for task in sup.background_tasks():
                task.cancel()
            sup.publisher = sup.listener = sup.expiry_timer = sup.safety_poll = sup.heartbeat = sup.pulse = None
            raise
        sup.started = True
    return sup


async def take_over_dead_processes(sup):
    """Adopt the waiting runs of processes that stopped beating and interrupt their executing ones."""
    recovery = await runs.arecover_orphaned_runs(PROCESS_ID)
    if recovery.interrupted:
        logger.warning("marked %d run(s) a stopped console left executing as interrupted", len(recovery.interrupted))
    for run_id in recovery.adopted:
        try:
            await adopt_run(sup, run_id)
        except Exception:  # one run that cannot be picked up must not keep the console from serving
            logger.exception("could not resume run %s after the restart", run_id)
    if recovery.adopted:
        logger.warning("resuming %d waiting run(s) a stopped console left", len(recovery.adopted))
    return recovery


async def _beat(sup):
    """The heartbeat: still owner of my runs, no cancel missed, dead processes' runs taken over."""
    interval = settings.TOOLNEXUS["HEARTBEAT_SECONDS"]
    while True:
        try:
            await beat_once(sup)
        except Exception:
            logger.exception("the heartbeat could not reach the database")
        await stay_in_console_group(sup)
        sup.beat_wakeup.clear()
        await _until_woken(sup.beat_wakeup, interval)


async def stay_in_console_group(sup):
    """Rejoin the listener's channel, so a layer's group expiry never leaves runs to the safety poll."""
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is not None and sup.listen_channel is not None:
        await events.rejoin(layer, sup.listen_channel, CONSOLE_GROUP)


async def _pulse():
    """Say "alive" every HEARTBEAT_SECONDS, on time however busy the rest of the supervisor is.

    Not only in beat_once: its reads wait their turn on the shared database thread, which a burst of
    runs or a locked table can hold for longer than HEARTBEAT_TIMEOUT_SECONDS, and the other
    processes would take this busy one for a dead one and interrupt its runs.
    """
    interval = settings.TOOLNEXUS["HEARTBEAT_SECONDS"]
    while True:
        try:
            await _say_alive(processes.abeat_apart)
        except Exception:
            logger.exception("the heartbeat could not reach the database")
        await asyncio.sleep(interval)


async def _say_alive(abeat):
    if not await abeat(PROCESS_ID):
        logger.warning("this console process had been declared dead (no heartbeat); its runs were taken over")


async def beat_once(sup):
    """The heartbeat's checks; saying "alive" is the pulse's alone, so it is written once a beat."""
    mine = list(sup.tasks)
    for run_id in await processes.aruns_taken_from(PROCESS_ID, mine):
        logger.warning("run %s was taken over by another console process; this one stops it here", run_id)
        sup.relinquish(run_id)
    for run_id in await processes.acancels_pending(PROCESS_ID, mine):
        token = sup.tokens.get(run_id)
        if token is not None and not token.is_set():
            token.trip("cancelled")
    await take_over_dead_processes(sup)


async def _poll_waited_requests(sup):
    """The safety net under the notifications: one query a SAFETY_POLL_SECONDS for every request waited on here."""
    interval = settings.TOOLNEXUS["SAFETY_POLL_SECONDS"]
    while True:
        await asyncio.sleep(interval)
        await wake_resolved(sup, "the safety poll")


async def wake_resolved(sup, who):
    """Wake the waits whose request is no longer open, and only those: one query for every request waited on here."""
    waited = list(sup.waiters)
    if not waited:
        return
    try:
        for request_id in await decisions.aresolved_among(waited):
            sup.wake(request_id)
    except Exception:
        logger.exception("%s could not read the waited-on requests", who)


async def catch_up(sup):
    """After notifications may have been lost: wake the waits whose request was resolved meanwhile,
    run the expiry timer now, and beat now (the heartbeat trips the tokens of cancels recorded meanwhile).

    What did not change is left asleep: a wait woken for nothing costs a read of its own.
    """
    sup.expiry_wakeup.set()
    sup.beat_wakeup.set()
    await wake_resolved(sup, "the catch-up")


async def adopt_run(sup, run_id):
    """Resume a waiting run another process left: a new token, then await its open requests (§10 durability)."""
    from approvals.runs import agent_runner

    run, requests = await runs.aresume_point(run_id)
    if not requests:
        await runs.afinish_run(run_id, RunStatus.INTERRUPTED, "interrupted: nothing left to resume", True)
        return
    token = CancelToken()
    elapsed = (await _seconds_since(run.created_at)) if run.timeout is not None else 0.0
    if run.kind == "agent":
        coro = agent_runner.resume_agent_run(run, token, elapsed=elapsed)
    else:
        coro = execute_run(run.pk, run.tool, run.args, run.timeout, token, resume_request=requests[0], elapsed=elapsed)
    supervise(sup, run.pk, token, coro)


async def _seconds_since(moment):
    from django.utils import timezone

    return max(0.0, (timezone.now() - moment).total_seconds())


# Even with no wake-up the expiry timer re-reads the database this often (requests
# opened by another process are not announced to this one on the in-memory layer).
EXPIRY_CHECK_SECONDS = 5.0


async def _expire_on_time(sup):
    """The server's own expiry timer: resolves open requests at their expiresAt, dashboards or not."""
    while True:
        sup.expiry_wakeup.clear()
        sup.next_expiry_check = math.inf  # a request opening during the read may not be in it: it wakes the timer
        try:
            next_due = await decisions.aexpire_due_requests()
        except Exception:
            logger.exception("expiry timer could not read the open requests")
            next_due = None
        delay = EXPIRY_CHECK_SECONDS if next_due is None else min(max(next_due, 0.005), EXPIRY_CHECK_SECONDS)
        sup.next_expiry_check = time.time() + delay
        await _until_woken(sup.expiry_wakeup, delay)


async def _until_woken(wakeup, seconds):
    """Wait until ``wakeup`` is set or ``seconds`` pass, whichever comes first."""
    try:
        await asyncio.wait_for(wakeup.wait(), timeout=seconds)
    except asyncio.TimeoutError:
        pass
    if asyncio.current_task().cancelling():
        # Python 3.11's wait_for drops a cancel that lands as the wake-up fires: honour it here.
        raise asyncio.CancelledError


LISTEN_RETRY_FIRST_SECONDS = 0.1
LISTEN_RETRY_MAX_SECONDS = 2.0


async def _listen(sup):
    """Hear of changes on the channel layer; when it fails (Redis restarting), rejoin with backoff.

    While it is away nothing is lost: the safety poll goes on, and once rejoined one
    catch-up reads what changed meanwhile (``catch_up``).
    """
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is None:
        return
    retry = LISTEN_RETRY_FIRST_SECONDS
    channel = None
    failed = False
    while True:
        try:
            channel = await layer.new_channel()
            await layer.group_add(CONSOLE_GROUP, channel)
            sup.listen_channel = channel
            if failed:
                # Joined first: what commits from here on is heard, what committed before is read.
                logger.warning("the channel layer is back; catching up from the database")
                await catch_up(sup)
            failed = False
            retry = LISTEN_RETRY_FIRST_SECONDS
            while True:
                message = await layer.receive(channel)
                frame = message.get("frame") or {}
                try:
                    sup.on_change(frame)
                except Exception:
                    logger.exception("run supervisor could not apply %s", message.get("type"))
        except asyncio.CancelledError:
            if channel is not None:
                try:
                    await layer.group_discard(CONSOLE_GROUP, channel)
                except Exception:  # the layer is down: the group entry expires on its own
                    pass
            raise
        except Exception as exc:
            logger.warning("the channel layer failed (%s); rejoining in %.1fs", exc, retry)
            failed = True
            await asyncio.sleep(retry)
            retry = min(retry * 2, LISTEN_RETRY_MAX_SECONDS)


# -- starting and cancelling ------------------------------------------------------


async def start_run(*, tool, args=None, timeout=None, user=None, retry_of=None):
    """Create a run and execute it as a supervised task; returns the Run row (already running)."""
    sup = await ensure_started()
    toolkit = await get_toolkit()
    tool, args, timeout = runs.validate_run_input(tool, args, timeout, {t.name for t in toolkit.tools()})
    run = await runs.acreate_run(tool=tool, args=args, timeout=timeout, user=user, owner=PROCESS_ID, retry_of=retry_of)
    token = CancelToken()
    supervise(sup, run.pk, token, execute_run(run.pk, tool, args, timeout, token))
    return run


def supervise(sup, run_id, token, coro):
    """Run ``coro`` as the run's supervised task, with ``token`` as its cancel token."""
    sup.tokens[run_id] = token
    task = sup.spawn(coro)
    sup.tasks[run_id] = task
    task.add_done_callback(lambda _t: _forget(sup, run_id))
    return task


def _forget(sup, run_id):
    sup.tasks.pop(run_id, None)
    sup.tokens.pop(run_id, None)
    sup.relinquished.discard(run_id)


async def cancel_run(run_id, *, user=None, by_token=False):
    """Record the cancel in the database, then trip the token at once if this process owns the run.

    Raises DecisionError ("forbidden") when ``user`` may not cancel it (runs.request_cancel_run).
    """
    run = await runs.arequest_cancel_run(run_id, user=user, by_token=by_token)
    token = supervisor().tokens.get(run.pk)
    if token is not None:
        token.trip("cancelled")
    return run


async def wait_for_run(run_id):
    """Await a run's task if this process owns it (tests and scripts)."""
    task = supervisor().tasks.get(run_id)
    if task is not None:
        await asyncio.shield(task)


# -- executing: the §10 loop rule ---------------------------------------------------


async def execute_run(run_id, tool_name, args, timeout, token, *, resume_request=None, elapsed=0.0):
    """A tool run: the §10 loop rule from the first call, or, for a run adopted after a
    restart, from the wait on ``resume_request`` (the suspension the tool already returned)."""
    deadline = time.monotonic() + timeout - elapsed if timeout is not None else None
    scope = RunScope(run_id=run_id, tool=tool_name, args=args, token=token, deadline=deadline)
    _current_scope.set(scope)
    try:
        # A cancel pressed before this task got going is in the database, not yet in the token.
        if await runs.acancel_is_requested(run_id):
            token.trip("cancelled")
        toolkit = await get_toolkit()
        tool = toolkit.get(tool_name)
        if tool is None:
            await runs.afinish_run(run_id, RunStatus.FAILED, f"Unknown tool: {tool_name}", True)
            return
        scope.tool_input_schema = tool.input_schema
        if resume_request is None:
            result = await _apply_loop_rule(tool, args, scope)
        else:
            answer = await await_answer(resume_request.id, scope)
            result = await retry_with_answer(tool, args, resume_request.prompt, answer, scope)
        status = STATUS_FOR_TRIP[token.reason] if token.is_set() else (
            RunStatus.FAILED if result.is_error else RunStatus.SUCCEEDED
        )
        await runs.afinish_run(run_id, status, result.output, result.is_error)
    except ToolStopped as stopped:
        output = {
            "cancelled": "cancelled: the tool did not stop within the grace period",
            "timeout": f"timed out after {timeout:g}s" if timeout is not None else "timed out",
            "shutdown": "interrupted: the console is shutting down",
        }[stopped.reason]
        await runs.afinish_run(run_id, STATUS_FOR_TRIP[stopped.reason], output, True)
    except asyncio.CancelledError:
        token.trip("shutdown")
        raise
    except Exception as exc:  # a tool that raises fails its run, never the server
        logger.exception("run %s failed", run_id)
        await runs.afinish_run(run_id, RunStatus.FAILED, f"{type(exc).__name__}: {exc}", True)


async def _apply_loop_rule(tool, args, scope):
    """§10: a suspension waits; ok re-executes once with ctx.answer; a second suspension is unresolved."""
    result = await call_tool(tool, args, ToolContext(signal=scope.token, timeout=scope.remaining()), scope)
    request = pending_of(result)
    if request is None:
        return result
    answer = await wait_in_scope(request, scope, resumable=True)
    return await retry_with_answer(tool, args, request.prompt, answer, scope)


async def retry_with_answer(tool, args, prompt, answer, scope):
    """§10 after the wait: ok re-executes the tool once with ctx.answer (a second suspension is
    unresolved); ok=false is declined/expired without running it again."""
    if not answer.ok:
        return ToolResult(output=f"declined/expired: {prompt}", is_error=True)
    retry_ctx = ToolContext(signal=scope.token, timeout=scope.remaining(), answer=answer)
    result = await call_tool(tool, args, retry_ctx, scope)
    if pending_of(result) is not None:
        return ToolResult(output=f"unresolved: {prompt}", is_error=True)
    return result


def _consume(task):
    if not task.cancelled():
        task.exception()  # a late result or error from an abandoned tool is discarded


async def call_tool(tool, args, ctx, scope):
    """Execute one tool call under the run's token and deadline.

    At the deadline the token trips with reason ``timeout``. A tripped tool gets
    STOP_GRACE_SECONDS to return; then an async tool's task is cancelled and a
    thread-bound tool is abandoned, its late result discarded.
    """
    token = scope.token
    # The tool runs with this call's scope, so a request it asks from inside (console_wait_for)
    # is tied to this run, its token and its deadline.
    context = contextvars.copy_context()
    context.run(_current_scope.set, scope)
    task = asyncio.get_running_loop().create_task(tool.execute(dict(args), ctx), context=context)
    stop = asyncio.ensure_future(token.wait())
    sup = supervisor()
    is_mcp = getattr(tool, "source", None) == "mcp"
    if is_mcp:
        sup.mcp_calls.append(scope)
    try:
        remaining = scope.remaining()
        done, _ = await asyncio.wait({task, stop}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        if task not in done:
            token.trip("timeout")  # keeps the first reason if it was already cancelled
            done, _ = await asyncio.wait({task}, timeout=settings.TOOLNEXUS["STOP_GRACE_SECONDS"])
        if task in done:
            return task.result()
        task.cancel()
        task.add_done_callback(_consume)
        raise ToolStopped(token.reason)
    except asyncio.CancelledError:
        task.cancel()  # the run itself is going away: its tool goes with it
        task.add_done_callback(_consume)
        raise
    finally:
        stop.cancel()
        if is_mcp:
            sup.mcp_calls.remove(scope)
        if scope.asked and scope.run_id not in sup.relinquished:
            # A call that is over can no longer take an answer to what it asked from inside.
            asked, scope.asked = scope.asked, set()
            await asyncio.shield(asyncio.gather(*(_withdraw_if_open(rid) for rid in asked)))


# -- waiting for a human: the wait_for slot -------------------------------------------


async def wait_in_scope(request, scope, *, resumable=False):
    """Persist and publish ``request``, then wait for its answer within the run's token and deadline.

    ``resumable``: the tool already returned this suspension (the loop rule's wait),
    so the request stays answerable across a restart; otherwise it was asked from
    inside a running call and is withdrawn when that call ends.
    """
    await ensure_started()
    opening = asyncio.ensure_future(decisions.aopen_request(
        request, run_id=scope.run_id if scope.run_id else None, tool=scope.tool, args=scope.args,
        tool_input_schema=scope.tool_input_schema, actor=f"tool:{scope.tool}" if scope.tool else "system",
        resumable=resumable,
    ))
    try:
        await asyncio.shield(opening)
    except asyncio.CancelledError:
        # request.opened is published from the database thread before this await returns, so a
        # waiter can be cancelled here: let the write finish, then withdraw the request.
        await asyncio.shield(_withdraw_once_open(opening, request.id))
        raise
    if not resumable:
        scope.asked.add(request.id)
        if scope.on_asked is not None:
            await scope.on_asked(request, scope)
    return await await_answer(request.id, scope)


async def _withdraw_once_open(opening, request_id):
    try:
        await opening
    except Exception:  # it never opened: nothing to withdraw
        return
    await _withdraw(request_id, "cancelled")


async def wait_for_stored_answer(request_id, *, deadline=None, stop=None, read=None):
    """The request's Answer as soon as the database holds one; None once ``deadline`` passes or ``stop`` is set.

    The one wake-up machinery for runs and the API's long-poll: the listener wakes
    this waiter on a resolving event, and the supervisor's safety poll re-reads the
    database every SAFETY_POLL_SECONDS regardless, so a lost notification delays
    the return, never loses it. ``deadline`` is a ``time.monotonic()`` value; ``stop`` is
    anything with ``is_set()`` and ``await wait()`` (a CancelToken). Giving up
    changes nothing: what to do then is the caller's decision. ``read`` replaces
    ``decisions.astored_answer`` (a run reads and claims in one call).
    """
    read = read or decisions.astored_answer
    sup = supervisor()
    waiter = asyncio.Event()
    sup.waiters.setdefault(request_id, set()).add(waiter)
    # The supervisor's safety poll wakes this waiter; without a started supervisor it re-reads itself.
    poll = None if sup.safety_poll is not None else settings.TOOLNEXUS["SAFETY_POLL_SECONDS"]
    try:
        while True:
            waiter.clear()  # before the read: a wake-up that lands after it is kept for the wait below
            answer = await read(request_id)
            if answer is not None:
                return answer
            if stop is not None and stop.is_set():
                return None
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return None
            wakers = [asyncio.ensure_future(waiter.wait())]
            if stop is not None:
                wakers.append(asyncio.ensure_future(stop.wait()))
            try:
                timeout = min((t for t in (poll, remaining) if t is not None), default=None)
                await asyncio.wait(wakers, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in wakers:
                    w.cancel()
    finally:
        waiters = sup.waiters.get(request_id)
        if waiters is not None:
            waiters.discard(waiter)
            if not waiters:
                del sup.waiters[request_id]


async def await_answer(request_id, scope):
    """Wait until the database holds an answer for ``request_id``, within the run's token and deadline.

    A tripped token or a passed deadline resolves the request itself (cancelled /
    expired), through the same conditional update a reviewer's answer uses, so
    whichever came first wins.
    """
    token = scope.token
    claimed = None  # set once the answer is read: a run's read claims its resume in the same database call

    async def read_and_claim(rid):
        nonlocal claimed
        answer, claimed = await processes.astored_answer_and_claim(rid, scope.run_id, PROCESS_ID)
        return answer

    try:
        answer = await wait_for_stored_answer(
            request_id, deadline=scope.deadline, stop=token, read=read_and_claim if scope.run_id else None
        )
        if answer is None:
            if token is not None and token.is_set():
                answer = await _withdraw(request_id, "cancelled" if token.reason != "timeout" else "expired")
            else:
                if token is not None:
                    token.trip("timeout")
                answer = await _withdraw(request_id, "expired")
    except asyncio.CancelledError:
        if scope.run_id not in supervisor().relinquished:
            # The waiter went away (its task was cancelled): withdraw the request so nobody answers into the void.
            await asyncio.shield(_withdraw(request_id, "cancelled"))
        raise
    if claimed is None:  # withdrawn here (cancelled, expired), or not a run's wait
        claimed = not scope.run_id or await processes.aclaim_resume(scope.run_id, request_id, PROCESS_ID)
    if not claimed:
        _let_the_run_go(scope)
    return answer


def _let_the_run_go(scope):
    """This process lost the claim to resume: an answer resumes a run once, however many processes
    woke up for it (one of them may have been declared dead and replaced meanwhile)."""
    logger.warning("run %s goes on in another console process; this one lets it go", scope.run_id)
    sup = supervisor()
    sup.relinquished.add(scope.run_id)
    raise asyncio.CancelledError


async def answer_within(request_id, seconds):
    """The API's long-poll: the stored Answer as soon as there is one, or None if still open after ``seconds``.

    Unlike a run's wait, giving up withdraws nothing: the host asks again. A request
    past its ``expiresAt`` is expired on the way out, so a host never waits on a
    deadline the console's timer has not got to yet.
    """
    await ensure_started()
    answer = await wait_for_stored_answer(request_id, deadline=time.monotonic() + seconds)
    if answer is None:
        # Expire it if due; read again either way (the expiry timer may have just got there first).
        await decisions.aexpire_due_request(request_id)
        answer = await decisions.astored_answer(request_id)
    return answer


async def _withdraw_if_open(request_id):
    if await decisions.astored_answer(request_id) is None:
        await _withdraw(request_id, "cancelled")


async def _withdraw(request_id, reason):
    try:
        return await decisions.aresolve_request(request_id, ok=False, reason=reason, actor="system")
    except decisions.DecisionError:
        answer = await decisions.astored_answer(request_id)
        return answer if answer is not None else Answer(id=request_id, ok=False, reason=reason)


async def console_wait_for(request: Request) -> Answer:
    """toolnexus' ``wait_for`` slot (§10): give it to any client, ``create_client(..., wait_for=console_wait_for)``.

    Inside a console run the request is tied to that run, its token and deadline;
    elsewhere it waits until a reviewer answers (or the awaiting task is cancelled).
    An MCP server's elicitation arrives outside any run's context: it is tied to the
    MCP tool call in flight when exactly one is (the MCP SDK does not say which call
    a server's request belongs to), and otherwise waits unattached.
    """
    scope = _current_scope.get() or _sole_mcp_call() or RunScope(run_id=0, tool="", args={}, token=None)
    return await wait_in_scope(request, scope)


def _sole_mcp_call():
    calls = supervisor().mcp_calls
    if len(calls) == 1:
        return calls[0]
    if calls:
        logger.warning("an MCP elicitation arrived during %d MCP tool calls; it is shown without a run", len(calls))
    return None
