"""``{{ value|shown }}``: an edited argument's value as a person reads it, the same as the diff panel
before approving and the decision's words after (approvals.review.outcomes.shown, console/verdict.js
``shownValue``): numbers bare, text as it is, yes/no, a list comma-joined, "(empty)"."""

from typing import Any

from django import template

from approvals.review import execution, outcomes

register = template.Library()


@register.filter
def shown(value: Any) -> str:
    return outcomes.shown(value)


@register.filter
def executed(view: Any) -> str:
    """``{{ request.execution|executed }}``: what became of an approved call's tool, in words (review/execution.py)."""
    return execution.execution_text(view)


@register.filter
def executed_state(view: Any) -> str:
    """``executed`` without the tool's message: for a page that shows the message whole below it."""
    return execution.execution_text(view, with_message=False)
