"""Runs, the §10 requests they raise, the append-only audit trail, and API tokens.

The database is the source of truth: every dashboard can be rebuilt from the first
three tables alone, and the audit trail's ids are the event sequence numbers the
dashboards use to notice a missed notification.
"""
from django.conf import settings
from django.db import models, router, transaction
from django.utils import timezone

from approvals.hotpath import rows
from approvals.models.sealing import seal, seal_many


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


class RunKind(models.TextChoices):
    TOOL = "tool"  # one tool call with its args
    AGENT = "agent"  # a toolnexus agent loop: a model calling the console's tools


class Run(models.Model):
    """One tool call with its args, or one agent loop, executed server-side."""

    kind = models.CharField(max_length=10, choices=RunKind.choices, default=RunKind.TOOL)
    tool = models.CharField(max_length=200, blank=True)
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
    # Agent runs: the user's prompt and the model's name in TOOLNEXUS["MODELS"] (or "scripted").
    agent_prompt = models.TextField(blank=True)
    agent_model = models.CharField(max_length=100, blank=True)
    # Agent runs: the toolnexus message list as it stood when the loop last blocked on a
    # reviewer, so another console process can resume the loop from it (§10 durability).
    agent_messages = models.JSONField(null=True, blank=True)
    # "Retry" on a finished run starts a new run with the same input, linked back here.
    retry_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="retries")

    class Meta:
        indexes = [models.Index(fields=["status"])]
        ordering = ["-id"]

    def __str__(self):
        return f"run {self.pk} {self.label} ({self.status})"

    @property
    def label(self):
        """What the run does, in a few words: its tool, or "agent (model)"."""
        return f"agent ({self.agent_model})" if self.kind == RunKind.AGENT else self.tool

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

    class Meta:
        indexes = [
            models.Index(fields=["status", "created_at"]),
            # The expiry timer's two reads: open requests past their deadline, and the next deadline.
            models.Index(fields=["status", "expires_at"], name="request_status_expires_at"),
            # A dashboard's totals: open requests per kind, and per tool for the policy that governs them.
            models.Index(fields=["status", "kind", "tool"], name="request_status_kind_tool"),
            # GET /api/v1/requests without a status: pages in (created_at, id) order.
            models.Index(fields=["created_at", "id"], name="request_created_at_id"),
        ]
        ordering = ["created_at"]

    def __str__(self):
        return f"{self.kind} request {self.id} ({self.status})"

    @property
    def is_open(self):
        return self.status == RequestStatus.OPEN


class AuditEventQuerySet(models.QuerySet):
    """Audit events are append-only through the ORM too: bulk updates and deletes are refused.

    ``bulk_create`` is allowed (it only appends) and chains each event like ``save``.
    """

    def update(self, **kwargs):
        raise PermissionError("Audit events are append-only: they cannot be updated.")

    def delete(self):
        raise PermissionError("Audit events are append-only: they cannot be deleted.")

    def bulk_update(self, objs, fields, batch_size=None):
        raise PermissionError("Audit events are append-only: they cannot be updated.")

    def bulk_create(self, objs, *args, **kwargs):
        objs = list(objs)
        with transaction.atomic(using=self.db):
            seal_many(objs, using=self.db)
            return super().bulk_create(objs, *args, **kwargs)


class AuditEvent(models.Model):
    """One step in the team's audit trail. Rows are written once and never changed.

    Each event is chained to the one before it: ``hash`` is an HMAC, under a key kept out of
    the database, of the previous event's hash and this event's own fields (``approvals.audit.chain``),
    so an edited or deleted row is found by ``manage.py verify_audit``.
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
        # Repeated failed logins or refused API tokens locked an account or a client address (approvals/team/lockout.py).
        AUTH_LOCKED_OUT = "auth.locked_out"

    actor = models.CharField(max_length=150, help_text="A username, or 'system' / 'tool:<name>'.")
    # PROTECT, not SET_NULL: nulling it would rewrite a sealed row. Deactivate users who leave.
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    action = models.CharField(max_length=40, choices=Action.choices)
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.PROTECT, related_name="events")
    request = models.ForeignKey(
        Request, null=True, blank=True, on_delete=models.PROTECT, related_name="events"
    )
    payload = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # Copied from the run or request when recorded, so the audit page filters without joins.
    tool = models.CharField(max_length=200, blank=True)
    kind = models.CharField(max_length=100, blank=True)
    # The hash chain (HMAC-SHA256, hex): the previous event's hash ("" for the first) and this one's,
    # under the key CONSOLE_AUDIT_KEYS holds for key_version.
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
        using = kwargs.get("using") or router.db_for_write(type(self), instance=self)
        # One transaction (BEGIN IMMEDIATE on SQLite): read the newest hash, then insert after it.
        # Keep its savepoint (why: docs/performance.md).
        with transaction.atomic(using=using):
            seal(self, using=using)
            if args or set(kwargs) - {"force_insert", "using"}:
                super().save(*args, **kwargs)
            else:  # every state change writes one
                rows.insert_or_save(self, lambda: super(AuditEvent, self).save(*args, **kwargs), using=using)

    def delete(self, *args, **kwargs):
        raise PermissionError("Audit events are append-only: an event cannot be deleted.")



# The events that take a request from open to resolved: what a waiting tool or host wakes on.
RESOLVING_ACTIONS = frozenset({
    AuditEvent.Action.REQUEST_ANSWERED,
    AuditEvent.Action.REQUEST_DECLINED,
    AuditEvent.Action.REQUEST_CANCELLED,
    AuditEvent.Action.REQUEST_EXPIRED,
})


class ApiToken(models.Model):
    """A bearer token for the API, belonging to a user (a service account is just a user).

    Only the sha256 of the secret is stored: the secret is shown once, when issued.
    The short ``prefix`` is not secret; it tells tokens apart on the tokens page.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16)
    digest = models.CharField(max_length=64, unique=True, help_text="sha256 of the secret, hex.")
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"token {self.prefix}… of {self.user_id}" + (" (revoked)" if self.revoked_at else "")

    @property
    def is_revoked(self):
        return self.revoked_at is not None


