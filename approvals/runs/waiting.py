"""Every wait for a human's answer: a run's wait within its token and deadline, the API's long-poll,
and toolnexus' ``wait_for`` slot (§10).

One loop, ``wait_for_stored_answer``, waits until the database holds an answer; the supervisor's
listener wakes it early, and its safety poll reads the answers recorded since its last look, so a
lost notification delays the return, never loses it. These waits are served by the process's supervisor, which
the server starts (``startup``: with daphne's loop, or before the first request); without it they poll.
"""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, cast

from django.conf import settings
from django.utils import timezone
from toolnexus import Answer, Request

from approvals import selectors
from approvals.models import AnswerReason
from approvals.moments import iso_time
from approvals.review import decisions
from approvals.runs import processes
from approvals.runs.cancel import CancelToken
from approvals.runs.clock import RunClock
from approvals.runs.supervisor import PROCESS_ID, RunScope, Wakeup, current_scope, supervisor

logger = logging.getLogger(__name__)


async def wait_in_scope(request: Request, scope: RunScope, *, resumable: bool = False) -> Answer:
    """Persist and publish ``request``, then wait for its answer within the run's token and deadline.

    ``resumable``: the tool already returned this suspension (the loop rule's wait),
    so the request stays answerable across a restart; otherwise it was asked from
    inside a running call and is withdrawn when that call ends.
    """
    # Listening from before the request exists: a wake-up says when its answer is there, and the wait
    # need not read a request it has just opened.
    sup = supervisor()
    waiter = sup.listen(request.id)
    try:
        return await _open_and_await(request, scope, waiter, resumable=resumable)
    finally:
        sup.stop_listening(request.id, waiter)


async def _open_and_await(request: Request, scope: RunScope, waiter: Wakeup, *, resumable: bool) -> Answer:
    give_deadline(request, scope.clock)
    opening = asyncio.ensure_future(
        decisions.aopen_request(
            request,
            run_id=scope.run_id if scope.run_id else None,
            tool=scope.tool,
            args=scope.args,
            tool_input_schema=scope.tool_input_schema,
            actor=f"tool:{scope.tool}" if scope.tool else "system",
            resumable=resumable,
        )
    )
    try:
        await asyncio.shield(opening)
    except asyncio.CancelledError:
        # request.opened is published from the database thread before this await returns, so a
        # waiter can be cancelled here: let the write finish, then withdraw the request (unless the
        # run went to another process with it: a stopping console hands its suspensions over open).
        if scope.run_id not in supervisor().relinquished:
            await asyncio.shield(_withdraw_once_open(opening, request.id))
        raise
    if not resumable:
        scope.asked.add(request.id)
        if scope.on_asked is not None:
            await scope.on_asked(request, scope)
    return await await_answer(request.id, scope, listening=waiter)


def give_deadline(request: Request, clock: RunClock | None) -> None:
    """Under human-aware time a run's timeout no longer ends a wait for a person, so a request with no
    ``expiresAt`` and no per-kind default (``CONSOLE_DEFAULT_EXPIRY``, applied when it opens) gets the run's
    timeout as its deadline: nothing a run with a timeout asks waits forever."""
    if request.expiresAt or clock is None or clock.counts_waiting or clock.timeout is None:
        return
    if (settings.TOOLNEXUS.get("DEFAULT_EXPIRY_SECONDS") or {}).get(request.kind):
        return  # the door gives it the kind's default
    request.expiresAt = iso_time(timezone.now() + timedelta(seconds=clock.timeout), timespec="milliseconds")


async def _withdraw_once_open(opening: asyncio.Future[Any], request_id: str) -> None:
    try:
        await opening
    except Exception:  # it never opened: nothing to withdraw
        return
    await _withdraw(request_id, "cancelled")


