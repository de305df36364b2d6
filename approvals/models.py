"""Runs, the §10 requests they raise, and the append-only audit trail.

The database is the source of truth: every dashboard can be rebuilt from these
three tables alone, and the audit trail's ids are the event sequence numbers the
dashboards use to notice a missed notification.
"""
from django.conf import settings
from django.db import models
from django.utils import timezone


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"
    INTERRUPTED = "interrupted"


ACTIVE_RUN_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING)


class Run(models.Model):
    """One tool call with its args, executed server-side."""

    tool = models.CharField(max_length=200)
    args = models.JSONField(default=dict, blank=True)
    timeout = models.FloatField(null=True, blank=True, help_text="Seconds; empty means unset.")
    status = models.CharField(max_length=20, choices=RunStatus.choices, default=RunStatus.QUEUED)
    result_output = models.TextField(null=True, blank=True)
    result_is_error = models.BooleanField(null=True, blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Which console process executes the run (its tasks live in that process only).
    owner = models.CharField(max_length=100, blank=True)
    cancel_requested = models.BooleanField(default=False)
    cancel_requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status"])]
        ordering = ["-id"]

    def __str__(self):
        return f"run {self.pk} {self.tool} ({self.status})"

    @property
    def is_active(self):
        return self.status in ACTIVE_RUN_STATUSES

    def result_wire(self):
        if self.result_output is None:
            return None
        return {"output": self.result_output, "is_error": bool(self.result_is_error)}


class RequestStatus(models.TextChoices):
    OPEN = "open"
    ANSWERED = "answered"
    DECLINED = "declined"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


class Request(models.Model):
    """A §10 suspension waiting for (or resolved by) a human.

    The wire fields keep the tool's own values: ``id`` is the Request id the tool
    (or toolnexus' ``pending``) chose, and ``expires_at_wire`` is ``expiresAt``
    exactly as sent.
    """

    id = models.CharField(primary_key=True, max_length=200)
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.CASCADE, related_name="requests")
    kind = models.CharField(max_length=100)
    prompt = models.TextField()
    url = models.TextField(null=True, blank=True)
    data = models.JSONField(null=True, blank=True)
    expires_at_wire = models.CharField(max_length=64, null=True, blank=True)
    # expiresAt parsed, so the expiry timer can ask the database what is due.
    expires_at = models.DateTimeField(null=True, blank=True, db_index=True)
    tool = models.CharField(max_length=200, blank=True)
    args = models.JSONField(default=dict, blank=True)
    # The tool's input schema, kept so an approval's editable args get proper fields.
    tool_input_schema = models.JSONField(null=True, blank=True)

    status = models.CharField(max_length=20, choices=RequestStatus.choices, default=RequestStatus.OPEN)
    answer_ok = models.BooleanField(null=True, blank=True)
    answer_data = models.JSONField(null=True, blank=True)
    answer_reason = models.CharField(max_length=20, null=True, blank=True)
    comment = models.TextField(blank=True)
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    answered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["status", "created_at"])]
        ordering = ["created_at"]

    def __str__(self):
        return f"{self.kind} request {self.id} ({self.status})"

    @property
    def is_open(self):
        return self.status == RequestStatus.OPEN


class AuditEvent(models.Model):
    """One step in the team's audit trail. Rows are written once and never changed."""

    class Action(models.TextChoices):
        RUN_STARTED = "run.started"
        RUN_CANCEL_REQUESTED = "run.cancel_requested"
        RUN_FINISHED = "run.finished"
        RUN_INTERRUPTED = "run.interrupted"
        REQUEST_OPENED = "request.opened"
        REQUEST_ANSWERED = "request.answered"
        REQUEST_DECLINED = "request.declined"
        REQUEST_CANCELLED = "request.cancelled"
        REQUEST_EXPIRED = "request.expired"
        REQUEST_CREDENTIALS_REFUSED = "request.credentials_refused"

    actor = models.CharField(max_length=150, help_text="A username, or 'system' / 'tool:<name>'.")
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    action = models.CharField(max_length=40, choices=Action.choices)
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.PROTECT, related_name="events")
    request = models.ForeignKey(
        Request, null=True, blank=True, on_delete=models.PROTECT, related_name="events"
    )
    payload = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]

    def __str__(self):
        return f"#{self.pk} {self.action} by {self.actor}"

    @property
    def subject(self):
        if self.request_id:
            return f"request {self.request_id}"
        return f"run {self.run_id}" if self.run_id else ""

    def save(self, *args, **kwargs):
        if self.pk is not None and not self._state.adding:
            raise PermissionError("Audit events are append-only: an event cannot be changed.")
        # Only ever INSERT: an instance built with an existing id must not UPDATE that row.
        kwargs["force_insert"] = True
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise PermissionError("Audit events are append-only: an event cannot be deleted.")

