"""API tokens and the policies that say who may answer what."""

from django.conf import settings
from django.db import models
from django.utils import timezone


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

    def __str__(self) -> str:
        return f"token {self.prefix}… of {self.user_id}" + (" (revoked)" if self.revoked_at else "")

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None


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
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="+",
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
    confirm_approval = models.BooleanField(
        default=False,
        help_text="Ask the reviewer once more before approving, by button or by the A key (for example production "
        "deploys).",
    )
    assigned_users = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="+")
    assigned_groups = models.ManyToManyField("auth.Group", blank=True, related_name="+")
    webhook_url = models.URLField(
        max_length=500, blank=True, help_text="Told (JSON POST, Slack-compatible) when a request opens and resolves."
    )
    remind_minutes_before = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Notify the answerers again this many minutes before a request's deadline (empty: no reminder).",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["priority", "id"]
        verbose_name_plural = "policies"
        constraints = [models.CheckConstraint(condition=models.Q(quorum__gte=1), name="policy_quorum_at_least_one")]

    def __str__(self) -> str:
        return self.name
