"""What became of a resolved request, in the words a person reads everywhere: cards, the run page,
the transcript, the audit page and its export ("Declined by bob: too large", "Expired at 18:31").

The tool's own result keeps the §10 wording (``declined/expired: <prompt>``); these words go beside it.
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.utils import timezone

from approvals.models import AuditEvent, RequestStatus

APPROVED, ANSWERED, DECLINED, CANCELLED, EXPIRED = "approved", "answered", "declined", "cancelled", "expired"
OUTCOMES = (APPROVED, ANSWERED, DECLINED, CANCELLED, EXPIRED)
# Who a decision is credited to when no person made it: the expiry timer, a stopping process, a script.
THE_CONSOLE = "the console"
# A comment longer than this is cut in the one-line text; the decision's "comment" keeps it whole.
TEXT_COMMENT_CHARS = 120

_OUTCOME_OF_STATUS: dict[str, str] = {
    RequestStatus.DECLINED: DECLINED,
    RequestStatus.CANCELLED: CANCELLED,
    RequestStatus.EXPIRED: EXPIRED,
}
_OUTCOME_OF_ACTION: dict[str, str] = {
    AuditEvent.Action.REQUEST_DECLINED: DECLINED,
    AuditEvent.Action.REQUEST_CANCELLED: CANCELLED,
    AuditEvent.Action.REQUEST_EXPIRED: EXPIRED,
}
_VERB = {APPROVED: "Approved", ANSWERED: "Answered", DECLINED: "Declined", CANCELLED: "Cancelled"}


def outcome_of_status(status: str, kind: str) -> str | None:
    """The outcome of a request in ``status`` (None while open): an answered approval is "approved"."""
    if status == RequestStatus.ANSWERED:
        return APPROVED if kind == "approval" else ANSWERED
    return _OUTCOME_OF_STATUS.get(status)


def outcome_of_action(action: str, kind: str) -> str | None:
    """The outcome an audit event records (None for an event that resolves nothing)."""
    if action == AuditEvent.Action.REQUEST_ANSWERED:
        return APPROVED if kind == "approval" else ANSWERED
    return _OUTCOME_OF_ACTION.get(action)


def _names(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _one_line(comment: str | None) -> str:
    flat = " ".join(str(comment or "").split())
    return flat if len(flat) <= TEXT_COMMENT_CHARS else flat[: TEXT_COMMENT_CHARS - 1].rstrip() + "…"


def decision_text(
    outcome: str,
    *,
    by: str | None = None,
    at: datetime | None = None,
    comment: str | None = "",
    approvers: Sequence[str] = (),
) -> str:
    """The decision in one line: "Approved by alice", "Answered by alice", "Declined by bob: too large",
    "Cancelled by demo", "Expired at 18:31".

    ``by`` None credits the console itself. ``approvers``: everyone whose approval made up a quorum
    ("Approved by alice and bob"). A refusal (declined, cancelled) carries its comment, cut to one
    line; an expiry says when, in the console's time zone (``TIME_ZONE``), as ``HH:MM``.
    """
    if outcome == EXPIRED:
        return f"Expired at {timezone.localtime(at):%H:%M}" if at is not None else "Expired"
    who = _names(approvers) if outcome == APPROVED and len(approvers) > 1 else (by or THE_CONSOLE)
    text = f"{_VERB[outcome]} by {who}"
    if outcome in (DECLINED, CANCELLED) and _one_line(comment):
        text += f": {_one_line(comment)}"
    return text


def decision(
    outcome: str,
    *,
    by: str | None,
    at: datetime | None,
    at_wire: str | None,
    comment: str | None = "",
    approvers: Sequence[str] = (),
) -> dict[str, Any]:
    """The contract's "decision" object: outcome, by (a username or None), at (ISO 8601), comment, text."""
    return {
        "outcome": outcome,
        "by": by,
        "at": at_wire,
        "comment": comment or "",
        "text": decision_text(outcome, by=by, at=at, comment=comment, approvers=approvers),
    }
