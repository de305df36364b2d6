"""The §10 requests runs and hosts raise, and the approvals a quorum collects."""

from typing import Literal

from django.conf import settings
from django.db import models
from django.utils import timezone

from approvals.models.runs import Run


class RequestStatus(models.TextChoices):
    OPEN = "open"
    ANSWERED = "answered"
    DECLINED = "declined"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


class DecidedBy(models.TextChoices):
    """Who decided a request, in one vocabulary everywhere (the audit payload, the API, the pages, the metrics).
    A rule, a grant or a model may join later."""

    PERSON = "person"
    TIMEOUT = "timeout"
    CONSOLE = "console"  # the console's own act: a run's cancel carried out, a stopping process


class ExecutionState(models.TextChoices):
    """What became of the tool an ok answer lets run again (``Request.execution_state``)."""

    EXECUTING = "executing"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


# Why an Answer is not ok (toolnexus' ``Answer.reason``), as ``Request.answer_reason`` stores it.
AnswerReason = Literal["declined", "cancelled", "expired"]


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
    # How far answerers have moved the deadline so far (review/deadlines.py): the cap holds across clicks and processes.
    extended_seconds = models.PositiveIntegerField(default=0)
    # The deadline its policy's reminder was sent for: one reminder per deadline, however many timers look.
    reminded_for_deadline = models.DateTimeField(null=True, blank=True)
    tool = models.CharField(max_length=200, blank=True)
    args = models.JSONField(default=dict, blank=True)
    # The argument names in the order a reviewer reads them: the tool's schema order, then any others as sent.
    # Kept apart because PostgreSQL's jsonb does not keep an object's key order.
    arg_order = models.JSONField(default=list, blank=True)
    # The tool's input schema, kept so an approval's editable args get proper fields.
    tool_input_schema = models.JSONField(null=True, blank=True)
    # Set for requests a remote host opened through the API: which program asked (for
    # display), and the user whose token it used (the host socket delivers to them).
    host = models.CharField(max_length=200, blank=True)
    opened_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # True when a tool already returned this suspension (§10 pending): the tool is not
    # running, so after a console restart answering it still resumes the run (the loop
    # rule's retry with ctx.answer). False when it was asked from inside a running call
    # (an MCP elicitation, a tool calling console_wait_for): only that live call can take it.
    resumable = models.BooleanField(default=False)
    # The console process that went on with the run after the answer. Claimed by a
    # conditional update, so however many processes wake up, one resumes the run.
    resumed_by = models.CharField(max_length=100, blank=True)

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
    # "bob is on it": the reviewer working on this open request, so others pick another (review/claims.py).
    claimed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    claimed_at = models.DateTimeField(null=True, blank=True)
    # Handed to a user ("alice") or a group ("group:ops"): it shows as assigned to them.
    handed_to = models.CharField(max_length=160, blank=True)
    # How many times its deadline passed and its policy escalated it (``on_timeout: escalate``): from 1 on, the
    # policy's fallback answerers may answer it too (team/policies.facts).
    escalations = models.PositiveSmallIntegerField(default=0)
    # Who decided it (DecidedBy), written by the one door with the decision; blank on rows decided before it was
    # kept (read as ``decided_by_of`` derives it).
    decided_by = models.CharField(max_length=20, blank=True)
    # What became of the tool after an ok answer (review/execution.py): null until the console marks it "executing"
    # (once: a conditional update from null, so no approval runs its tool twice), then "succeeded" or "failed" with
    # the tool's output cut to EXECUTION_MESSAGE_CHARS; a remote host reports its own (POST .../outcome).
    execution_state = models.CharField(max_length=20, null=True, blank=True)
    execution_message = models.TextField(blank=True)
    execution_at = models.DateTimeField(null=True, blank=True)
    # The digest of the call it guards (``console_remote.call_digest`` of ``tool`` and ``args``), written when it
    # opens; an answer made for another digest is refused (a stale page, a replay). Blank on rows opened before.
    call_digest = models.CharField(max_length=71, blank=True)
    # The console's signature on its Answer (approvals/signing/answers.py), written with the answer in one UPDATE;
    # served as the Answer's top-level ``signature`` key. Null while open and on rows resolved before it was kept.
    answer_signature = models.JSONField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["status", "created_at"]),
            # The expiry timer's two reads (open requests past their deadline, and the next deadline), and the
            # inbox's pages by deadline: in the order they are listed, so a page reads only its own rows.
            models.Index(fields=["status", "expires_at", "created_at", "id"], name="request_status_deadline"),
            # The inbox's filters by tool and by host, in the list's order.
            models.Index(fields=["status", "tool", "created_at"], name="request_status_tool"),
            models.Index(fields=["status", "host", "created_at"], name="request_status_host"),
            # A dashboard's totals: open requests per kind, and per tool for the policy that governs them; with the
            # id, they and "I may answer" (which leaves out the ids the viewer approved) count from the index alone.
            models.Index(fields=["status", "kind", "tool", "id"], name="request_status_kind_tool_id"),
            # GET /api/v1/requests without a status: pages in (created_at, id) order.
            models.Index(fields=["created_at", "id"], name="request_created_at_id"),
        ]
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"{self.kind} request {self.id} ({self.status})"

    @property
    def is_open(self) -> bool:
        return self.status == RequestStatus.OPEN

    @property
    def decided_by_of(self) -> str | None:
        """Who decided it (DecidedBy), None while open; a row decided before the column was kept: an expiry was
        the timeout, an answer with a user a person, anything else the console."""
        if self.is_open:
            return None
        if self.decided_by:
            return self.decided_by
        if self.status == RequestStatus.EXPIRED:
            return DecidedBy.TIMEOUT
        return DecidedBy.PERSON if self.answered_by_id is not None else DecidedBy.CONSOLE


class RequestApproval(models.Model):
    """One reviewer's approval of an open request, counted towards its policy's quorum."""

    request = models.ForeignKey(Request, on_delete=models.PROTECT, related_name="approvals")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    data = models.JSONField(null=True, blank=True)
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["request", "user"], name="one_approval_per_reviewer")]

    def __str__(self) -> str:
        return f"approval of {self.request_id} by {self.user_id}"
