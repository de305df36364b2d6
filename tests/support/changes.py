"""Changes as another console process commits them, with the channel layer's notice lost."""

from asgiref.sync import sync_to_async
from django.db import transaction

from approvals.models import AuditEvent


@sync_to_async
def recorded_without_notice(update, fields, *, action, run=None, request_id=None, payload=None):
    """Apply ``update(**fields)`` and store its audit event in one transaction, as every writer in the
    console does, but publish nothing: the notice is lost, only the database knows."""
    with transaction.atomic():
        update(**fields)
        AuditEvent.objects.create(
            action=action, actor="another-process", run=run, request_id=request_id, payload=payload or {}
        )
