"""Record audit events and tell listeners that something changed.

Each state change writes its AuditEvent in the same transaction; the event's id is
the sequence number. Only after the commit does the channel layer hear of it, and
what it carries is a hint: a listener that sees a gap in the numbers re-reads the
database, so a dropped message costs a query, never a lost answer.
"""
import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from .models import AuditEvent

logger = logging.getLogger(__name__)

CONSOLE_GROUP = "console"


def record(action, *, actor, actor_user=None, run=None, request=None, payload=None):
    """Append one audit event and publish it once the surrounding transaction commits."""
    event = AuditEvent.objects.create(
        action=action,
        actor=actor,
        actor_user=actor_user,
        run=run,
        request=request,
        payload=payload or {},
    )
    transaction.on_commit(lambda: publish(event))
    if event.request_id:
        transaction.on_commit(lambda: _tell_webhooks(event))
    return event


def _tell_webhooks(event):
    from . import webhooks  # policies' webhooks hear of requests opening and resolving, off the run's path

    webhooks.event_committed(event)


def actor_name(user):
    return user.get_username() if user is not None and user.is_authenticated else "system"


def change_message(event):
    """The channel-layer message for a committed event: its number and its frame, built once for every listener."""
    from .selectors import event_frame

    return {"type": "console.changed", "seq": event.pk, "frame": event_frame(event)}


def publish(event):
    """Send a committed event to every listener of this console (dashboards and run supervisors)."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(CONSOLE_GROUP, change_message(event))
    except Exception:  # the database already holds the change; listeners catch up by sequence
        logger.exception("could not publish event %s", event.pk)
