"""``{{ moment|when }}``: a moment as a person reads it (approvals.moments ``readable_time``, the same as the
scripts' ``readableTime``): "16:32 UTC" today, "4 Dec 16:32 UTC" this year, "4 Dec 2025 16:32 UTC" before;
the exact ISO 8601 stays in the ``<time>`` element's datetime and title."""

from datetime import UTC, datetime

from django import template
from django.utils.html import format_html

from approvals.moments import iso_time, readable_time

register = template.Library()


def _moment(value: object) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return None
    return None


@register.filter
def when(value: object, css_class: str = "") -> str:
    """A ``<time>`` element (of class ``css_class``, if given) for a datetime or an ISO 8601 string;
    "—" for none, the text itself when unreadable."""
    moment = _moment(value)
    if moment is None:
        return format_html("{}", value) if value else "—"
    exact = iso_time(moment.astimezone(UTC))
    attrs = format_html(' class="{}"', css_class) if css_class else ""
    return format_html('<time{} datetime="{}" title="{}">{}</time>', attrs, exact, exact, readable_time(moment))
