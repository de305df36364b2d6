"""An agent run's transcript: what it said and did, as it happened."""

from django.db import models
from django.utils import timezone

from approvals.models.requests import Request
from approvals.models.runs import Run


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

    def __str__(self) -> str:
        return f"run {self.run_id} #{self.seq} {self.kind}"
