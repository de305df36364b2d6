"""API tokens and the policies that say who may answer what."""

import re

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
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


class OnTimeout(models.TextChoices):
    """What the console does when a request's deadline passes and nobody answered (review/decisions.expire_request).

    Listed from the strictest to the most lenient: a request's own ``data.on_timeout`` may only move its
    policy's choice towards the first (``stricter``).
    """

    DECLINE = "decline", "Decline (silence is not consent)"
    KEEP_OPEN = "keep_open", "Keep it open and answerable"
    ESCALATE = "escalate", "Escalate to the fallback answerers"
    APPLY_DEFAULTS = "apply_defaults", "Approve with the request's defaults"


ON_TIMEOUT_ORDER: tuple[str, ...] = tuple(OnTimeout.values)
ESCALATION_STEP_MINUTES = 60  # how far each escalation moves the deadline, unless the policy says otherwise
MAX_ESCALATIONS = 2  # escalations before the request declines, unless the policy says otherwise


def stricter(policy_choice: str, asked: object) -> str:
    """The outcome on expiry: the policy's, or the request's own ``data.on_timeout`` when that is stricter
    (decline < keep_open < escalate < apply_defaults). Anything else the request asks is ignored."""
    if not isinstance(asked, str) or asked not in ON_TIMEOUT_ORDER or policy_choice not in ON_TIMEOUT_ORDER:
        return policy_choice if policy_choice in ON_TIMEOUT_ORDER else OnTimeout.DECLINE
    return min(policy_choice, asked, key=ON_TIMEOUT_ORDER.index)


def defaults_refusal(on_timeout: str, quorum: int, starter_may_answer: bool) -> str | None:
    """Why a policy may not approve with defaults on expiry (None when it may): a quorum or four-eyes asks
    for people, and a timeout is nobody."""
    if on_timeout != OnTimeout.APPLY_DEFAULTS:
        return None
    if quorum > 1:
        return (
            f"A policy with a quorum of {quorum} may not approve with defaults on expiry: the timeout would stand "
            "in for reviewers. Choose decline, keep_open or escalate, or set the quorum to 1."
        )
    if not starter_may_answer:
        return (
            "A four-eyes policy (starter_may_answer off) may not approve with defaults on expiry: nobody else "
            "would have looked. Choose decline, keep_open or escalate, or allow the starter to answer."
        )
    return None


# A reject option (issue 36): a named reason a reviewer may pick when declining, and what the model reads.
REJECT_OPTION_KEY = re.compile(r"[a-z0-9_-]{1,40}")
MAX_REJECT_OPTIONS = 20
MAX_REJECT_LABEL_CHARS = 80
MAX_REJECT_TEXT_CHARS = 500


def reject_options_refusal(value: object) -> str | None:
    """Why ``value`` is not a list of reject options (None when it is): each ``{"key", "label", "text"}``, the key
    1-40 characters of a-z 0-9 _ -, unique; the label what a reviewer reads on the button (at most 80 characters);
    the text what the model reads (at most 500)."""
    if not isinstance(value, list):
        return 'reject_options must be a list such as [{"key": "too_large", "label": "Too large", "text": "..."}].'
    if len(value) > MAX_REJECT_OPTIONS:
        return f"reject_options has {len(value)} options; at most {MAX_REJECT_OPTIONS} are allowed."
    seen: set[str] = set()
    for index, option in enumerate(value):
        where = f"reject_options[{index}]"
        if not isinstance(option, dict) or set(option) - {"key", "label", "text"}:
            return f"{where} must be an object with the keys key, label and text, and no others."
        key, label, text = option.get("key"), option.get("label"), option.get("text", "")
        if not isinstance(key, str) or not REJECT_OPTION_KEY.fullmatch(key):
            return f"{where}.key must be 1-40 characters of a-z, 0-9, _ and -; got {key!r}."
        if key in seen:
            return f"{where}.key {key!r} is used twice; each option needs its own key."
        seen.add(key)
        if not isinstance(label, str) or not label.strip() or len(label) > MAX_REJECT_LABEL_CHARS:
            return f"{where}.label must be text a reviewer reads, 1-{MAX_REJECT_LABEL_CHARS} characters."
        if not isinstance(text, str) or len(text) > MAX_REJECT_TEXT_CHARS:
            return f"{where}.text must be text the model reads, at most {MAX_REJECT_TEXT_CHARS} characters."
    return None


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
    on_timeout = models.CharField(
        max_length=20,
        choices=OnTimeout.choices,
        default=OnTimeout.DECLINE,
        help_text="What happens when a request's deadline passes and nobody answered. A request may ask for a "
        "stricter outcome, never a more lenient one.",
    )
    fallback_users = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="+",
        help_text="Escalate: who may also answer once the deadline passes (they are notified).",
    )
    fallback_groups = models.ManyToManyField("auth.Group", blank=True, related_name="+")
    escalation_step_minutes = models.PositiveIntegerField(
        default=ESCALATION_STEP_MINUTES,
        validators=[MinValueValidator(1)],
        help_text="Escalate: how many minutes each escalation moves the deadline on.",
    )
    max_escalations = models.PositiveSmallIntegerField(
        default=MAX_ESCALATIONS, help_text="Escalate: how many times before the request declines."
    )
    remind_minutes_before = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Notify the answerers again this many minutes before a request's deadline (empty: no reminder).",
    )
    reject_options = models.JSONField(
        default=list,
        blank=True,
        help_text='Reasons a reviewer may pick when declining, each {"key": "too_large", "label": "Too large", '
        '"text": "what the model reads"}; a request\'s own data.reject_options come first.',
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["priority", "id"]
        verbose_name_plural = "policies"
        constraints = [models.CheckConstraint(condition=models.Q(quorum__gte=1), name="policy_quorum_at_least_one")]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        refused = defaults_refusal(self.on_timeout, self.quorum or 1, self.starter_may_answer)
        if refused:
            raise ValidationError({"on_timeout": refused})
        options_refused = reject_options_refusal(self.reject_options if self.reject_options is not None else [])
        if options_refused:
            raise ValidationError({"reject_options": options_refused})
