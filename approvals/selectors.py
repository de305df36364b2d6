"""The queries pages, frames and runs share: a request's and a run's rows, the open requests' totals,
the audit trail's sequence number, a stored answer. Each ``a*`` async twin sits beside its function.

What these rows look like on the wire is ``shapes.py``'s; the pages and socket frames built from them
are ``frames.py``'s.
"""

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import Count, Min
from django.utils import timezone
from toolnexus import Answer

from approvals import keyset
from approvals.hotpath import rows
from approvals.models import ACTIVE_RUN_STATUSES, AuditEvent, Request, RequestStatus, Run
from approvals.team import policies
from approvals.telemetry import metrics

# Load the users a request view names in the same query.
# (run__started_by: the policy facts name who started the run, for four-eyes.)
REQUEST_USERS = ("answered_by", "opened_by", "claimed_by", "run__started_by")

# The dashboard's order, oldest first; ``id`` breaks ties, so the order (and a page's cursor) is total.
REQUEST_ORDER = ("created_at", "id")
REQUEST_CURSOR = (datetime, str)
RUN_CURSOR = (int,)
# GET /api/v1/requests: rows per page unless ``limit`` says otherwise, and the most ``limit`` may ask.
API_PAGE_ROWS = 100
API_MAX_PAGE_ROWS = 500


# Where a run object carries the open requests its writer's transaction established (hold_open_requests).
_HELD_OPEN_REQUESTS = "_open_requests_as_written"


def hold_open_requests(run: Run, requests: Sequence[Request]) -> None:
    """Note on ``run`` (a row as a transaction just wrote it) which of its requests that transaction left open,
    when the write itself established it (an answer's resume changes the run only if none is open): the
    frame built at the commit then reads nothing to know them."""
    setattr(run, _HELD_OPEN_REQUESTS, list(requests))


def open_requests_of(run: Run, in_hand: Request | None = None) -> list[Request]:
    """The run's open requests, oldest first, each with ``run`` as its run.

    ``in_hand``: a request of the run as just written; when it is the only open one
    (a run's frame as its suspension opens) it is used as it is, not read again.
    A run row its writer marked with ``hold_open_requests`` gives those, not read again.
    """
    held = getattr(run, _HELD_OPEN_REQUESTS, None)
    if held is not None:
        return list(held)
    # On every frame of an active run, on the suspension's path: plain SQL (rows.py) for the ids first.
    ids = rows.pks(Request, {"run": run.pk, "status": RequestStatus.OPEN}, order_by="created_at")
    if not ids:
        return []
    if in_hand is not None and ids == [in_hand.pk]:
        return [in_hand]
    requests = list(Request.objects.filter(pk__in=ids).select_related("opened_by").order_by("created_at"))
    for request in requests:
        request.run = run
    return requests


def latest_request(run: Run) -> Request | None:
    return run.requests.select_related(*REQUEST_USERS).order_by("-created_at").first()


@dataclass
class Page:
    """One keyset page: its rows' views, and the cursor of the page after it (None on the last page)."""

    items: list[dict[str, Any]]
    next: str | None


def request_cursor(request: Request) -> str:
    return keyset.encode_cursor((request.created_at, request.id))


def open_requests_by_run(runs: Iterable[Run]) -> dict[int, list[Request]]:
    """{run id: its open requests, oldest first, each with its run attached}, in one read for all of ``runs``."""
    by_id = {run.pk: run for run in runs}
    by_run: dict[int, list[Request]] = {}
    if not by_id:
        return by_run
    waiting = Request.objects.filter(run_id__in=list(by_id), status=RequestStatus.OPEN).select_related("opened_by")
    for request in waiting.order_by("created_at", "id"):
        run_id = cast(int, request.run_id)  # filtered on run_id__in
        request.run = by_id[run_id]
        by_run.setdefault(run_id, []).append(request)
    return by_run


