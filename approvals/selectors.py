"""Read-side views of the database: what dashboards, the API and the run page show.

Request fields leave the process in toolnexus' wire keys (``expiresAt``, ``ok``,
``reason``); console fields sit beside them.
"""

import json
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, NotRequired, TypedDict, cast
from urllib.parse import urlsplit

from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import Count, Q
from toolnexus import Answer

from approvals import keyset
from approvals.hotpath import rows
from approvals.models import (
    ACTIVE_RUN_STATUSES,
    RESOLVING_ACTIONS,
    AuditEvent,
    Request,
    RequestStatus,
    Run,
    RunStatus,
)
from approvals.review import answers, outcomes
from approvals.team import policies

# Load the users a request view names in the same query.
# (run__started_by: the policy facts name who started the run, for four-eyes.)
REQUEST_USERS = ("answered_by", "opened_by", "claimed_by", "run__started_by")

# The dashboard's order, oldest first; ``id`` breaks ties, so the order (and a page's cursor) is total.
REQUEST_ORDER = ("created_at", "id")
REQUEST_CURSOR = (datetime, str)
RUN_CURSOR = (int,)

# A dashboard's snapshot and each page frame carry at most this many open requests (and active runs),
# and no more JSON than this per list: the snapshot stays far below daphne's 1 MiB frame limit
# however many are open (a single request larger than that is still sent, alone on its page).
DASHBOARD_PAGE_ROWS = 50
DASHBOARD_PAGE_BYTES = 96 * 1024
# GET /api/v1/requests: rows per page unless ``limit`` says otherwise, and the most ``limit`` may ask.
API_PAGE_ROWS = 100
API_MAX_PAGE_ROWS = 500
# A run's page lists its requests, decided or not, this many at a time.
RUN_PAGE_REQUESTS = 50
# A run's page shows this many of its newest timeline events; "Show earlier" and a socket that
# (re)connects read this many more at a time (and no more JSON than DASHBOARD_PAGE_BYTES).
RUN_TIMELINE_EVENTS = 50


# Why an Answer is not ok (toolnexus' ``Answer.reason``).
AnswerReason = Literal["declined", "cancelled", "expired"]


class WireAnswer(TypedDict):
    """A toolnexus Answer in its wire keys (``wire_answer``)."""

    id: str
    ok: bool
    data: NotRequired[dict[str, Any]]
    reason: NotRequired[str]


def iso_time(moment: datetime | None, *, timespec: str = "auto") -> str | None:
    """A moment as the wire shows it: ISO 8601, UTC as ``Z`` (``expiresAt``, ``created_at`` and the like).

    The audit chain hashes its own fixed-precision form instead (``models.sealing.canonical_time``)."""
    return moment.isoformat(timespec=timespec).replace("+00:00", "Z") if moment else None


def wire_answer(answer: Answer) -> WireAnswer:
    """A toolnexus Answer in its wire keys; optional keys are left out when unset."""
    wire: WireAnswer = {"id": answer.id, "ok": answer.ok}
    if answer.data is not None:
        wire["data"] = answer.data
    if answer.reason is not None:
        wire["reason"] = answer.reason
    return wire


def answer_wire(request: Request) -> WireAnswer | None:
    """The stored Answer of a request in wire keys, or None while it is open."""
    if request.answer_ok is None:
        return None
    reason = cast(AnswerReason | None, request.answer_reason or None)  # as the Answer carried it
    return wire_answer(Answer(request.id, request.answer_ok, request.answer_data, reason))


def decision_view(request: Request, approvers: Sequence[str] = ()) -> dict[str, Any] | None:
    """What became of ``request`` (the contract's "decision": outcome, by, at, comment, changes, text), None
    while open. ``changes``: the args an approval edited (answers.edited_args), [] when none.

    ``approvers``: who approved it under a quorum, in order (policies.approvals_of).
    """
    outcome = outcomes.outcome_of_status(request.status, request.kind)
    if outcome is None:
        return None
    return outcomes.decision(
        outcome,
        by=request.answered_by.get_username() if request.answered_by is not None else None,
        at=request.answered_at,
        at_wire=iso_time(request.answered_at),
        comment=request.comment,
        approvers=approvers,
        changes=answers.edited_args(request, request.answer_data) if outcome == outcomes.APPROVED else (),
    )


