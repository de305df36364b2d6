"""A moment as people read it, the one way every page, message and decision writes a time: in UTC, as short
as still unambiguous ("20:14 UTC" today, "4 Dec 20:14 UTC" this year, "4 Dec 2025 20:14 UTC" before), never
AM/PM, never without its zone. The scripts write it the same way (static/approvals/console/dom.js
``readableTime``); pages keep the exact instant beside it, in a ``<time datetime>`` (templatetags/times.py)."""

from datetime import UTC, datetime

from django.utils import timezone


def readable_time(moment: datetime, now: datetime | None = None) -> str:
    """``moment`` in UTC, as short as still unambiguous next to ``now`` (default: the present)."""
    moment = moment.astimezone(UTC)
    today = (now or timezone.now()).astimezone(UTC).date()
    clock = f"{moment:%H:%M} UTC"
    if moment.date() == today:
        return clock
    year = "" if moment.year == today.year else f" {moment.year}"
    return f"{moment.day} {moment:%b}{year} {clock}"


def iso_time(moment: datetime | None, *, timespec: str = "auto") -> str | None:
    """A moment as the wire shows it: ISO 8601, UTC as ``Z`` (``expiresAt``, ``created_at`` and the like).

    The audit chain hashes its own fixed-precision form instead (``models.sealing.canonical_time``)."""
    return moment.isoformat(timespec=timespec).replace("+00:00", "Z") if moment else None
