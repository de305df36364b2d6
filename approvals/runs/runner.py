"""Starts and supervises runs server-side: each console process's supervisor, its start-up, and adoption.

Each console process keeps a supervisor: the asyncio tasks of the runs it owns,
their cancel tokens, and the requests they wait on. It listens to the channel
layer only to wake up early; it also re-reads the database on a short safety
interval (one query for all its waits), so a lost notification delays a resume,
never loses it. Its heartbeat says the process is alive, takes over the runs of
processes that stopped beating, and trips tokens whose cancel notice was lost.
"""

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User

from approvals import events, selectors
from approvals.audit.sealer import start_sealer
from approvals.events import CONSOLE_GROUP
from approvals.hotpath import sqlite_wal
from approvals.models import AuditEvent, Run, RunStatus
from approvals.review import deadlines, decisions
from approvals.runs import processes, services, shutdown
from approvals.runs.agent_runner import AgentLoop, resume_agent_run
from approvals.runs.cancel import CancelToken
from approvals.runs.loop_rule import execute_run
from approvals.runs.supervisor import PROCESS_ID, Supervisor, supervisor
from approvals.runs.toolkit import get_toolkit
from approvals.signing import keys
from approvals.telemetry import metrics

logger = logging.getLogger(__name__)


async def ensure_started() -> Supervisor:
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
            # The public half of the key this process signs with is kept: its answers verify after a rotation.
            await keys.aregister_current_key()
            # From here on the safety net reads what is recorded; what came before, start-up reads whole.
            sup.seen_seq = await selectors.alast_seq()
            sqlite_wal.hold_wal_open()
            sup.publisher = sup.spawn(events.open_outbox(on_committed=sup.committed_here).deliver())
            sup.listener = sup.spawn(_listen(sup))
            sup.expiry_timer = sup.spawn(_expire_on_time(sup))
            sup.safety_poll = sup.spawn(_poll_waited_requests(sup))
            await take_over_dead_processes(sup)
            sup.heartbeat = sup.spawn(_beat(sup))
            sup.pulse = sup.spawn(_pulse())
            start_sealer()
        except BaseException:
            # The database was not reachable yet: start from scratch on the next request.
            for task in sup.background_tasks():
                task.cancel()
            sup.publisher = sup.listener = sup.expiry_timer = sup.safety_poll = sup.heartbeat = sup.pulse = None
            raise
        sup.started = True
    return sup


async def take_over_dead_processes(sup: Supervisor) -> services.Recovery:
    """Adopt the waiting runs of processes that stopped beating and interrupt their executing ones."""
    recovery = await services.arecover_orphaned_runs(PROCESS_ID)
    if recovery.interrupted:
        logger.warning("marked %d run(s) a stopped console left executing as interrupted", len(recovery.interrupted))
    for run_id in recovery.adopted:
        try:
            await adopt_run(sup, run_id)
        except Exception:  # one run that cannot be picked up must not keep the console from serving
            logger.exception("could not resume run %s after the restart", run_id)
    if recovery.adopted:
        logger.warning("resuming %d waiting run(s) a stopped console left", len(recovery.adopted))
    await discard_channels_of(recovery.forgotten)
    return recovery


async def discard_channels_of(process_ids: list[str]) -> None:
    """Take dead processes' channels out of the channel layer's groups: nobody reads them, and every event
    sent to them until the layer's group expiry (a day) would fill them and be dropped "over capacity"."""
    from channels.layers import get_channel_layer

    discard = getattr(get_channel_layer(), "discard_process", None)  # the Redis layer's (hotpath/redis_layer.py)
    if discard is None:
        return
    for process_id in process_ids:
        try:
            removed = await discard(process_id)
        except Exception as exc:  # the layer is down: the next process declaring it dead will not see its row
            logger.warning("could not take the channels of %s out of their groups (%s)", process_id, exc)
            continue
        if removed:
            logger.info("took %d channel(s) of the dead console process %s out of their groups", removed, process_id)


async def _beat(sup: Supervisor) -> None:
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


async def stay_in_console_group(sup: Supervisor) -> None:
    """Rejoin the listener's channel, so a layer's group expiry never leaves runs to the safety poll; and say
    again whose channels these are (a process taken for dead and back again had its record dropped)."""
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is not None and sup.listen_channel is not None:
        await events.rejoin(layer, sup.listen_channel, CONSOLE_GROUP)
        try:
            await _register_channels(layer)
        except Exception as exc:  # the layer is down: the listener registers again when it rejoins
            logger.debug("could not register this process's channels: %s", exc)


async def _register_channels(layer: Any) -> None:
    """Record this process's channel prefix under its id, so whoever declares it dead can discard its channels."""
    register = getattr(layer, "register_process", None)  # the Redis layer's (hotpath/redis_layer.py)
    if register is not None:
        await register(PROCESS_ID)


