"""Runs and the console processes that own them."""

import os
import socket
import uuid
from typing import Any

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


class RunKind(models.TextChoices):
    TOOL = "tool"  # one tool call with its args
    AGENT = "agent"  # a toolnexus agent loop: a model calling the console's tools


class Run(models.Model):
    """One tool call with its args, or one agent loop, executed server-side."""

    kind = models.CharField(max_length=10, choices=RunKind.choices, default=RunKind.TOOL)
    tool = models.CharField(max_length=200, blank=True)
    args = models.JSONField(default=dict, blank=True)
    timeout = models.FloatField(null=True, blank=True, help_text="Seconds; empty means unset.")
    # Issue 35: False (human-aware time, the default for new runs) counts only the tool's and the model's own
    # time against ``timeout``; True is the wall clock, the wait for a person included (runs from before it).
    timeout_counts_waiting = models.BooleanField(default=False)
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

    def __str__(self) -> str:
        return f"run {self.pk} {self.label} ({self.status})"

    @property
    def label(self) -> str:
        """What the run does, in a few words: its tool, or "agent (model)"."""
        return f"agent ({self.agent_model})" if self.kind == RunKind.AGENT else self.tool

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_RUN_STATUSES

    def result_wire(self) -> dict[str, Any] | None:
        if self.result_output is None:
            return None
        return {"output": self.result_output, "is_error": bool(self.result_is_error)}


# This console process's id: the owner its runs carry and the key of its ConsoleProcess row. Defined beside
# the table so that a run's state changes (models/run_state.py) can tell a run of this process from another's.
THIS_PROCESS_ID = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


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

    def __str__(self) -> str:
        return self.id
