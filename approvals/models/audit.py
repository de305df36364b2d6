"""The append-only audit trail: every state change, with its own MAC as it is inserted, chained after its commit."""

from collections.abc import Collection, Iterable
from typing import Any, NoReturn, TypeVar

from django.conf import settings
from django.db import models, router, transaction
from django.utils import timezone

from approvals.hotpath import rows
from approvals.models import sealing
from approvals.models.requests import Request
from approvals.models.runs import Run

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

    def seal_pending(self, limit: int = 5000) -> int:
        """Chain the committed events that are not yet chained, oldest id first, after the newest chained one
        (when ``archive_audit`` left none: after the newest checkpoint's head); how many were chained. One
        transaction under the sealing lock (``models.sealing``): BEGIN, (the advisory lock on PostgreSQL),
        the head, the pending events, one UPDATE, COMMIT.

        Raises ``sealing.Unsealable`` (after chaining those before it) at an event whose own MAC fails.
        """
        table = self.model._meta.db_table
        with transaction.atomic(using=self.db):
            sealing.lock_for_sealing(self.db)
            pending = list(
                self.model._default_manager.using(self.db).filter(position__isnull=True).order_by("id")[:limit]
            )
            if not pending:
                return 0
            head = (
                self.model._default_manager.using(self.db)
                .filter(position__isnull=False)
                .order_by("-position")
                .values_list("position", "hash")
                .first()
            )
            if head is None:  # an empty trail, or every chained event archived: on from the archive's head
                head = (
                    AuditCheckpoint.objects.using(self.db)
                    .order_by("-id")
                    .values_list("last_event", "head_hash")
                    .first()
                )
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
    prev_hash = models.CharField(max_length=64, blank=True)
    hash = models.CharField(max_length=64)
    key_version = models.PositiveSmallIntegerField()

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"checkpoint #{self.pk}: events #{self.first_event}–#{self.last_event} in {self.archive_name}"

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
