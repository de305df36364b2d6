"""Record audit events and tell listeners that something changed.

Each state change writes its AuditEvent in the same transaction; the event's id is
the sequence number. Only after the commit does the channel layer hear of it, and
what it carries is a hint: a listener that sees a gap in the numbers re-reads the
database, so a dropped message costs a query, never a lost answer.

The services that record events (the request's door, runs, team) sit below what builds a frame
(``frames``) and below the webhooks, so this module imports neither: ``ApprovalsConfig.ready``
hands it both (``publish_with``).
"""

import asyncio
import logging
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync
from channels.layers import BaseChannelLayer, get_channel_layer
from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction

from approvals.models import AuditEvent, Request, Run

logger = logging.getLogger(__name__)

CONSOLE_GROUP = "console"

# Builds an event's frame at the commit from the rows in hand (``record(rows_current=True)``).
FrameBuilder = Callable[[], dict[str, Any]]


@dataclass(frozen=True)
class Publishing:
    """What a committed event is published with, handed over from above at start-up."""

    # An event's frame, its subjects read back after the commit (frames.event_frame).
    event_frame: Callable[[AuditEvent], dict[str, Any]]
    # An event's frame from the rows its transaction left in hand (frames.frame_of_rows).
    frame_of_rows: Callable[[AuditEvent, Request | None, Run | None, Sequence[str] | None], dict[str, Any]]
    # Told of each committed event about a request (team.webhooks.event_committed).
    request_event_committed: Callable[[AuditEvent], None]
    # Told of every committed event, after it is published: what counts and logs state changes (telemetry).
    # Each is called on the thread that committed; one that raises is logged and the others still run.
    observers: Sequence[Callable[[AuditEvent], None]] = ()


_handed: list[Publishing] = []


def publish_with(publishing: Publishing) -> None:
    """Publish every committed event with ``publishing`` from now on (``ApprovalsConfig.ready`` calls it once)."""
    _handed[:] = [publishing]


def publishing() -> Publishing:
    """What events publish with; raises until ``publish_with`` has been called."""
    if not _handed:
        raise RuntimeError(
            "nothing to publish with: ApprovalsConfig.ready hands events.publish_with its frame builders"
        )
    return _handed[0]


async def rejoin(layer: BaseChannelLayer, channel: str, *groups: str) -> None:
    """Join ``groups`` again: Channels' layers drop a member after ``group_expiry`` (a day) unless it
    rejoins, and a console left running would hear of changes only from its safety polls.

    Never raises: with the layer down (Redis restarting) the caller's safety net must go on.
    """
    try:
        for group in groups:
            await layer.group_add(group, channel)
    except Exception as exc:
        logger.debug("could not rejoin %s: %s", ", ".join(groups), exc)


def record(
    action: str,
    *,
    actor: str,
    actor_user: User | None = None,
    run: Run | None = None,
    request: Request | None = None,
    payload: dict[str, Any] | None = None,
    rows_current: bool = False,
    approvals: Sequence[str] | None = None,
) -> AuditEvent:
    """Append one audit event and publish it once the surrounding transaction commits.

    ``rows_current``: ``run`` and ``request`` hold what this transaction wrote to them (their
    related users loaded too), so the event's frame is built from them at the commit instead
    of read back after it, keeping the database thread free (docs/performance.md).
    ``approvals`` are then the request's approvers, if known.
    """
    event = AuditEvent.objects.create(
        action=action,
        actor=actor,
        actor_user=actor_user,
        run=run,
        request=request,
        payload=payload or {},
    )
    build_frame: FrameBuilder | None
    if rows_current:

        def build_frame() -> dict[str, Any]:
            return publishing().frame_of_rows(event, request, run, approvals)
    else:
        build_frame = None
    transaction.on_commit(lambda: publish(event, build_frame))
    if event.request_id:
        transaction.on_commit(lambda: _tell_webhooks(event))
    if publishing().observers:
        transaction.on_commit(lambda: observe(event))
    return event


def observe(event: AuditEvent) -> None:
    """Tell every observer of a committed event; one that fails is logged and never reaches the committer."""
    for observer in publishing().observers:
        try:
            observer(event)
        except Exception:  # the change is committed; a lost count or log line must not undo the caller's answer
            logger.exception("an observer of event %s failed", event.pk)