async def wait_for_stored_answer(
    request_id: str,
    *,
    deadline: float | None = None,
    stop: CancelToken | None = None,
    read: Callable[[str], Awaitable[Answer | None]] | None = None,
    listening: Wakeup | None = None,
) -> Answer | None:
    """The request's Answer as soon as the database holds one; None once ``deadline`` passes or ``stop`` is set.

    The one wake-up machinery for runs and the API's long-poll: the listener wakes
    this waiter on a resolving event, and every SAFETY_POLL_SECONDS the supervisor's
    safety poll wakes the waiters of the requests resolved since its last look, so a
    lost notification delays the return, never loses it. ``deadline`` is a ``time.monotonic()`` value; ``stop`` is
    the run's CancelToken. Giving up
    changes nothing: what to do then is the caller's decision. ``read`` replaces
    ``selectors.astored_answer`` (a run reads and claims in one call). ``listening``: the waiter
    (``Supervisor.listen``) the caller registered before the request opened, so no answer can have come
    unheard and the first read waits for a wake-up (or the poll); the caller unregisters it.
    """
    read = read or selectors.astored_answer
    sup = supervisor()
    waiter = listening or sup.listen(request_id)
    read_now = listening is None
    # The supervisor's safety poll wakes this waiter; without a started supervisor it re-reads itself.
    poll = None if sup.safety_poll is not None else settings.TOOLNEXUS["SAFETY_POLL_SECONDS"]
    try:
        while True:
            if read_now:
                waiter.clear()  # before the read: a wake-up that lands after it is kept for the wait below
                answer = await read(request_id)
                if answer is not None:
                    return answer
            read_now = True
            if stop is not None and stop.is_set():
                return None
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return None
            timeout = min((t for t in (poll, remaining) if t is not None), default=None)
            await _until_woken(waiter, stop, timeout)
    finally:
        if listening is None:
            sup.stop_listening(request_id, waiter)


async def _until_woken(waiter: Wakeup, stop: CancelToken | None, timeout: float | None) -> None:
    """Sleep until ``waiter`` is set, ``stop`` trips or ``timeout`` seconds pass: one future all three resolve
    (a run waits like this for as long as a person takes, so the wait holds as little as it can)."""
    loop = asyncio.get_running_loop()
    woken: asyncio.Future[None] = loop.create_future()
    waiter.attach(woken)
    if stop is not None:
        stop.attach(woken)
    timer = None if timeout is None else loop.call_later(timeout, _resolve, woken)
    try:
        await woken
    finally:
        waiter.detach()
        if stop is not None:
            stop.detach(woken)
        if timer is not None:
            timer.cancel()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def await_answer(request_id: str, scope: RunScope, *, listening: Wakeup | None = None) -> Answer:
    """Wait until the database holds an answer for ``request_id``, within the run's token and deadline
    (``listening``: as ``wait_for_stored_answer`` takes it).

    A tripped token or a passed deadline resolves the request itself (cancelled /
    expired), through the same conditional update a reviewer's answer uses, so
    whichever came first wins.
    """
    token = scope.token
    claimed: bool | None = None  # set once the answer is read: a run's read claims its resume in the same database call
    if scope.run_id:
        supervisor().suspended.set()  # a stopping process may hand this run over now (runs/shutdown.py)

    async def read_and_claim(rid: str) -> Answer | None:
        nonlocal claimed
        handed = supervisor().take_handed_answer(rid)  # this process's answer claimed the resume here
        if handed is not None:
            claimed = True
            return handed
        answer, claimed = await processes.astored_answer_and_claim(rid, scope.run_id, PROCESS_ID)
        return answer

    clock = scope.clock
    try:
        # Human-aware time: the wait for a person stops the run's own clock, and only the request's deadline
        # (the expiry timer) or the token end it; under the wall clock the run's deadline ends it too.
        if clock is not None:
            clock.start_waiting()
        try:
            answer = await wait_for_stored_answer(
                request_id,
                deadline=clock.wait_deadline() if clock is not None else None,
                stop=token,
                read=read_and_claim if scope.run_id else None,
                listening=listening,
            )
        finally:
            if clock is not None:
                clock.stop_waiting()
        if answer is None:
            if token is not None and token.is_set() and token.reason != "timeout":
                answer = await _withdraw(request_id, "cancelled")
            else:  # the run's deadline passed (its token tripped on it, or is tripped now)
                if token is not None and not token.is_set():
                    token.trip("timeout")
                answer = await _expire_with_the_run(request_id)
    except asyncio.CancelledError:
        if scope.run_id not in supervisor().relinquished:
            # The waiter went away (its task was cancelled): withdraw the request so nobody answers into the void.
            await asyncio.shield(_withdraw(request_id, "cancelled"))
        raise
    if claimed is None:  # withdrawn here (cancelled, expired), or not a run's wait
        claimed = not scope.run_id or bool(
            (await processes.astored_answer_and_claim(request_id, scope.run_id, PROCESS_ID))[1]
        )
    if not claimed:
        _let_the_run_go(scope)
    return answer


