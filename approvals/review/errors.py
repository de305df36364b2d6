"""How the one door refuses: a DecisionError, worded for the person who asked, with a code an entry
point turns into an HTTP status or an error frame."""

from dataclasses import dataclass, field
from typing import Any

from approvals.models import DecidedBy, Request, RequestStatus
from approvals.moments import readable_time


@dataclass
class DecisionError(Exception):
    """A refused decision, worded for the person who asked for it."""

    code: str  # not_found | not_open | invalid | conflict | forbidden
    message: str
    field_errors: dict[str, list[str]] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.message

    @property
    def http_status(self) -> int:
        return {"not_found": 404, "not_open": 409, "invalid": 400, "conflict": 409, "forbidden": 403}[self.code]

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error": self.code, "message": self.message}
        if self.field_errors:
            body["field_errors"] = self.field_errors
        return body


def refusal_for_closed(request: Request) -> DecisionError:
    """The refusal for answering a request that is no longer open: who closed it, how and when."""
    if request.status == RequestStatus.EXPIRED:
        when = readable_time(request.answered_at) if request.answered_at else "its deadline"
        return DecisionError("not_open", f"This request expired at {when}; it can no longer be answered.")
    when = readable_time(request.answered_at) if request.answered_at else "earlier"
    if request.decided_by == DecidedBy.TIMEOUT:  # an answer decided by the timeout: its policy applied the defaults
        return DecisionError(
            "not_open", f"This request was approved with its defaults when it expired at {when}, nobody answered."
        )
    who = request.answered_by.get_username() if request.answered_by is not None else "the console"
    verbs: dict[str, str] = {
        RequestStatus.ANSWERED: "answered",
        RequestStatus.DECLINED: "declined",
        RequestStatus.CANCELLED: "cancelled",
    }
    verb = verbs.get(request.status, request.status)
    return DecisionError("not_open", f"This request was already {verb} by {who} at {when}.")
