"""Run state changes: created, running, finished, interrupted. Each writes its audit event."""
from channels.db import database_sync_to_async
from django.db import transaction
from django.utils import timezone

from . import events
from .models import ACTIVE_RUN_STATUSES, AuditEvent, Request, RequestStatus, Run, RunStatus


class RunInputError(ValueError):
    """A run that cannot be started as asked; the message says what to change."""


def validate_run_input(tool, args, timeout, known_tools):
    if not isinstance(tool, str) or not tool:
        raise RunInputError("Choose a tool: 'tool' must be a tool name.")
    if tool not in known_tools:
        raise RunInputError(f"Unknown tool {tool!r}. Known tools: {', '.join(sorted(known_tools)) or 'none'}.")
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise RunInputError("'args' must be a JSON object, e.g. {\"service\": \"web\"}.")
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise RunInputError("'timeout' must be a number of seconds, or left out.")
        if timeout <= 0:
            raise RunInputError("'timeout' must be more than 0 seconds.")
    return tool, args, float(timeout) if timeout is not None else None


def create_run(*, tool, args, timeout, user, owner):
    """A run starts executing as soon as it is created (its task is spawned with it), so it is born running."""
    with transaction.atomic():
        run = Run.objects.create(
            status=RunStatus.RUNNING,
            tool=tool,
            args=args,
            timeout=timeout,
            started_by=user if user is not None and user.is_authenticated else None,
            owner=owner,
        )
        events.record(
            AuditEvent.Action.RUN_STARTED,
            actor=events.actor_name(user),
            actor_user=run.started_by,
            run=run,
            payload={"tool": tool, "args": args, "timeout": timeout},
        )
    return run


def finish_run(run_id, status, output, is_error):
    with transaction.atomic():
        changed = Run.objects.filter(pk=run_id, status__in=ACTIVE_RUN_STATUSES).update(
            status=status, result_output=output, result_is_error=is_error, finished_at=timezone.now()
        )
        if not changed:
            return False
        run = Run.objects.get(pk=run_id)
        events.record(
            AuditEvent.Action.RUN_FINISHED,
            actor=f"tool:{run.tool}",
            run=run,
            payload={"status": status, "output": output, "is_error": is_error},
        )
    return True


def cancel_is_requested(run_id):
    return Run.objects.filter(pk=run_id, cancel_requested=True).exists()


def interrupt_orphaned_runs(current_owner):
    """Mark runs that a stopped process left active as interrupted, and withdraw their open requests."""
    from .decisions import DecisionError, resolve_request

    orphans = list(Run.objects.filter(status__in=ACTIVE_RUN_STATUSES).exclude(owner=current_owner))
    for run in orphans:
        for request in Request.objects.filter(run=run, status=RequestStatus.OPEN):
            try:
                resolve_request(
                    request.pk, ok=False, reason="cancelled", actor="system",
                    comment="The console stopped while this request waited.",
                )
            except DecisionError:
                pass
        with transaction.atomic():
            changed = Run.objects.filter(pk=run.pk, status__in=ACTIVE_RUN_STATUSES).update(
                status=RunStatus.INTERRUPTED, finished_at=timezone.now()
            )
            if changed:
                events.record(
                    AuditEvent.Action.RUN_INTERRUPTED,
                    actor="system",
                    run=run,
                    payload={"previous_owner": run.owner, "previous_status": run.status},
                )
    return len(orphans)


acreate_run = database_sync_to_async(create_run)
afinish_run = database_sync_to_async(finish_run)
acancel_is_requested = database_sync_to_async(cancel_is_requested)
ainterrupt_orphaned_runs = database_sync_to_async(interrupt_orphaned_runs)
