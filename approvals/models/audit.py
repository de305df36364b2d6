"""The append-only audit trail: every state change, with its own MAC as it is inserted, chained after its commit."""

import logging
from collections.abc import Collection, Iterable
from datetime import datetime
from typing import Any, NoReturn, TypeVar

from django.conf import settings
from django.db import models, router, transaction
from django.utils import timezone

from approvals.hotpath import rows
from approvals.models import sealing
from approvals.models.requests import Request
from approvals.models.runs import Run

logger = logging.getLogger(__name__)

# The events a queryset holds: django-stubs make a custom queryset generic in its model (as_manager()).
_Event = TypeVar("_Event", bound="AuditEvent")


class AuditEventQuerySet(models.QuerySet[_Event]):
    """Audit events are append-only through the ORM too: bulk updates and deletes are refused.

    ``bulk_create`` is allowed (it only appends) and stamps each event like ``save``; ``seal_pending``
    chains what has committed.
    """

    def update(self, **kwargs: Any) -> NoReturn:
        raise PermissionError("Audit events are append-only: they cannot be updated.")

    def delete(self) -> NoReturn:
        raise PermissionError("Audit events are append-only: they cannot be deleted.")

    def bulk_update(self, objs: Iterable[Any], fields: Iterable[str], batch_size: int | None = None) -> NoReturn:
        raise PermissionError("Audit events are append-only: they cannot be updated.")

    def bulk_create(
        self,
        objs: Iterable[_Event],
        batch_size: int | None = None,
        ignore_conflicts: bool = False,
        update_conflicts: bool = False,
        update_fields: Collection[str] | None = None,
        unique_fields: Collection[str] | None = None,
    ) -> list[_Event]:
        events = list(objs)
        for event in events:
            sealing.stamp(event)
        created = super().bulk_create(
            events,
            batch_size=batch_size,
            ignore_conflicts=ignore_conflicts,
            update_conflicts=update_conflicts,
            update_fields=update_fields,
            unique_fields=unique_fields,
        )
        if sealing.listening():
            transaction.on_commit(sealing.appended, using=self.db)
        return created

    def seal_pending(self, limit: int = 5000, reported: set[int] | None = None) -> int:
        """Chain the committed events that are not yet chained, oldest id first, after the newest chained one
        (when ``archive_audit`` left none: after the newest checkpoint's head); how many were chained. One
        transaction under the sealing lock (``models.sealing``): BEGIN, (the advisory lock on PostgreSQL),
        the newest checkpoint, the pending events, the head, one UPDATE, COMMIT.

        An event created at or before the newest checkpoint's ``replay_bound`` is never chained: it is an
        archived row put back (its nonce and MAC are genuine, and unique only among the rows left). It is
        logged as an error (unless its id is in ``reported``, to which the ids logged are added) and left
        unchained, where ``verify_audit`` names it; the others are chained.
        Raises ``sealing.Unsealable`` (after chaining those before it) at an event whose own MAC fails.
        """
        table = self.model._meta.db_table
        with transaction.atomic(using=self.db):
            sealing.lock_for_sealing(self.db)
            checkpoint = AuditCheckpoint.objects.using(self.db).order_by("-id").first()
            unchained = self.model._default_manager.using(self.db).filter(position__isnull=True)
            bound = checkpoint.replay_bound if checkpoint is not None else None
            if bound is not None:
                replayed = list(unchained.filter(created_at__lte=bound).values_list("id", flat=True)[:20])
                if reported is not None:
                    replayed = [pk for pk in replayed if pk not in reported]
                    reported.update(replayed)
                if replayed:
                    logger.error(
                        "audit event(s) id %s not chained: created at or before %s, the newest event archived "
                        "(checkpoint #%s), so each is an archived event put back; verify_audit names it",
                        ", ".join(map(str, replayed)),
                        sealing.canonical_time(bound),
                        checkpoint.pk if checkpoint is not None else None,
                    )
                unchained = unchained.filter(created_at__gt=bound)
            pending = list(unchained.order_by("id")[:limit])
            if not pending:
                return 0
            head = (
                self.model._default_manager.using(self.db)
                .filter(position__isnull=False)
                .order_by("-position")
                .values_list("position", "hash")
                .first()
            )
            if head is None and checkpoint is not None:  # every chained event archived: on from the archive's head
                head = (checkpoint.last_event, checkpoint.head_hash)
            head_position, head_hash = head if head is not None else (0, sealing.GENESIS)
            links, problem = sealing.link(pending, head_position or 0, head_hash)
            sealing.write_links(table, links, self.db)
        if problem is not None:
            raise sealing.Unsealable(f"{len(links)} audit event(s) chained, then stopped: {problem}.")
        return len(links)