def request_view(request: Request, approvals: Sequence[str] | None = None) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": request.id,
        "kind": request.kind,
        "prompt": request.prompt,
        "url": request.url,
        "data": request.data,
        "expiresAt": request.expires_at_wire,
        "status": request.status,
        "run": request.run_id,
        "tool": request.tool,
        "args": request.args,
        # The args' names in the tool's schema order (decisions.argument_order); an older row: the args' own order.
        "arg_order": request.arg_order or list(request.args or {}),
        # Set when a remote host opened it through the API (the program's own label, and the token's user).
        "host": request.host or None,
        "opened_by": request.opened_by.get_username() if request.opened_by is not None else None,
        "created_at": iso_time(request.created_at),
        "answer": answer_wire(request),
        "comment": request.comment,
        "answered_by": request.answered_by.get_username() if request.answered_by is not None else None,
        "answered_at": iso_time(request.answered_at),
        # Who is working on it ("bob is on it") and whom a reviewer handed it to (review/claims.py).
        "claimed_by": request.claimed_by.get_username() if request.claimed_by is not None else None,
        "claimed_at": iso_time(request.claimed_at),
        "handed_to": request.handed_to or None,
        "form": None,
        "credentials": None,
        # Who may answer (policies.facts): the same for every viewer; for_user adds what *you* may do.
        "policy": policies.facts(request, approvals=approvals),
    }
    # Where it came from, for the inbox's rows: who opened it (a host's token user), and who set it going
    # (policies.starter_of: its run's starter, or for a request without a run, whoever opened it).
    view["requester"] = view["opened_by"]
    view["starter"] = view["policy"]["starter"]
    if request.is_open:
        view["credentials"] = answers.credential_refusal(request)
        view["form"] = answers.form_for(request)
    # What became of it, in words ("Declined by bob: too large"); None while open.
    view["decision"] = decision_view(request, view["policy"]["approvals"])
    return view


def run_view(
    run: Run, open_request: Request | None = None, open_requests: Sequence[Request] | None = None
) -> dict[str, Any]:
    """``open_request``: the request to show with it (its latest, when given); ``open_requests``: all its
    open requests, when the caller read them (else they are read here, for who may cancel an active run).

    ``status`` is the stored status, for programs; ``status_label`` and ``outcome_text`` are for people
    (:func:`run_outcome`)."""
    status_label, outcome_text = run_outcome(run, open_request)
    return {
        "id": run.pk,
        "tool": run.tool,
        "args": run.args,
        "timeout": run.timeout,
        "status": run.status,
        "status_label": status_label,
        "outcome_text": outcome_text,
        "result": run.result_wire(),
        "started_by": run.started_by.get_username() if run.started_by is not None else None,
        "cancel_requested": run.cancel_requested,
        "created_at": iso_time(run.created_at),
        "finished_at": iso_time(run.finished_at),
        "request": request_view(open_request) if open_request is not None else None,
        "kind": run.kind,
        "label": run.label,
        "agent": {"prompt": run.agent_prompt, "model": run.agent_model} if run.kind == "agent" else None,
        "retry_of": run.retry_of_id,
        "owner": run.owner,
        # Who may cancel (policies.run_facts): the same for every viewer; frame_for_user adds what *you* may do.
        "cancel": _cancel_facts(run, open_requests) if run.is_active else None,
    }


# A tool run that a person's refusal ended reads as that refusal, not as "failed".
_REFUSALS = (outcomes.DECLINED, outcomes.CANCELLED, outcomes.EXPIRED)
_REFUSED_RUN_STATUSES = (RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.TIMED_OUT)