def open_request_counts(viewer: policies.Viewer | None = None) -> dict[str, Any]:
    """The open requests' totals: ``requests`` (all), ``kinds`` (per kind) and ``for_me``.

    ``for_me`` is how many ``viewer`` may answer, by the same verdict (policies.refusal)
    each card shows; None without a viewer. A few indexed reads, none of which loads a
    request's row: the open requests grouped by kind and tool (a covering index; each
    pair's policy decides for all of its requests), then the ids of the few the viewer
    started or already approved, which a policy may keep them from answering.
    """
    pairs = Request.objects.filter(status=RequestStatus.OPEN).values("kind", "tool").annotate(n=Count("pk")).order_by()
    kinds: dict[str, int] = {}
    total, for_me = 0, 0
    for pair in pairs:
        kinds[pair["kind"]] = kinds.get(pair["kind"], 0) + pair["n"]
        total += pair["n"]
        if viewer is not None:
            rule = policies.rule_for(pair["tool"], pair["kind"])
            if policies.may_be_among(rule.users, rule.groups, viewer):
                for_me += pair["n"]
    if viewer is not None:
        for_me -= len(open_requests_kept_from(viewer))
    return {"requests": total, "kinds": dict(sorted(kinds.items())), "for_me": for_me if viewer is not None else None}


def open_requests_kept_from(viewer: policies.Viewer) -> set[str]:
    """The ids of the open requests ``viewer`` is allowed by their policy's users and groups, yet may not
    answer because they started it (four-eyes) or already approved it (a quorum)."""
    name = get_user_model().USERNAME_FIELD
    open_rows = Request.objects.filter(status=RequestStatus.OPEN).order_by()
    # Whoever set a request going (policies.starter_of): its run's starter, or for a run-less one whoever opened it.
    started = {
        row[0]: row
        for rows in (
            open_rows.filter(**{f"run__started_by__{name}": viewer.username}),
            open_rows.filter(run__isnull=True, **{f"opened_by__{name}": viewer.username}),
        )
        for row in rows.values_list("pk", "tool", "kind")
    }
    approved = {
        row[0]: row
        for row in open_rows.filter(**{f"approvals__user__{name}": viewer.username}).values_list("pk", "tool", "kind")
    }
    kept: set[str] = set()
    for pk, tool, kind in {**started, **approved}.values():
        rule = policies.rule_for(tool, kind)
        if not policies.may_be_among(rule.users, rule.groups, viewer):
            continue  # not counted for this viewer in the first place
        facts: policies.PolicyFacts = {
            "name": rule.name,
            "source": rule.source,
            "users": sorted(rule.users),
            "groups": sorted(rule.groups),
            "quorum": rule.quorum,
            "starter": viewer.username if pk in started else None,
            "started": "run",
            "starter_may_answer": rule.starter_may_answer,
            "confirm_approval": rule.confirm_approval,
            "assignees": [],
            "handed_to": None,
            "reject_options": [],
            "approvals": [viewer.username] if pk in approved else [],
        }
        if policies.refusal(facts, viewer) is not None:
            kept.add(pk)
    return kept


def database_gauges() -> metrics.DatabaseTotals:
    """What a metrics scrape reads (telemetry.metrics.DatabaseGauges): the open requests grouped by kind and
    tool, each pair under its policy, with when the oldest was opened; and the active runs by status. Two
    grouped reads of what is waiting or running, each on an index (``request_status_kind_tool``, the runs'
    ``status``): what finished is never read, so a scrape costs the same however long the history."""
    pairs = (
        Request.objects.filter(status=RequestStatus.OPEN)
        .values("kind", "tool")
        .annotate(n=Count("pk"), oldest=Min("created_at"))
        .order_by()
    )
    groups = [
        metrics.OpenRequests(
            kind=pair["kind"],
            policy=policies.rule_for(pair["tool"], pair["kind"]).name,
            count=pair["n"],
            oldest=pair["oldest"],
        )
        for pair in pairs
    ]
    runs = dict(
        Run.objects.filter(status__in=ACTIVE_RUN_STATUSES).values_list("status").annotate(n=Count("pk")).order_by()
    )
    return metrics.DatabaseTotals(open_requests=groups, runs=runs, now=timezone.now())


def active_runs_count() -> int:
    return Run.objects.filter(status__in=ACTIVE_RUN_STATUSES).count()


def recent_runs(limit: int = 10) -> list[Run]:
    finished = Run.objects.exclude(status__in=ACTIVE_RUN_STATUSES).select_related("started_by")
    return list(finished.order_by("-finished_at", "-id")[:limit])


def last_seq() -> int:
    return AuditEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0


alast_seq = database_sync_to_async(last_seq)