async def _pulse() -> None:
    """Say "alive" every HEARTBEAT_SECONDS, on time however busy the rest of the supervisor is.

    Not only in beat_once: its reads wait their turn on the shared database thread, which a burst of
    runs or a locked table can hold for longer than HEARTBEAT_TIMEOUT_SECONDS, and the other
    processes would take this busy one for a dead one and interrupt its runs.
    """
    interval = settings.TOOLNEXUS["HEARTBEAT_SECONDS"]
    while True:
        await asyncio.sleep(interval)  # ensure_started has just said it, before spawning this
        try:
            await _say_alive(processes.abeat_apart)
        except Exception:
            logger.exception("the heartbeat could not reach the database")


async def _say_alive(abeat: Callable[[str], Awaitable[bool]]) -> None:
    if not await abeat(PROCESS_ID):
        logger.warning("this console process had been declared dead (no heartbeat); its runs were taken over")


async def beat_once(sup: Supervisor) -> None:
    """The heartbeat's checks; saying "alive" is the pulse's alone, so it is written once a beat."""
    await apply_recorded_changes(sup, "the heartbeat")
    await take_over_dead_processes(sup)


async def _poll_waited_requests(sup: Supervisor) -> None:
    """The safety net under the notifications: every SAFETY_POLL_SECONDS, act on what was recorded since."""
    interval = settings.TOOLNEXUS["SAFETY_POLL_SECONDS"]
    while True:
        await asyncio.sleep(interval)
        await apply_recorded_changes(sup, "the safety poll")


async def apply_recorded_changes(sup: Supervisor, who: str) -> None:
    """Act on what the audit trail recorded since the last look, as if each notification had arrived:
    resolved requests wake their waits, cancels trip their runs' tokens, and a run another process
    adopted from this one or interrupted stops here without touching the database.

    Its reads follow the number of changes, not of waiting runs: an idle console reads one row a tick.
    """
    async with sup.catching_up:
        try:
            while True:
                upto, changes, missing = await processes.achanges_after(sup.seen_seq, tuple(sup.unseen))
                sup.note_unseen(missing)
                for change in changes:
                    sup.wake_for(change.action, change.run_id, change.request_id)
                    if change.run_id in sup.tasks and _taken_from_here(change):
                        logger.warning(
                            "run %s was taken over by another console process; this one stops it here", change.run_id
                        )
                        sup.relinquish(change.run_id)
                sup.seen_seq = upto
                if len(changes) < processes.CHANGES_PER_READ:
                    return
        except Exception:
            logger.exception("%s could not read what changed", who)


def _taken_from_here(change: processes.Change) -> bool:
    if change.action == AuditEvent.Action.RUN_INTERRUPTED:
        return True
    return change.action == AuditEvent.Action.RUN_ADOPTED and change.previous_owner == PROCESS_ID


async def catch_up(sup: Supervisor) -> None:
    """After notifications may have been lost: act on what was recorded meanwhile, run the expiry timer
    now, and beat now. What did not change is left asleep: a wait woken for nothing costs a read of its own."""
    sup.expiry_wakeup.set()
    sup.beat_wakeup.set()
    await apply_recorded_changes(sup, "the catch-up")


async def adopt_run(sup: Supervisor, run_id: int) -> None:
    """Resume a waiting run another process left: a new token, then await its open requests (§10 durability)."""
    run, requests = await services.aresume_point(run_id, claimed_by=PROCESS_ID)
    if not requests:
        await services.afinish_run(run_id, RunStatus.INTERRUPTED, "interrupted: nothing left to resume", True)
        return
    token = CancelToken()
    if run.cancel_requested:  # asked before this process took it over: its event is older than seen_seq
        token.trip("cancelled")
    # Its own time so far, the waits for a person left out (or its wall time, under the old clock).
    elapsed = (await services.atime_used(run)) if run.timeout is not None else 0.0
    coro: Coroutine[Any, Any, None]
    if run.kind == "agent":
        coro = resume_agent_run(run, token, elapsed=elapsed)
    else:
        coro = execute_run(
            run.pk,
            run.tool,
            run.args,
            run.timeout,
            token,
            resume_request=requests[0],
            elapsed=elapsed,
            counts_waiting=run.timeout_counts_waiting,
        )
    supervise(sup, run.pk, token, coro)


# Even with no wake-up the expiry timer re-reads the database this often (requests
# opened by another process are not announced to this one on the in-memory layer).
EXPIRY_CHECK_SECONDS = 5.0


async def _expire_on_time(sup: Supervisor) -> None:
    """The server's own expiry timer: resolves open requests at their expiresAt, dashboards or not, and sends
    the policies' reminders before it. Both read the deadline from the database, so an extension moves them."""
    while True:
        sup.expiry_wakeup.clear()
        sup.next_expiry_check = math.inf  # a request opening during the read may not be in it: it wakes the timer
        try:
            next_due = await decisions.aexpire_due_requests()
        except Exception:
            logger.exception("expiry timer could not read the open requests")
            next_due = None
        try:  # the policies' reminders ride on the same timer (review/deadlines.py)
            next_reminder = await deadlines.aremind_due_requests()
        except Exception:
            logger.exception("expiry timer could not send the due reminders")
            next_reminder = None
        if next_reminder is not None:
            next_due = next_reminder if next_due is None else min(next_due, next_reminder)
        delay = EXPIRY_CHECK_SECONDS if next_due is None else min(max(next_due, 0.005), EXPIRY_CHECK_SECONDS)
        sup.next_expiry_check = time.time() + delay
        await _until_woken(sup.expiry_wakeup, delay)