def run_outcome(run: Run, latest: Request | None = None) -> tuple[str, str | None]:
    """How a person reads a run: its status in words, and for a finished run what became of it.

    A tool run whose request was declined, withdrawn or expired has failed with the §10 result
    (``declined/expired: <prompt>``, kept for the model and the transcript); people read the outcome
    ("declined") and the decision ("Declined by alice: too risky") instead; one cancelled or timed out
    while it waited keeps its status and reads as the decision too ("Cancelled by demo"). Any other
    finished run reads as its status and its result. ``latest``: the run's latest request, if the caller
    has it (else it is read, only for a tool run that failed, was cancelled or timed out).
    """
    label = str(run.status).replace("_", " ")
    if run.is_active:
        return label, None
    output = run.result_output
    if run.kind == "tool" and run.status in _REFUSED_RUN_STATUSES:
        request = latest if latest is not None else latest_request(run)
        decision = decision_view(request) if request is not None else None
        if decision is not None and decision["outcome"] in _REFUSALS:
            return (decision["outcome"] if run.status == RunStatus.FAILED else label), decision["text"]
    return label, output


def _cancel_facts(run: Run, open_requests: Sequence[Request] | None) -> policies.RunFacts:
    return policies.run_facts(run, open_requests_of(run) if open_requests is None else open_requests)


def open_requests_of(run: Run, in_hand: Request | None = None) -> list[Request]:
    """The run's open requests, oldest first, each with ``run`` as its run.

    ``in_hand``: a request of the run as just written; when it is the only open one
    (a run's frame as its suspension opens) it is used as it is, not read again.
    """
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


def run_detail(run_id: int) -> dict[str, Any]:
    run = Run.objects.select_related("started_by").get(pk=run_id)
    return run_view(run, latest_request(run))


arun_detail = database_sync_to_async(run_detail)


def run_page(run_id: int, viewer: policies.Viewer, requests_after: str | None = None) -> dict[str, Any]:
    """What a run's page shows for ``viewer`` (raises Run.DoesNotExist): the run, what the viewer may do
    with it, the newest page of its timeline (``timeline_earlier``: older events remain), a page of its
    requests (oldest first, after the cursor ``requests_after``; raises keyset.CursorError for one this
    console did not hand out), its retries, and the sequence number the page is current to. Its
    transcript is ``transcript.entries``'."""
    seq = last_seq()  # read first: what follows is at least this current, and later events re-apply harmlessly
    run = Run.objects.select_related("started_by").get(pk=run_id)
    latest = latest_request(run)
    timeline = run_timeline(run.pk)
    view = run_view(run, latest)
    decision = view["request"]["decision"] if view["request"] is not None else None
    return {
        "run": run,
        # What this viewer may do with the run (the Cancel run button), as on the socket.
        "run_view": run_for_user(view, viewer),
        # A run a refusal ended reads as the decision: its Result says it, and no Decision line repeats it.
        "result_is_decision": decision is not None and view["outcome_text"] == decision["text"],
        "args_json": json.dumps(run.args, ensure_ascii=False, indent=2),  # as a person reads the arguments
        "timeline": timeline.events,
        "timeline_earlier": timeline.more,
        "run_requests": run_requests_page(run.pk, requests_after),
        "retries": list(run.retries.order_by("id").values_list("id", flat=True)),
        "seq": seq,
    }


arun_page = database_sync_to_async(run_page)


def run_requests_page(run_id: int, after: str | None = None) -> "Page":
    """A page of a run's requests, open and decided, oldest first: each view with ``given``, what the
    answer chose or typed beyond its comment as compact JSON ("" when nothing; :func:`answer_given`)."""
    page = requests_page(run=run_id, after=after, limit=RUN_PAGE_REQUESTS)
    return Page([{**view, "given": answer_given(view)} for view in page.items], page.next)


def answer_given(view: dict[str, Any]) -> str:
    """What an answer chose or typed, beyond its comment and an approval's args (its decision's changes
    say those in words), as compact JSON; "" when nothing."""
    answer = view.get("answer") or {}
    data = answer.get("data") if answer.get("ok") else None
    beside = ("comment", "args") if view.get("kind") == "approval" else ("comment",)
    given = {key: value for key, value in data.items() if key not in beside} if isinstance(data, dict) else {}
    return json.dumps(given, ensure_ascii=False, separators=(",", ":")) if given else ""  # as JSON.stringify writes it


def event_view(event: AuditEvent) -> dict[str, Any]:
    return {
        "seq": event.pk,
        "action": event.action,
        # The event as people read it ("Cancel asked by demo"); ``action`` is its name for programs.
        "words": outcomes.event_words(event.action, event.actor, event.payload, event.kind),
        "actor": event.actor,
        "at": iso_time(event.created_at),
        "run_id": event.run_id,
        "request_id": event.request_id,
        "payload": event.payload,
    }


