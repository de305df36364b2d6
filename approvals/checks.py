"""System checks (``manage.py check``, and every ``migrate`` that ``make run`` does): settings read lazily are
checked when the console starts, not when the first request needs them."""

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured

from approvals.team import policies


@register(Tags.security)
def policy_settings(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[CheckMessage]:
    """``TOOLNEXUS["POLICIES"]`` must parse; an approvals policy that does not say whether its starter may
    answer is named, since four-eyes became opt-in (a starter may now approve their own)."""
    try:
        policies.settings_rules()
    except ImproperlyConfigured as error:
        return [Error(str(error), id="approvals.E001")]
    found: list[CheckMessage] = []
    for index, entry in enumerate(settings.TOOLNEXUS.get("POLICIES") or []):
        if entry.get("kind", "") in ("", "approval") and "starter_may_answer" not in entry:
            name = entry.get("name") or f"settings #{index + 1}"
            found.append(
                Warning(
                    f'Policy "{name}" (TOOLNEXUS["POLICIES"][{index}]) applies to approvals and does not set '
                    "starter_may_answer: a run's starter may approve their own under it.",
                    hint='Set "starter_may_answer": false to keep four-eyes, or true to say you mean it.',
                    id="approvals.W001",
                )
            )
    return found