async def _until_woken(wakeup: asyncio.Event, seconds: float) -> None:
    """Wait until ``wakeup`` is set or ``seconds`` pass, whichever comes first."""
    try:
        await asyncio.wait_for(wakeup.wait(), timeout=seconds)
    except TimeoutError:
        pass
    current = asyncio.current_task()
    if current is not None and current.cancelling():
        # Python 3.11's wait_for drops a cancel that lands as the wake-up fires: honour it here.
        raise asyncio.CancelledError


LISTEN_RETRY_FIRST_SECONDS = 0.1
LISTEN_RETRY_MAX_SECONDS = 2.0


async def _listen(sup: Supervisor) -> None:
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
            await _register_channels(layer)
            sup.listen_channel = channel
            if failed:
                # Joined first: what commits from here on is heard, what committed before is read.
                logger.warning("the channel layer is back; catching up from the database")
                metrics.CHANNEL_LAYER_RECONNECTS.inc()
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


async def start_run(
    *,
    tool: object,
    args: object = None,
    timeout: object = None,
    user: User | None = None,
    retry_of: int | None = None,
    timeout_counts_waiting: object = False,
) -> Run:
    """Create a run and execute it as a supervised task; returns the Run row (already running).

    ``timeout_counts_waiting``: the old wall clock, where the wait for a person counts against ``timeout``.
    Raises ``shutdown.ShuttingDown`` once this process is stopping."""
    shutdown.check_taking_runs()
    counts_waiting = services.checked_counts_waiting(timeout_counts_waiting)
    sup = await ensure_started()
    toolkit = await get_toolkit()
    tool, args, timeout = services.validate_run_input(
        tool, args, timeout, {t.name: t.input_schema for t in toolkit.tools()}
    )
    run = await services.acreate_run(
        tool=tool,
        args=args,
        timeout=timeout,
        user=user,
        owner=PROCESS_ID,
        retry_of=retry_of,
        timeout_counts_waiting=counts_waiting,
    )
    token = CancelToken()
    supervise(sup, run.pk, token, execute_run(run.pk, tool, args, timeout, token, counts_waiting=counts_waiting))
    return run


async def start_agent_run(
    *,
    agent: object,
    timeout: object = None,
    user: User | None = None,
    retry_of: int | None = None,
    timeout_counts_waiting: object = False,
) -> Run:
    """Create an agent run and execute it as a supervised task; returns the Run row (already running).

    Raises ``shutdown.ShuttingDown`` once this process is stopping."""
    shutdown.check_taking_runs()
    counts_waiting = services.checked_counts_waiting(timeout_counts_waiting)
    sup = await ensure_started()
    toolkit = await get_toolkit()
    prompt, model, timeout = services.validate_agent_input(agent, timeout, {t.name for t in toolkit.tools()})
    run = await services.acreate_run(
        agent_prompt=prompt,
        agent_model=model,
        timeout=timeout,
        user=user,
        owner=PROCESS_ID,
        retry_of=retry_of,
        timeout_counts_waiting=counts_waiting,
    )
    token = CancelToken()
    loop = AgentLoop(run.pk, model, token, timeout, counts_waiting=counts_waiting)
    supervise(sup, run.pk, token, loop.drive(prompt=prompt))
    return run


def supervise(sup: Supervisor, run_id: int, token: CancelToken, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
    """Run ``coro`` as the run's supervised task, with ``token`` as its cancel token.

    The token is tripped at once if the run's cancel was heard before it was here: a cancel recorded
    since goes through the token (``Supervisor.wake_for``), one recorded before through ``cancels_heard``,
    or, for a run taken over, ``adopt_run``'s read.
    """
    sup.tokens[run_id] = token
    if sup.take_cancel_heard(run_id):
        token.trip("cancelled")
    task = sup.spawn(coro)
    sup.tasks[run_id] = task
    task.add_done_callback(lambda _t: _forget(sup, run_id))
    return task


def _forget(sup: Supervisor, run_id: int) -> None:
    sup.tasks.pop(run_id, None)
    sup.tokens.pop(run_id, None)
    sup.relinquished.discard(run_id)


async def cancel_run(run_id: int, *, user: User | None = None, by_token: bool = False) -> Run:
    """Record the cancel in the database, then trip the token at once if this process owns the run.

    Raises DecisionError ("forbidden") when ``user`` may not cancel it (services.request_cancel_run).
    """
    run = await services.arequest_cancel_run(run_id, user=user, by_token=by_token)
    token = supervisor().tokens.get(run.pk)
    if token is not None:
        token.trip("cancelled")
    return run


async def wait_for_run(run_id: int) -> None:
    """Await a run's task if this process owns it (tests and scripts)."""
    task = supervisor().tasks.get(run_id)
    if task is not None:
        await asyncio.shield(task)