@dataclass
class Page:
    """One keyset page: its rows' views, and the cursor of the page after it (None on the last page)."""

    items: list[dict[str, Any]]
    next: str | None


def request_cursor(request: Request) -> str:
    return keyset.encode_cursor((request.created_at, request.id))


def requests_page(
    *,
    status: str | None = None,
    run: int | None = None,
    after: str | None = None,
    limit: int = API_PAGE_ROWS,
    max_bytes: int | None = None,
) -> Page:
    """The requests (of ``status`` and ``run``, if given) after the cursor ``after``, oldest first, at most ``limit``.

    Raises keyset.CursorError for a cursor this console did not hand out.
    """
    rows = Request.objects.select_related(*REQUEST_USERS).prefetch_related("approvals__user").order_by(*REQUEST_ORDER)
    if status:
        rows = rows.filter(status=status)
    if run is not None:
        rows = rows.filter(run_id=run)
    if after is not None:
        rows = rows.filter(keyset.strictly_after(REQUEST_ORDER, keyset.decode_cursor(after, REQUEST_CURSOR)))
    page, more = keyset.take_page(rows, limit)
    views = [request_view(r) for r in page]
    if max_bytes is not None:
        kept = keyset.fitting(views, max_bytes)
        page, views, more = page[:kept], views[:kept], more or kept < len(views)
    return Page(views, request_cursor(page[-1]) if page and more else None)


def open_requests_page(after: str | None = None, run: int | None = None) -> Page:
    """A dashboard's page of open requests (the snapshot's first one, then each page frame's), of one run if given."""
    return requests_page(
        status=RequestStatus.OPEN, run=run, after=after, limit=DASHBOARD_PAGE_ROWS, max_bytes=DASHBOARD_PAGE_BYTES
    )


def active_runs_page(after: str | None = None) -> Page:
    """A dashboard's page of active runs, oldest first, after the cursor ``after`` (a run's id)."""
    runs = Run.objects.filter(status__in=ACTIVE_RUN_STATUSES).select_related("started_by").order_by("id")
    if after is not None:
        (after_id,) = keyset.decode_cursor(after, RUN_CURSOR)
        runs = runs.filter(id__gt=after_id)
    page, more = keyset.take_page(runs, DASHBOARD_PAGE_ROWS)
    waiting_on = open_requests_by_run(page)
    views = [run_view(r, open_requests=waiting_on.get(r.pk, [])) for r in page]
    kept = keyset.fitting(views, DASHBOARD_PAGE_BYTES)
    page, views, more = page[:kept], views[:kept], more or kept < len(views)
    return Page(views, keyset.encode_cursor((page[-1].pk,)) if page and more else None)


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
            "approvals": [viewer.username] if pk in approved else [],
        }
        if policies.refusal(facts, viewer) is not None:
            kept.add(pk)
    return kept


def active_runs_count() -> int:
    return Run.objects.filter(status__in=ACTIVE_RUN_STATUSES).count()


def recent_runs(limit: int = 10) -> list[Run]:
    finished = Run.objects.exclude(status__in=ACTIVE_RUN_STATUSES).select_related("started_by")
    return list(finished.order_by("-finished_at", "-id")[:limit])


def last_seq() -> int:
    return AuditEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0


alast_seq = database_sync_to_async(last_seq)


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


def snapshot(viewer: policies.Viewer | None = None) -> dict[str, Any]:
    """What a dashboard shows first, with the sequence number it is current to; bounded whatever is open.

    The first page of open requests in the dashboard's order and of active runs (``next``
    and ``runs_next`` are the cursors a ``page`` frame continues from), the recently
    finished runs, and the totals (``counts``: open requests, per kind, for ``viewer``,
    and active runs), which each event's ``count_change`` keeps current. Read in ``one_view``,
    so ``seq``, the rows and the counts are the audit trail's state at event ``seq``.
    """
    with one_view():
        seq = last_seq()
        requests = open_requests_page()
        runs = active_runs_page()
        return {
            "type": "snapshot",
            "seq": seq,
            "requests": requests.items,
            "next": requests.next,
            "runs": runs.items,
            "runs_next": runs.next,
            "recent_runs": [run_view(r) for r in recent_runs()],
            "counts": {**open_request_counts(viewer), "runs": active_runs_count()},
        }


