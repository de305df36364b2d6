"""Answer many open requests at once: approve or decline a selection, or all that match an inbox query.

Each request still goes through the one door (decisions.resolve_request) with its own audit
event; this module only chooses which, and sorts the outcomes into answered, skipped (with the
reason a person can act on) and already closed. A dry run answers nothing and says what would
be answered, for the confirmation a reviewer sees first.
"""

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async
from django.contrib.auth.models import User

from approvals.models import Request, RequestStatus
from approvals.review import decisions
from approvals.review.errors import DecisionError
from approvals.review.quorum import ApprovalRecorded

MAX_BULK = 500


@dataclass
class BulkResult:
    matched: int
    tools: dict[str, int]
    answered: list[str] = field(default_factory=list)
    recorded: list[str] = field(default_factory=list)  # approvals counted towards a quorum; still open
    skipped: list[dict[str, str]] = field(default_factory=list)
    closed: list[str] = field(default_factory=list)
    dry_run: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "matched": self.matched,
            "tools": self.tools,
            "answered": self.answered,
            "recorded": self.recorded,
            "skipped": self.skipped,
            "closed": self.closed,
            "dry_run": self.dry_run,
        }


def too_many(count: int) -> DecisionError:
    return DecisionError(
        "invalid",
        f"{count} requests match; a bulk answer takes at most {MAX_BULK}. Narrow the filter and answer in parts.",
    )


def answer_many(request_ids: list[str], *, ok: bool, comment: str, user: User, dry_run: bool = False) -> BulkResult:
    """Approve (``ok``) or decline every request of ``request_ids`` as ``user``, one by one through the door.

    An approval sends no data: each request keeps the arguments its tool asked with. A request that needs
    data to be answered (an input, a question) is skipped with the door's reason.
    """
    if len(request_ids) > MAX_BULK:
        raise too_many(len(request_ids))
    unique = list(dict.fromkeys(request_ids))
    found = dict(Request.objects.filter(pk__in=unique).values_list("pk", "tool"))
    result = BulkResult(matched=len(found), tools=dict(Counter(tool or "(no tool)" for tool in found.values())))
    result.dry_run = dry_run
    for request_id in unique:
        if request_id not in found:
            result.skipped.append({"id": request_id, "reason": f"There is no request with id {request_id!r}."})
    if dry_run:
        open_ids = set(
            Request.objects.filter(pk__in=list(found), status=RequestStatus.OPEN).values_list("pk", flat=True)
        )
        result.closed = [pk for pk in found if pk not in open_ids]
        return result
    for request_id in (pk for pk in unique if pk in found):
        try:
            outcome = decisions.resolve_request(
                request_id, ok=ok, reason=None if ok else "declined", comment=comment, user=user
            )
        except DecisionError as refused:
            if refused.code == "not_open":
                result.closed.append(request_id)
            else:
                result.skipped.append({"id": request_id, "reason": refused.message})
            continue
        if isinstance(outcome, ApprovalRecorded):
            result.recorded.append(request_id)
        else:
            result.answered.append(request_id)
    return result


aanswer_many = database_sync_to_async(answer_many)