def _tell_webhooks(event: AuditEvent) -> None:
    publishing().request_event_committed(event)


def actor_name(user: User | AnonymousUser | None) -> str:
    return user.get_username() if user is not None and user.is_authenticated else "system"


def change_message(event: AuditEvent, build_frame: FrameBuilder | None = None) -> dict[str, Any]:
    """The channel-layer message for a committed event: its number and its frame, built once for every listener."""
    frame = build_frame() if build_frame is not None else publishing().event_frame(event)
    return {"type": "console.changed", "seq": event.pk, "frame": frame}


def publish(event: AuditEvent, build_frame: FrameBuilder | None = None) -> None:
    """Send a committed event to every listener of this console (dashboards and run supervisors)."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        outbox = _outbox_of_calling_loop()
        if outbox is not None:
            outbox.tell_committed(event)
        message = change_message(event, build_frame)
        if outbox is None or not outbox.put(message):
            async_to_sync(layer.group_send)(CONSOLE_GROUP, message)
    except Exception:  # the database already holds the change; listeners catch up by sequence
        logger.exception("could not publish event %s", event.pk)


class Outbox:
    """The committed events of one event loop, sent to the channel layer in commit order by one task.

    The database thread is shared by every run and socket of the process: handing the
    message over instead of waiting for the loop to send it frees that thread at once.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        on_committed: Callable[[AuditEvent], None] | None = None,
    ) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        # The embedded layer takes a message straight from the loop's callback, no task in between.
        self.send_now = getattr(get_channel_layer(), "send_to_group", None)
        # Called on the loop with each event committed under it (its run and request as the transaction left them,
        # when it had them in hand), before its frame is built: this process's own waiters need no frame.
        self.on_committed = on_committed

    def tell_committed(self, event: AuditEvent) -> None:
        if self.on_committed is None:
            return
        try:
            self.loop.call_soon_threadsafe(self.on_committed, event)
        except RuntimeError:  # the loop is closed
            pass

    def put(self, message: dict[str, Any]) -> bool:
        """Queue ``message`` from any thread; False when this loop is gone and cannot take it."""
        try:
            self.loop.call_soon_threadsafe(self._take, message)
        except RuntimeError:  # the loop is closed
            return False
        return True

    def _take(self, message: dict[str, Any]) -> None:
        # Callbacks run in the order they were scheduled: sending from here keeps the commit order.
        if self.send_now is None:  # a layer that sends over the network (Redis): the deliver task awaits it
            self.queue.put_nowait(message)
            return
        try:
            self.send_now(CONSOLE_GROUP, message)
        except Exception:  # a hint lost: listeners catch up by sequence
            logger.exception("could not publish event %s", message["seq"])

    async def deliver(self) -> None:
        layer = get_channel_layer()
        try:
            if layer is None:  # no layer configured: publish() sends nothing
                return
            while True:
                message = await self.queue.get()
                try:
                    await layer.group_send(CONSOLE_GROUP, message)
                except Exception:  # a hint lost: listeners catch up by sequence
                    logger.exception("could not publish event %s", message["seq"])
        finally:
            if _outboxes.get(self.loop) is self:
                del _outboxes[self.loop]


# event loop -> its Outbox, while its deliver task runs
_outboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Outbox] = weakref.WeakKeyDictionary()


def open_outbox(on_committed: Callable[[AuditEvent], None] | None = None) -> Outbox:
    """The running loop's outbox; spawn its ``deliver()`` as a task. Until then, publishing waits on the send."""
    loop = asyncio.get_running_loop()
    outbox = _outboxes[loop] = Outbox(loop, on_committed)
    return outbox


def _outbox_of_calling_loop() -> Outbox | None:
    """The outbox of the loop whose ``sync_to_async`` call this thread is serving, if it has one."""
    loop = getattr(SyncToAsync.threadlocal, "main_event_loop", None)  # what async_to_sync itself uses
    outbox = _outboxes.get(loop) if loop is not None else None
    if outbox is None or loop is None or not loop.is_running():
        return None
    return outbox
