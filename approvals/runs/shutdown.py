"""A console process's graceful stop (SIGTERM under daphne; approvals/startup.py installs it).

In order: readiness turns false and no new run starts here (``ShuttingDown``); every waiting run is
handed over at once (``services.release_run``), so the next heartbeat of another console adopts it;
runs whose tools are executing get until SHUTDOWN_GRACE_SECONDS after the signal to finish or to
suspend (a suspension is handed over as it opens); what still executes then has its token tripped
("shutdown": the tool gets STOP_GRACE_SECONDS, the run ends interrupted); last, this process's
heartbeat row goes, so anything left is taken over without waiting HEARTBEAT_TIMEOUT_SECONDS.
docs/operations.md, "Stopping a console", is the operator's account of it.
"""

import asyncio
import logging
import time
from dataclasses import dataclass, field

from django.conf import settings

from approvals.audit.sealer import stop_sealer
from approvals.runs import processes, services
from approvals.runs.supervisor import PROCESS_ID, Supervisor, supervisor
from approvals.team import webhooks
from approvals.telemetry import logs

logger = logging.getLogger(__name__)

REFUSAL = (
    "This console is shutting down and starts no new runs; nothing was started. "
    "Try again in a moment: another console (or this one, restarted) will take it."
)


class ShuttingDown(Exception):
    """This process is stopping: it starts no new runs."""

    def __init__(self) -> None:
        super().__init__(REFUSAL)


@dataclass
class Stop:
    """What the stop did, for its log line and the tests."""

    handed_over: list[int] = field(default_factory=list)
    finished: int = 0  # runs that ended (or suspended and were handed over) within the grace period
    tripped: list[int] = field(default_factory=list)  # still executing at the end of the grace period


_stopping_since: float | None = None  # time.monotonic() of the signal


def is_stopping() -> bool:
    return _stopping_since is not None


def seconds_stopping() -> float | None:
    return None if _stopping_since is None else time.monotonic() - _stopping_since


def begin() -> None:
    """Readiness false and no new runs, from now on (idempotent)."""
    global _stopping_since
    if _stopping_since is None:
        _stopping_since = time.monotonic()


def check_taking_runs() -> None:
    """Raise ``ShuttingDown`` once the stop has begun (the one door every new run goes through)."""
    if _stopping_since is not None:
        raise ShuttingDown


async def stop_gracefully() -> Stop:
    """The whole stop, from the signal to the moment the server may stop listening (see the module's doc)."""
    begin()
    assert _stopping_since is not None
    grace = settings.TOOLNEXUS["SHUTDOWN_GRACE_SECONDS"]
    drain = settings.TOOLNEXUS["SHUTDOWN_DRAIN_SECONDS"]
    sup = supervisor()
    stop = Stop()
    logger.warning(
        "shutting down: /readyz answers 503 and no new run starts; handing over waiting runs, "
        "executing ones get up to %gs",
        grace,
    )
    if sup.started:
        # The heartbeat takes over dead processes' runs: it would take back what this one hands over.
        if sup.heartbeat is not None:
            sup.heartbeat.cancel()
        await _hand_over_and_wait(sup, stop, _stopping_since + grace)
        await _trip_the_rest(sup, stop)
    # Serve (readiness false) until the load balancer has seen it, however quickly the runs went; policy
    # webhooks already queued get that long to be delivered (at least a second).
    draining = max(0.0, _stopping_since + drain - time.monotonic())
    delivered, _ = await asyncio.gather(
        asyncio.to_thread(webhooks.wait_for_deliveries, max(draining, 1.0)), asyncio.sleep(draining)
    )
    if not delivered:
        logger.warning("policy webhooks still being delivered are dropped as the process stops")
    if sup.started:
        await _leave(sup)
    logger.warning(
        "stopped: %d waiting run(s) handed over, %d ended within the grace period, %d interrupted",
        len(stop.handed_over),
        stop.finished,
        len(stop.tripped),
    )
    # Log lines are written from a queue on a thread of their own: write what is queued before the reactor stops.
    await asyncio.to_thread(logs.flush, 2.0)
    return stop


async def _hand_over_and_wait(sup: Supervisor, stop: Stop, deadline: float) -> None:
    """Hand over what waits; until ``deadline``, wait for the rest to end or to suspend (then hand it over)."""
    while True:
        sup.suspended.clear()  # before the reads: a suspension opening during them wakes the wait below
        await _hand_over_waiting(sup, stop)
        executing = _own_tasks(sup)
        remaining = deadline - time.monotonic()
        if not executing or remaining <= 0:
            return
        suspended = asyncio.ensure_future(sup.suspended.wait())
        try:
            done, _ = await asyncio.wait(
                {suspended, *executing}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            suspended.cancel()
        stop.finished += len(done - {suspended})


async def _hand_over_waiting(sup: Supervisor, stop: Stop) -> None:
    for run_id in list(sup.tasks):
        task = sup.tasks.get(run_id)  # runs end during the awaits below
        if task is None or task.done() or run_id in sup.relinquished:
            continue
        try:
            released = await services.arelease_run(run_id, PROCESS_ID)
        except Exception:  # the database is away: the run stays, and is taken over once this process is gone
            logger.exception("could not hand over run %s", run_id)
            continue
        if released:
            sup.relinquish(run_id)  # its task stops here without touching the database
            stop.handed_over.append(run_id)


def _own_tasks(sup: Supervisor) -> list[asyncio.Task[None]]:
    return [task for run_id, task in sup.tasks.items() if run_id not in sup.relinquished and not task.done()]


async def _trip_the_rest(sup: Supervisor, stop: Stop) -> None:
    """Past the grace period: trip each executing run's token; its tool gets STOP_GRACE_SECONDS, then the
    run ends interrupted ("interrupted: the console is shutting down")."""
    left = {run_id: task for run_id, task in sup.tasks.items() if run_id not in sup.relinquished and not task.done()}
    if not left:
        return
    stop.tripped = sorted(left)
    logger.warning("interrupting %d run(s) still executing after the grace period: %s", len(left), stop.tripped)
    for run_id in left:
        token = sup.tokens.get(run_id)
        if token is not None:
            token.trip("shutdown")
    # The stop grace, and a second for the run's last writes; a tool that ignores both is left to the takeover.
    await asyncio.wait(left.values(), timeout=settings.TOOLNEXUS["STOP_GRACE_SECONDS"] + 1.0)


async def _leave(sup: Supervisor) -> None:
    """Stop beating and remove this process's row: another console takes over whatever is left at its next beat."""
    for task in (sup.pulse, sup.heartbeat):
        if task is not None:
            task.cancel()
    try:
        await processes.aleave(PROCESS_ID)
    except Exception:  # the database is away: the others find this process silent after the heartbeat timeout
        logger.exception("could not remove this console process's heartbeat row")
    await asyncio.to_thread(stop_sealer)  # chain what this process wrote last