# How far below the newest event a new follower looks for ids still held by open transactions (absent_ids).
RECENT_IDS = 1000


def ids_follow_commits() -> bool:
    """True where audit ids are handed out in commit order (SQLite, under its write lock). On PostgreSQL an
    event is one INSERT with no lock: a transaction still open can commit an id below one already read."""
    return connection.vendor == "sqlite"


def absent_ids(after: int, upto: int) -> list[int]:
    """The ids in ``(after, upto]`` no committed event holds now (always none where ids follow commits):
    what a follower that reads up to ``upto`` must still take when it comes (ChangeFollower.unseen)."""
    if upto <= after or ids_follow_commits():
        return []
    present = set(AuditEvent.objects.filter(id__gt=after, id__lte=upto).values_list("id", flat=True))
    return [pk for pk in range(after + 1, upto + 1) if pk not in present]


aabsent_ids = database_sync_to_async(absent_ids)


def recent_absent_ids(seq: int) -> list[int]:
    """``absent_ids`` of the RECENT_IDS ids up to ``seq``: those a follower starting at ``seq`` takes when they
    come. Read them in the same ``one_view`` as ``seq``, so an id committed since counts as absent."""
    return absent_ids(max(0, seq - RECENT_IDS), seq)


def follow_point() -> tuple[int, list[int]]:
    """Where a follower starts: the newest event's id and ``recent_absent_ids`` below it, in one view."""
    if ids_follow_commits():
        return last_seq(), []
    with one_view():
        seq = last_seq()
        return seq, recent_absent_ids(seq)


afollow_point = database_sync_to_async(follow_point)


@contextmanager
def one_view() -> Iterator[None]:
    """A transaction whose reads all see the database as it was at one moment.

    PostgreSQL's default isolation (READ COMMITTED) gives each statement its own moment, so this
    asks for REPEATABLE READ; a SQLite read transaction is one moment already. Inside a transaction
    the caller opened, the caller's isolation applies.
    """
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if outermost and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield


def request_exists(request_id: str) -> bool:
    return Request.objects.filter(pk=request_id).exists()


arequest_exists = database_sync_to_async(request_exists)


def run_exists(run_id: int) -> bool:
    return Run.objects.filter(pk=run_id).exists()


arun_exists = database_sync_to_async(run_exists)


def stored_answer(request_id: str) -> Answer | None:
    """The Answer recorded for a request, or None while it is open."""
    # Every waiting run and long-poll reads this, on each wake-up and safety poll: plain SQL (rows.py).
    row = rows.values(Request, request_id, ("status", "answer_ok", "answer_data", "answer_reason"))
    if row is None or row["status"] == RequestStatus.OPEN:
        return None
    return Answer(id=request_id, ok=bool(row["answer_ok"]), data=row["answer_data"], reason=row["answer_reason"])


astored_answer = database_sync_to_async(stored_answer)


def answer_signature_of(request_id: str) -> dict[str, Any] | None:
    """The console's signature stored with a request's answer (approvals/signing/), None while open or unsigned."""
    row = rows.values(Request, request_id, ("answer_signature",))
    signature = row["answer_signature"] if row is not None else None
    return signature if isinstance(signature, dict) else None


aanswer_signature_of = database_sync_to_async(answer_signature_of)


def expiry_of(request_id: str) -> tuple[datetime, str] | None:
    """When an expired request expired and the timeout's note ("defaults did not fit"), or None when it did not
    expire: the words a refused tool call's result goes on with (outcomes.refused_output)."""
    row = (
        Request.objects.filter(pk=request_id, status=RequestStatus.EXPIRED)
        .values_list("answered_at", "comment")
        .first()
    )
    return (row[0], row[1] or "") if row is not None and row[0] is not None else None


aexpiry_of = database_sync_to_async(expiry_of)


def decliner_of(request_id: str) -> str | None:
    """The username of who declined ``request_id``, or None when the console did (or it is not declined): who the
    words a declined tool call's result goes on with name (outcomes.decline_words)."""
    name = get_user_model().USERNAME_FIELD
    return (
        Request.objects.filter(pk=request_id, status=RequestStatus.DECLINED)
        .values_list(f"answered_by__{name}", flat=True)
        .first()
    )


adecliner_of = database_sync_to_async(decliner_of)
