"""Approve or decline many requests at once, each through the one door with its own audit event.

A bulk answer names its requests by id or by an inbox filter (``approvals.inbox``), at most
MAX_REQUESTS a call. Before anything is sent, a dry run says what would happen, for the
reviewer's confirmation: how many, which tools, which would be skipped and why. Then each
request is answered by ``decisions.resolve_request`` on its own: a request the reviewer may
not answer (``policies.refusal``, the verdict each card shows) or that needs more than a yes
(an input form, a question) is skipped and listed with the reason; one that closed meanwhile
is listed as closed. A bulk approval never sends edited arguments: each request is approved
as it asked.
"""

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.utils import timezone

from approvals import inbox
from approvals.models import Request
from approvals.review import answers, decisions
from approvals.review.errors import DecisionError
from approvals.review.quorum import ApprovalRecorded
from approvals.team import policies

MAX_REQUESTS = 500
BODY_KEYS = ("ok", "comment", "ids", "filter", "dry_run")


class BulkError(ValueError):
    """A bulk answer this console will not start; ``field`` names what to change."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class BulkAsk:
    """A bulk answer as asked: yes or no, one comment, and the requests by id or by filter."""

    ok: bool
    comment: str = ""
    ids: tuple[str, ...] | None = None
    query: inbox.InboxQuery | None = None
    dry_run: bool = False


def bulk_ask(body: dict[str, Any]) -> BulkAsk:
    """The bulk answer a JSON body asks for (``POST /api/v1/requests/bulk``); raises BulkError or
    inbox.QueryError naming the field at fault."""
    unknown = sorted(set(body) - set(BODY_KEYS))
    if unknown:
        extra = " A bulk answer sends no data: each request is approved as it asked." if "data" in unknown else ""
        raise BulkError(unknown[0], f"Unknown field(s) {', '.join(unknown)}; send {', '.join(BODY_KEYS)}.{extra}")
    if not isinstance(body.get("ok"), bool):
        raise BulkError("ok", "'ok' is required: true to approve every request, false to decline them.")
    comment = body.get("comment")
    if comment is not None and not isinstance(comment, str):
        raise BulkError("comment", "'comment' must be text.")
    dry_run = body.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise BulkError("dry_run", "'dry_run' is true (only say what would happen) or false.")
    if ("ids" in body) == ("filter" in body):
        raise BulkError("ids", "Name the requests either by 'ids' (a list) or by 'filter' (inbox filters), not both.")
    ids, query = None, None
    if "ids" in body:
        ids = _ids(body["ids"])
    else:
        if not isinstance(body["filter"], dict):
            raise BulkError("filter", '\'filter\' must be an object of inbox filters, e.g. {"tool": "refund"}.')
        query = inbox.InboxQuery.from_params(body["filter"], prefix="filter.", only_filters=True)
    return BulkAsk(ok=body["ok"], comment=comment or "", ids=ids, query=query, dry_run=dry_run)


def _ids(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(item, str) and item for item in value):
        raise BulkError("ids", "'ids' must be a list of request ids (text), at least one.")
    if len(value) > MAX_REQUESTS:
        raise BulkError("ids", f"At most {MAX_REQUESTS} requests at once; 'ids' lists {len(value)}.")
    return tuple(dict.fromkeys(value))


@dataclass
class BulkOutcome:
    """What a bulk answer did (or, on a dry run, would do) to each request it named."""

    dry_run: bool
    matched: int = 0
    tools: dict[str, int] = field(default_factory=dict)
    answered: list[str] = field(default_factory=list)
    # Approvals counted towards a quorum: the request stays open for more reviewers.
    recorded: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    closed: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "matched": self.matched,
            "tools": self.tools,
            "answered": self.answered,
            "recorded": self.recorded,
            "skipped": self.skipped,
            "closed": self.closed,
        }


def _selected(ask: BulkAsk, viewer: policies.Viewer) -> tuple[list[Request], list[str]]:
    """The requests named, in order, and the ids named that no request has."""
    if ask.query is not None:
        rows = inbox.matching_requests(ask.query, viewer, MAX_REQUESTS + 1)
        if len(rows) > MAX_REQUESTS:
            total = inbox.matching(ask.query, viewer).count()
            raise BulkError(
                "filter",
                f"The filter matches {total} requests; a bulk answer takes at most {MAX_REQUESTS}. "
                "Narrow it (a kind, a tool, a search) and answer them in parts.",
            )
        return rows, []
    ids = list(ask.ids or ())
    found = {row.pk: row for row in inbox.with_users(Request.objects.filter(pk__in=ids))}
    return [found[pk] for pk in ids if pk in found], [pk for pk in ids if pk not in found]


def _needs_more_than_a_yes(request: Request, comment: str) -> str | None:
    """Why approving ``request`` as it asked is not a whole answer (a form to fill, questions), or None."""
    try:
        answers.validated_answer_data(request, data=None, comment=comment)
    except answers.AnswerInvalid as exc:
        fields = "; ".join(f"{name}: {' '.join(errors)}" for name, errors in exc.field_errors.items())
        return f"It needs its own answer, not a bulk yes: {fields or exc.message} Answer it on its own."
    return None


def _would_only_record(facts: policies.PolicyFacts) -> bool:
    """An approval that leaves the request open: its policy's quorum needs more than this one."""
    return facts["quorum"] > len(facts["approvals"]) + 1


def answer_in_bulk(ask: BulkAsk, *, user: User) -> BulkOutcome:
    """Answer each request ``ask`` names through the one door (nothing, on a dry run), in order.

    Raises BulkError when a filter matches more than MAX_REQUESTS, inbox.QueryError for a filter
    it cannot read."""
    viewer = policies.viewer_of(user)
    rows, unknown = _selected(ask, viewer)
    outcome = BulkOutcome(dry_run=ask.dry_run, matched=len(rows) + len(unknown))
    outcome.tools = dict(Counter(row.tool for row in rows).most_common())
    outcome.skipped += [{"id": pk, "reason": f"There is no request with id {pk!r}."} for pk in unknown]
    now = timezone.now()
    for request in rows:
        facts = policies.facts(request)
        verdict = policies.refusal(facts, viewer, ok=ask.ok)
        if not request.is_open:
            outcome.closed.append(request.pk)
        elif request.expires_at is not None and request.expires_at <= now:
            # Past its deadline: the door expires it on the way (the expiry timer would, a moment later).
            if ask.dry_run:
                outcome.closed.append(request.pk)
            else:
                _answer_one(request, ask, user, outcome)
        elif verdict is not None:
            outcome.skipped.append({"id": request.pk, "reason": verdict.message})
        elif ask.ok and (problem := _needs_more_than_a_yes(request, ask.comment)):
            outcome.skipped.append({"id": request.pk, "reason": problem})
        elif ask.dry_run:
            (outcome.recorded if ask.ok and _would_only_record(facts) else outcome.answered).append(request.pk)
        else:
            _answer_one(request, ask, user, outcome)
    return outcome


aanswer_in_bulk = database_sync_to_async(answer_in_bulk)


def _answer_one(request: Request, ask: BulkAsk, user: User, outcome: BulkOutcome) -> None:
    try:
        answer = decisions.resolve_request(
            request.pk, ok=ask.ok, reason=None if ask.ok else "declined", comment=ask.comment, user=user
        )
    except DecisionError as exc:
        if exc.code == "not_open":
            outcome.closed.append(request.pk)
        else:
            outcome.skipped.append({"id": request.pk, "reason": exc.message})
        return
    (outcome.recorded if isinstance(answer, ApprovalRecorded) else outcome.answered).append(request.pk)