class AuditEvent(models.Model):
    """One step in the team's audit trail. Rows are written once and never changed.

    Each event carries its own MAC (``nonce``, ``mac``) from its INSERT on, and is chained after its
    commit: ``position`` is its place in the one order of the trail, ``hash`` an HMAC, under a key kept
    out of the database, of the previous event's hash and this event's own fields (``models.sealing``,
    ``approvals.audit.chain``), so an edited or deleted row is found by ``manage.py verify_audit``.
    """

    class Action(models.TextChoices):
        RUN_STARTED = "run.started"
        RUN_CANCEL_REQUESTED = "run.cancel_requested"
        # Someone tried to cancel a run they may not cancel (runs.request_cancel_run says who may).
        RUN_CANCEL_REFUSED = "run.cancel_refused"
        RUN_FINISHED = "run.finished"
        RUN_INTERRUPTED = "run.interrupted"
        RUN_ADOPTED = "run.adopted"
        RUN_TRANSCRIPT = "run.transcript"
        REQUEST_OPENED = "request.opened"
        REQUEST_ANSWERED = "request.answered"
        REQUEST_DECLINED = "request.declined"
        REQUEST_CANCELLED = "request.cancelled"
        REQUEST_EXPIRED = "request.expired"
        REQUEST_CREDENTIALS_REFUSED = "request.credentials_refused"
        # A reviewer's approval counted towards a policy's quorum; the request stays open.
        REQUEST_APPROVAL_RECORDED = "request.approval_recorded"
        # Someone tried to answer a request a policy does not let them answer.
        REQUEST_ANSWER_REFUSED = "request.answer_refused"
        # A reviewer took an open request ("bob is on it"), let it go, or handed it to a user or group.
        REQUEST_CLAIMED = "request.claimed"
        REQUEST_RELEASED = "request.released"
        REQUEST_HANDED = "request.handed"
        # A request's deadline passed and its policy escalated it to fallback answerers, or kept it open
        # (review/decisions.expire_request); neither resolves it.
        REQUEST_ESCALATED = "request.escalated"
        REQUEST_KEPT_OPEN = "request.kept_open"
        # Someone who may answer moved an open request's deadline later; its policy reminded its answerers.
        REQUEST_EXTENDED = "request.extended"
        REQUEST_REMINDED = "request.reminded"
        # An approved request's tool began to run again, and how it ended (the console's runs, or a remote host's
        # report): review/execution.py. A tool run's end is on its ``run.finished`` event instead (one event fewer).
        REQUEST_EXECUTING = "request.executing"
        REQUEST_EXECUTED = "request.executed"
        # Repeated failed logins or refused API tokens locked an account or a client address (approvals/team/lockout.py).
        AUTH_LOCKED_OUT = "auth.locked_out"
        # Older events moved to an archive file (approvals/audit/archive.py); its checkpoint carries the head.
        AUDIT_ARCHIVED = "audit.archived"

    actor = models.CharField(max_length=150, help_text="A username, or 'system' / 'tool:<name>'.")
    # PROTECT, not SET_NULL: nulling it would rewrite a sealed row. Deactivate users who leave.
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    action = models.CharField(max_length=40, choices=Action.choices)
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.PROTECT, related_name="events")
    request = models.ForeignKey(Request, null=True, blank=True, on_delete=models.PROTECT, related_name="events")
    payload = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # Copied from the run or request when recorded, so the audit page filters without joins.
    tool = models.CharField(max_length=200, blank=True)
    kind = models.CharField(max_length=100, blank=True)
    # The hash chain (HMAC-SHA256, hex): the previous event's hash ("" for the first) and this one's,
    # under the key CONSOLE_AUDIT_KEYS holds for key_version. Empty, with no position, until sealed.
    position = models.PositiveBigIntegerField(null=True, blank=True, unique=True)
    # The event's own HMAC from its INSERT on, over a random nonce and its fields (models.sealing.compute_mac).
    nonce = models.CharField(max_length=32, null=True, blank=True, unique=True)
    mac = models.CharField(max_length=64, blank=True)
    prev_hash = models.CharField(max_length=64, blank=True)
    hash = models.CharField(max_length=64, blank=True)
    key_version = models.PositiveSmallIntegerField(default=0)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        # The audit page pages by id (keyset); each filter has an index ending in id.
        indexes = [
            models.Index(fields=["actor", "id"], name="audit_actor_id"),
            models.Index(fields=["action", "id"], name="audit_action_id"),
            models.Index(fields=["tool", "id"], name="audit_tool_id"),
            models.Index(fields=["kind", "id"], name="audit_kind_id"),
            models.Index(fields=["created_at"], name="audit_created_at"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.action} by {self.actor}"

    @property
    def subject(self) -> str:
        if self.request_id:
            return f"request {self.request_id}"
        return f"run {self.run_id}" if self.run_id else ""

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None and not self._state.adding:
            raise PermissionError("Audit events are append-only: an event cannot be changed.")
        # Only ever INSERT: an instance built with an existing id must not UPDATE that row.
        kwargs["force_insert"] = True
        using = kwargs.get("using") or router.db_for_write(type(self), instance=self)
        # One statement, the INSERT, in the caller's transaction: no lock, no read (docs/design.md, "The audit
        # trail"). Its chain links come after the commit, from the sealer.
        sealing.stamp(self)
        if args or set(kwargs) - {"force_insert", "using"}:
            super().save(*args, **kwargs)
        else:  # every state change writes one
            rows.insert_or_save(self, lambda: super(AuditEvent, self).save(*args, **kwargs), using=using)
        if sealing.listening():
            transaction.on_commit(sealing.appended, using=using)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise PermissionError("Audit events are append-only: an event cannot be deleted.")


class AuditCheckpoint(models.Model):
    """Where the trail in the database begins after ``manage.py archive_audit`` moved older events out.

    The events at positions #first_event–#last_event (``AuditEvent.position``: the chain's order, the
    id too for events written before migration 0017) went to the archive file ``archive_name`` (its
    sha256 is ``archive_sha256``); ``head_hash`` and ``head_key_version`` are #last_event's, so the first
    event left links to it and the sealer chains on after it. Checkpoints are sealed like events
    (approvals/audit/archive.py): an HMAC under ``CONSOLE_AUDIT_KEYS`` over their fields and the previous
    checkpoint's hash.
    """

    first_event = models.PositiveBigIntegerField()
    last_event = models.PositiveBigIntegerField(unique=True)
    head_hash = models.CharField(max_length=64)
    head_key_version = models.PositiveSmallIntegerField()
    archive_name = models.CharField(max_length=255)
    archive_sha256 = models.CharField(max_length=64)
    archived_by = models.CharField(max_length=150)
    created_at = models.DateTimeField(default=timezone.now)
    # The newest created_at of every event archived up to this checkpoint: an event not chained yet that was
    # created at or before it is a replay of an archived row (``sealing.replay_bound``). Null on checkpoints
    # written before migration 0018, whose own created_at stands in (it is later than every event they took).
    archived_created_at = models.DateTimeField(null=True, blank=True)
    prev_hash = models.CharField(max_length=64, blank=True)
    hash = models.CharField(max_length=64)
    key_version = models.PositiveSmallIntegerField()

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"checkpoint #{self.pk}: events #{self.first_event}–#{self.last_event} in {self.archive_name}"

    @property
    def replay_bound(self) -> datetime:
        """An event still waiting to be chained that was created at or before this is an archived row put back:
        ``archive_events`` chains what is pending in its transaction, so only an event whose transaction stayed
        open across the archive could be genuine (docs/design.md, "Archived events put back")."""
        return self.archived_created_at or self.created_at

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise PermissionError("Audit checkpoints are append-only: a checkpoint cannot be deleted.")


# The events that take a request from open to resolved: what a waiting tool or host wakes on.
RESOLVING_ACTIONS = frozenset(
    {
        AuditEvent.Action.REQUEST_ANSWERED,
        AuditEvent.Action.REQUEST_DECLINED,
        AuditEvent.Action.REQUEST_CANCELLED,
        AuditEvent.Action.REQUEST_EXPIRED,
    }
)