asnapshot = database_sync_to_async(snapshot)


def page_frame(of: Literal["requests", "runs"], after: str | None = None, run: int | None = None) -> dict[str, Any]:
    """A ``page`` frame: the open requests (``of="requests"``, of one ``run`` if given) or active runs
    (``"runs"``) after the cursor ``after`` (from the first when None).

    Its rows are as the database has them now, which may be newer than the socket's
    ``seq``: the events in between still follow, and a dashboard applies them as usual.
    Raises keyset.CursorError for a cursor this console did not hand out.
    """
    page = open_requests_page(after, run) if of == "requests" else active_runs_page(after)
    frame: dict[str, Any] = {"type": "page", "of": of, "after": after, of: page.items, "next": page.next}
    if run is not None:
        frame["run"] = run
    return frame


apage_frame = database_sync_to_async(page_frame)


def event_frame(event: AuditEvent) -> dict[str, Any]:
    """The frame a dashboard receives for one audit event: the event plus the current state of its subjects."""
    request = Request.objects.select_related(*REQUEST_USERS).get(pk=event.request_id) if event.request_id else None
    run = None
    if event.run_id:
        # The request's run was read in the same query (REQUEST_USERS joins it): no second read.
        run = (
            request.run
            if request is not None and request.run_id == event.run_id
            else (Run.objects.select_related("started_by").get(pk=event.run_id))
        )
    return frame_of_rows(event, request, run)


def frame_of_rows(
    event: AuditEvent,
    request: Request | None = None,
    run: Run | None = None,
    approvals: Sequence[str] | None = None,
) -> dict[str, Any]:
    """``event_frame`` without reading back: ``request`` and ``run`` are the event's subjects as its
    transaction left them (read or written after its last change to them), ``approvals`` the request's
    approvers if known."""
    in_hand = request if request is not None and run is not None and request.run_id == run.pk else None
    return {
        "type": "event",
        **event_view(event),
        "run": run_view(run, open_requests=_open_requests_if_active(run, in_hand)) if run is not None else None,
        "request": request_view(request, approvals) if request is not None else None,
    }


def _open_requests_if_active(run: Run, in_hand: Request | None) -> Sequence[Request]:
    return open_requests_of(run, in_hand) if run.is_active else ()


def frames_after(seq: int, upto: int | None = None) -> list[dict[str, Any]]:
    events = AuditEvent.objects.filter(id__gt=seq).order_by("id")
    if upto is not None:
        events = events.filter(id__lte=upto)
    return [event_frame(e) for e in events[:500]]


aframes_after = database_sync_to_async(frames_after)


@dataclass
class TimelinePage:
    """A page of a run's timeline, oldest first, and whether the run has ``more`` events beyond it:
    after its last when read forwards (``after``), before its first when read backwards."""

    events: list[dict[str, Any]]
    more: bool


def run_timeline(run_id: int, *, after: int | None = None, before: int | None = None) -> TimelinePage:
    """A page of the run's events, its requests' included (also any recorded without the run set).

    With ``after`` (an event number), the first RUN_TIMELINE_EVENTS events after it: what a page
    that showed up to ``after`` missed. Otherwise the last ones before ``before`` (the newest of
    all when None). Either way at most DASHBOARD_PAGE_BYTES of JSON (at least one event).
    """
    events = AuditEvent.objects.filter(Q(run_id=run_id) | Q(request__run_id=run_id))
    if after is not None:
        chunk, more = keyset.take_page(events.filter(id__gt=after).order_by("id"), RUN_TIMELINE_EVENTS)
    else:
        if before is not None:
            events = events.filter(id__lt=before)
        chunk, more = keyset.take_page(events.order_by("-id"), RUN_TIMELINE_EVENTS)
    views = [event_view(e) for e in chunk]
    kept = keyset.fitting(views, DASHBOARD_PAGE_BYTES)  # from the page's start: the oldest, or the newest
    more = more or kept < len(views)
    return TimelinePage(views[:kept] if after is not None else views[:kept][::-1], more)


