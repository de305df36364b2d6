"""Approve or decline many requests at once, each through the one door with its own audit event.

A bulk answer names its requests by id, by an inbox filter (``approvals.inbox``: what it
matches at the time of the call), or by both (those ids, each only while the filter still
matches it), at most MAX_REQUESTS a call. Before anything is sent, a dry run says what would
happen, for the reviewer's confirmation: which requests would be answered or recorded (the ids
to send, so that the real call answers exactly those), which tools they are, which would be
skipped and why. Then each request is answered by ``decisions.resolve_request`` on its own: a
request the reviewer may not answer (``policies.refusal``, the verdict each card shows), or
that needs more than a yes (any kind but an approval), is skipped and listed with the reason;
one that closed meanwhile is listed as closed. The dry run and the real run judge alike. A bulk
approval never sends edited arguments: each request is approved as it asked.
"""

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.utils import timezone

from approvals import inbox
from approvals.models import Request
from approvals.review import answers, decisions, quorum
from approvals.review.errors import DecisionError
from approvals.review.quorum import ApprovalRecorded
from approvals.team import policies

MAX_REQUESTS = 500
BODY_KEYS = ("ok", "comment", "ids", "filter", "dry_run")
NO_LONGER_MATCHES = "It does not match the filter any more; it was left as it is."
# What a person does instead of a bulk yes, per kind of request; a kind not listed is answered on its page.
ITS_OWN_ANSWER = {
    "input": "fill in its form",
    "question": "answer its questions",
    "authorization": "sign in at its link, then mark it done",
}


class BulkError(ValueError):
    """A bulk answer this console will not start; ``field`` names what to change."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class BulkAsk:
    """A bulk answer as asked: yes or no, one comment, and the requests by id, by filter or both."""

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
    if comment is not None and len(comment) > decisions.MAX_COMMENT_CHARS:
        limit = decisions.MAX_COMMENT_CHARS
        raise BulkError("comment", f"The comment is {len(comment)} characters long; at most {limit} are allowed.")
    dry_run = body.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise BulkError("dry_run", "'dry_run' is true (only say what would happen) or false.")
    if "ids" not in body and "filter" not in body:
        raise BulkError(
            "ids",
            "Name the requests by 'ids' (a list), by 'filter' (inbox filters), or by both "
            "(the ids a dry run of the filter named, each answered only while the filter still matches it).",
        )
    ids, query = None, None
    if "ids" in body:
        ids = _ids(body["ids"])
    if "filter" in body:
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


def _selected(ask: BulkAsk, viewer: policies.Viewer) -> tuple[list[Request], set[str], list[str]]:
    """The requests named, in order; the ids among them the filter no longer matches (named by
    ids and filter); and the ids named that no request has."""
    if ask.ids is None and ask.query is not None:
        rows = inbox.matching_requests(ask.query, viewer, MAX_REQUESTS + 1)
        if len(rows) > MAX_REQUESTS:
            total = inbox.matching(ask.query, viewer).count()
            raise BulkError(
                "filter",
                f"The filter matches {total} requests; a bulk answer takes at most {MAX_REQUESTS}. "
                "Narrow it (a kind, a tool, a search) and answer them in parts.",
            )
        return rows, set(), []
    ids = list(ask.ids or ())
    found = {row.pk: row for row in inbox.with_users(Request.objects.filter(pk__in=ids))}
    strays: set[str] = set()
    if ask.query is not None:
        still = set(inbox.matching(ask.query, viewer).filter(pk__in=ids).values_list("pk", flat=True))
        strays = set(found) - still
    return [found[pk] for pk in ids if pk in found], strays, [pk for pk in ids if pk not in found]


def _why_skipped(request: Request, facts: policies.PolicyFacts, viewer: policies.Viewer, ask: BulkAsk) -> str | None:
    """Why this bulk answer leaves the open ``request`` alone, or None: the door's judgement, asked
    before anything is sent, so that a dry run and the real run agree.

    A bulk yes approves only approvals, as they asked: any other kind (a form, even one whose
    fields are all optional; a question; an authorization someone must sign in for; a reply
    of some other kind) needs a person's own answer."""
    refused = policies.refusal(facts, viewer, ok=ask.ok)
    if refused is not None:
        return refused.message
    if not ask.ok:
        return None
    if request.kind != "approval":
        what = ITS_OWN_ANSWER.get(request.kind, "answer it there")
        return (
            f"A bulk yes approves only approval requests; this {request.kind} request needs its own answer: "
            f"open it and {what}."
        )
    try:
        data = answers.validated_answer_data(request, data=None, comment=ask.comment)
    except answers.AnswerInvalid as exc:
        return exc.message
    if facts["quorum"] > 1 and facts["approvals"]:
        return quorum.other_values_approved(request, data)
    return None


def _would_only_record(facts: policies.PolicyFacts) -> bool:
    """An approval that leaves the request open: its policy's quorum needs more than this one."""
    return facts["quorum"] > len(facts["approvals"]) + 1


def answer_in_bulk(ask: BulkAsk, *, user: User) -> BulkOutcome:
    """Answer each request ``ask`` names through the one door (nothing, on a dry run), in order.

    Raises BulkError when a filter matches more than MAX_REQUESTS, inbox.QueryError for a filter
    it cannot read."""
    viewer = policies.viewer_of(user)
    rows, strays, unknown = _selected(ask, viewer)
    outcome = BulkOutcome(dry_run=ask.dry_run, matched=len(rows) + len(unknown))
    outcome.skipped += [{"id": pk, "reason": f"There is no request with id {pk!r}."} for pk in unknown]
    now = timezone.now()
    for request in rows:
        facts = policies.facts(request)
        if not request.is_open:
            outcome.closed.append(request.pk)
        elif request.pk in strays:
            outcome.skipped.append({"id": request.pk, "reason": NO_LONGER_MATCHES})
        elif request.expires_at is not None and request.expires_at <= now:
            # Past its deadline: the door expires it on the way (the expiry timer would, a moment later).
            if ask.dry_run:
                outcome.closed.append(request.pk)
            else:
                _answer_one(request, ask, user, outcome)
        elif (reason := _why_skipped(request, facts, viewer, ask)) is not None:
            outcome.skipped.append({"id": request.pk, "reason": reason})
        elif ask.dry_run:
            (outcome.recorded if ask.ok and _would_only_record(facts) else outcome.answered).append(request.pk)
        else:
            _answer_one(request, ask, user, outcome)
    # The tools of what is (or would be) answered or recorded: the confirmation's "Approve N" adds up.
    tool_of = {request.pk: request.tool for request in rows}
    outcome.tools = dict(Counter(tool_of[pk] for pk in outcome.answered + outcome.recorded).most_common())
    return outcome


aanswer_in_bulk = database_sync_to_async(answer_in_bulk)


def _answer_one(request: Request, ask: BulkAsk, user: User, outcome: BulkOutcome) -> None:
    try:
        answer = decisions.resolve_request(
            request.pk, ok=ask.ok, reason=None if ask.ok else "declined", comment=ask.comment, user=user, via="bulk"
        )
    except DecisionError as exc:
        if exc.code == "not_open":
            outcome.closed.append(request.pk)
        else:
            outcome.skipped.append({"id": request.pk, "reason": exc.message})
        return
    (outcome.recorded if isinstance(answer, ApprovalRecorded) else outcome.answered).append(request.pk)