class TranscriptEntry(models.Model):
    """One step of a run's transcript, written as it happens: the run page replays these.

    ``seq`` counts from 1 within the run. Each entry is also announced as a
    ``run.transcript`` audit event, so the run page receives it live over the socket.
    """

    class Kind(models.TextChoices):
        PROMPT = "prompt"  # the user's prompt (text)
        THINKING = "thinking"  # the model was asked for its next turn
        ASSISTANT = "assistant"  # the model's reply: text and/or tool calls (data.tool_calls)
        TOOL_RESULT = "tool_result"  # a tool call's result (text = output)
        PENDING = "pending"  # a tool suspended (§10): request = the Request it opened
        ASKED = "asked"  # someone inside a running call asked (an MCP elicitation)
        WAITING = "waiting"  # the loop blocked on a reviewer's answer to request
        ANSWER = "answer"  # the answer arrived (data = the wire Answer)
        RESUMED = "resumed"  # a console process picked the run up after a restart
        STOPPED = "stopped"  # the run ended early: data.reason, text = where it stopped
        FINISHED = "finished"  # the loop ended: text = the model's final text

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="transcript")
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=20, choices=Kind.choices)
    turn = models.PositiveIntegerField(null=True, blank=True)
    text = models.TextField(blank=True)
    call_id = models.CharField(max_length=200, blank=True)
    tool = models.CharField(max_length=200, blank=True)
    args = models.JSONField(null=True, blank=True)
    is_error = models.BooleanField(null=True, blank=True)
    request = models.ForeignKey(Request, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    data = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="transcript_entry_seq_unique")]

    def __str__(self):
        return f"run {self.run_id} #{self.seq} {self.kind}"


class Policy(models.Model):
    """Who may answer which requests, and how many must agree (edited in the Django admin).

    A policy matches a request by tool-name pattern (fnmatch, e.g. ``refund*``) and/or
    kind; empty means any. The matching policy with the lowest priority number wins;
    when none matches, TOOLNEXUS["POLICIES"] in settings is tried, then the built-in
    default (anyone logged in, one approval, the run's starter included). The rules are
    applied in ``approvals.team.policies``.
    """

    name = models.CharField(max_length=100, unique=True)
    enabled = models.BooleanField(default=True)
    priority = models.IntegerField(default=100, help_text="Lower numbers are checked first.")
    tool_pattern = models.CharField(
        max_length=200, blank=True, help_text="fnmatch pattern on the tool name, e.g. refund* (empty: any tool)."
    )
    kind = models.CharField(max_length=100, blank=True, help_text="Request kind, e.g. approval (empty: any kind).")
    allowed_users = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="+",
        help_text="Who may answer. With no users and no groups, anyone logged in may.",
    )
    allowed_groups = models.ManyToManyField("auth.Group", blank=True, related_name="+")
    quorum = models.PositiveSmallIntegerField(
        default=1, help_text="How many different reviewers must approve; any decline declines at once."
    )
    starter_may_answer = models.BooleanField(
        default=True,
        help_text="May whoever started the run (or opened the request) answer it? Untick for four-eyes: someone "
                  "else must. Declining or cancelling their own is always allowed.",
    )
    assigned_users = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="+")
    assigned_groups = models.ManyToManyField("auth.Group", blank=True, related_name="+")
    webhook_url = models.URLField(
        max_length=500, blank=True, help_text="Told (JSON POST, Slack-compatible) when a request opens and resolves."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["priority", "id"]
        verbose_name_plural = "policies"
        constraints = [models.CheckConstraint(condition=models.Q(quorum__gte=1), name="policy_quorum_at_least_one")]

    def __str__(self):
        return self.name


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

    def __str__(self):
        return f"approval of {self.request_id} by {self.user_id}"


class ConsoleProcess(models.Model):
    """A console process that is alive: it writes ``last_beat`` every HEARTBEAT_SECONDS.

    Runs name their process in ``Run.owner``; a run whose owner has no row here, or
    a row silent for HEARTBEAT_TIMEOUT_SECONDS, belongs to a dead process and a live
    one takes it over (approvals/runs/processes.py).
    """

    id = models.CharField(primary_key=True, max_length=100)
    hostname = models.CharField(max_length=200)
    pid = models.IntegerField()
    started_at = models.DateTimeField(default=timezone.now)
    last_beat = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["started_at"]
        verbose_name_plural = "console processes"

    def __str__(self):
        return self.id