def _let_the_run_go(scope: RunScope) -> None:
    """This process lost the claim to resume: an answer resumes a run once, however many processes
    woke up for it (one of them may have been declared dead and replaced meanwhile)."""
    logger.warning("run %s goes on in another console process; this one lets it go", scope.run_id)
    sup = supervisor()
    sup.relinquished.add(scope.run_id)
    raise asyncio.CancelledError


async def answer_within(request_id: str, seconds: float) -> Answer | None:
    """The API's long-poll: the stored Answer as soon as there is one, or None if still open after ``seconds``.

    Unlike a run's wait, giving up withdraws nothing: the host asks again. A request
    past its ``expiresAt`` is expired on the way out, so a host never waits on a
    deadline the console's timer has not got to yet.
    """
    answer = await wait_for_stored_answer(request_id, deadline=time.monotonic() + seconds)
    if answer is None:
        # Expire it if due; read again either way (the expiry timer may have just got there first).
        await decisions.aexpire_request(request_id)
        answer = await selectors.astored_answer(request_id)
    return answer


async def withdraw_if_open(request_id: str) -> None:
    """Withdraw (cancel) a request if it is still open: a tool call that is over asked it and can take no answer."""
    if await selectors.astored_answer(request_id) is None:
        await _withdraw(request_id, "cancelled")


async def _expire_with_the_run(request_id: str) -> Answer:
    """The run waiting on the request ran out of time: the door expires the request (unless an answer got there
    first), and the wait returns what the request holds."""
    await decisions.aexpire_request(request_id, run_timed_out=True)
    answer = await selectors.astored_answer(request_id)
    return answer if answer is not None else Answer(id=request_id, ok=False, reason="expired")


async def _withdraw(request_id: str, reason: AnswerReason) -> Answer:
    try:
        withdrawn = await decisions.aresolve_request(request_id, ok=False, reason=reason, actor="system")
        return cast(Answer, withdrawn)  # a refusal resolves at once: no quorum to wait on
    except decisions.DecisionError:
        answer = await selectors.astored_answer(request_id)
        return answer if answer is not None else Answer(id=request_id, ok=False, reason=reason)


async def console_wait_for(request: Request) -> Answer:
    """toolnexus' ``wait_for`` slot (§10): give it to any client, ``create_client(..., wait_for=console_wait_for)``.

    Inside a console run the request is tied to that run, its token and deadline;
    elsewhere it waits until a reviewer answers (or the awaiting task is cancelled).
    An MCP server's elicitation arrives outside any run's context: it is tied to the
    MCP tool call in flight when exactly one is (the MCP SDK does not say which call
    a server's request belongs to), and otherwise waits unattached.
    """
    scope = current_scope.get() or _sole_mcp_call() or RunScope(run_id=0, tool="", args={}, token=None)
    return await wait_in_scope(request, scope)


def _sole_mcp_call() -> RunScope | None:
    calls = supervisor().mcp_calls
    if len(calls) == 1:
        return calls[0]
    if calls:
        logger.warning("an MCP elicitation arrived during %d MCP tool calls; it is shown without a run", len(calls))
    return None