def timeline_frame(run_id: int, *, after: int | None = None, before: int | None = None) -> dict[str, Any]:
    """A ``timeline`` frame: ``run_timeline`` for the run page's socket, with the range it answers."""
    page = run_timeline(run_id, after=after, before=before)
    return {
        "type": "timeline",
        "run": run_id,
        "after": after,
        "before": before,
        "events": page.events,
        "more": page.more,
    }


atimeline_frame = database_sync_to_async(timeline_frame)


def request_detail(request_id: str) -> dict[str, Any] | None:
    """One request's view, or None when there is no such request."""
    request = Request.objects.select_related(*REQUEST_USERS).filter(pk=request_id).first()
    return request_view(request) if request is not None else None


arequest_detail = database_sync_to_async(request_detail)


def request_page(request_id: str, viewer: policies.Viewer) -> dict[str, Any] | None:
    """What a request's own page shows ``viewer``: its view with what they may do and what the answer
    gave (``given``), the starter of its run, or None when there is no such request."""
    request = Request.objects.select_related(*REQUEST_USERS).filter(pk=request_id).first()
    if request is None:
        return None
    view = for_user(request_view(request), viewer) or {}
    starter = request.run.started_by if request.run is not None else None
    return {
        "request": {**view, "given": answer_given(view)},
        "starter": starter.get_username() if starter is not None else None,
        # A link the tool sent is clickable only when it is a web address: "javascript:" and the like stay text.
        "web_link": request.url if request.url and urlsplit(request.url).scheme in ("http", "https") else None,
    }


arequest_page = database_sync_to_async(request_page)


def request_exists(request_id: str) -> bool:
    return Request.objects.filter(pk=request_id).exists()


arequest_exists = database_sync_to_async(request_exists)


def run_exists(run_id: int) -> bool:
    return Run.objects.filter(pk=run_id).exists()


arun_exists = database_sync_to_async(run_exists)


# -- what a host socket is sent ---------------------------------------------------------


def host_answer_in_frame(frame: dict[str, Any], username: str, watched: Collection[str] = ()) -> WireAnswer | None:
    """The wire Answer an event frame carries for this host (its own request, or one it watches), or None."""
    request = frame.get("request") or {}
    if frame.get("action") not in RESOLVING_ACTIONS or not request.get("answer"):
        return None
    if request.get("opened_by") == username or request.get("id") in watched:
        return request["answer"]
    return None


def host_answers_after(user_id: int, watched: Iterable[str], seq: int, upto: int) -> list[WireAnswer]:
    """The answers a host socket missed between two sequence numbers: its own requests and the ones it watches."""
    from django.db.models import Q

    resolved = (
        AuditEvent.objects.filter(id__gt=seq, id__lte=upto, action__in=RESOLVING_ACTIONS)
        .filter(Q(request__opened_by_id=user_id) | Q(request_id__in=list(watched)))
        .select_related("request")
        .order_by("id")
    )
    return [
        answer for event in resolved if event.request is not None and (answer := answer_wire(event.request)) is not None
    ]


ahost_answers_after = database_sync_to_async(host_answers_after)


# -- what one viewer sees ---------------------------------------------------------------------


def for_user(view: dict[str, Any] | None, viewer: policies.Viewer) -> dict[str, Any] | None:
    """A request view plus what ``viewer`` (a policies.Viewer) may do with it: may_answer, may_decline, why_not, ...

    The shared view (and the event payload every socket receives) stays the same
    for everyone; this per-viewer step runs last, in the consumer, page or API call.
    """
    if not view or not isinstance(view.get("policy"), dict):
        return view
    return {**view, "policy": {**view["policy"], **policies.viewer_bits(view["policy"], viewer, view["status"])}}


