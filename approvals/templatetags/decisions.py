"""``{{ value|shown }}``: an edited argument's value as a person reads it, the same as the diff panel
before approving and the decision's words after (approvals.review.outcomes.shown, console/verdict.js
``shownValue``): numbers bare, text as it is, yes/no, a list comma-joined, "(empty)"."""

from typing import Any

from django import template

from approvals.review import outcomes

register = template.Library()


@register.filter
def shown(value: Any) -> str:
    return outcomes.shown(value)