def frame_for_user(frame: dict[str, Any], viewer: policies.Viewer | None) -> dict[str, Any]:
    """A snapshot or event frame with every request in it seen through ``viewer``'s eyes."""
    if viewer is None or not isinstance(frame, dict):
        return frame
    if frame.get("type") == "snapshot":
        return {
            **frame,
            "requests": [for_user(r, viewer) for r in frame.get("requests") or []],
            "runs": [run_for_user(r, viewer) for r in frame.get("runs") or []],
        }
    if frame.get("type") == "page":
        if frame.get("of") == "runs":
            return {**frame, "runs": [run_for_user(r, viewer) for r in frame.get("runs") or []]}
        return {**frame, "requests": [for_user(r, viewer) for r in frame.get("requests") or []]}
    if frame.get("type") == "event":
        seen = {
            **frame,
            "request": for_user(frame.get("request"), viewer),
            "run": run_for_user(frame.get("run"), viewer),
        }
        change = count_change(frame, viewer)
        if change:
            seen["count_change"] = change
        return seen
    return frame


def count_change(frame: dict[str, Any], viewer: policies.Viewer | None) -> dict[str, Any] | None:
    """How an event changes a dashboard's totals (the snapshot's ``counts``), as seen by ``viewer``.

    ``{"requests": ±1, "kind": ..., "for_me": ±1 or 0}`` when a request opens or closes,
    ``{"for_me": -1}`` when the viewer's own approval leaves a quorum's request open, and
    ``{"runs": ±1}`` when a run starts or ends; None for anything else. Derived from the
    event alone, with no database read: the snapshot's totals plus every change since
    stay equal to what the database would count.
    """
    action = frame.get("action")
    if action == AuditEvent.Action.RUN_STARTED:
        return {"runs": 1}
    if action in (AuditEvent.Action.RUN_FINISHED, AuditEvent.Action.RUN_INTERRUPTED):
        return {"runs": -1}
    request = frame.get("request")
    facts: policies.PolicyFacts | None = request.get("policy") if isinstance(request, dict) else None
    if not isinstance(request, dict) or not isinstance(facts, dict):
        return None
    payload = frame.get("payload") or {}
    if action == AuditEvent.Action.REQUEST_OPENED:
        return {"requests": 1, "kind": request["kind"], "for_me": _may_answer(facts, viewer)}
    if action in RESOLVING_ACTIONS:
        before = facts.get("approvals") or []
        if action == AuditEvent.Action.REQUEST_ANSWERED and isinstance(payload.get("approvals"), list):
            before = payload["approvals"][:-1]  # the approval that completed the quorum came with this answer
        return {"requests": -1, "kind": request["kind"], "for_me": -_may_answer({**facts, "approvals": before}, viewer)}
    if action == AuditEvent.Action.REQUEST_APPROVAL_RECORDED and isinstance(payload.get("approvals"), list):
        after = payload["approvals"]
        change = _may_answer({**facts, "approvals": after}, viewer) - _may_answer(
            {**facts, "approvals": after[:-1]}, viewer
        )
        return {"for_me": change} if change else None
    return None


def _may_answer(facts: policies.PolicyFacts, viewer: policies.Viewer | None) -> int:
    """1 when ``viewer`` may answer a request with these policy facts while it is open, else 0."""
    return int(viewer is not None and policies.refusal(facts, viewer) is None)


def run_for_user(run: dict[str, Any] | None, viewer: policies.Viewer) -> dict[str, Any] | None:
    """A run view plus what ``viewer`` may do with it (cancel it) and with its request."""
    if not run:
        return run
    seen = dict(run)
    if isinstance(run.get("cancel"), dict):
        seen["cancel"] = {**run["cancel"], **policies.cancel_bits(run["cancel"], viewer)}
    if run.get("request"):
        seen["request"] = for_user(run["request"], viewer)
    return seen


def stored_answer(request_id: str) -> Answer | None:
    """The Answer recorded for a request, or None while it is open."""
    # Every waiting run and long-poll reads this, on each wake-up and safety poll: plain SQL (rows.py).
    row = rows.values(Request, request_id, ("status", "answer_ok", "answer_data", "answer_reason"))
    if row is None or row["status"] == RequestStatus.OPEN:
        return None
    return Answer(id=request_id, ok=bool(row["answer_ok"]), data=row["answer_data"], reason=row["answer_reason"])


astored_answer = database_sync_to_async(stored_answer)


# SQLite allows at most 999 parameters in older builds: ask in slices.
_IN_SLICE = 500
