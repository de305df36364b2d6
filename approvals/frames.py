"""What entry points serve: a dashboard's snapshot and pages, an audit event's frame, a run's and a
request's page, a run's timeline, what a host socket is sent, and a frame seen through one viewer's eyes.

Built from the queries (``selectors.py``) and the wire shapes (``shapes.py``); each ``a*`` async twin sits
beside its function, so entry points never wrap one themselves.
"""

import json
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from channels.db import database_sync_to_async
from django.db.models import Q

from approvals import keyset
from approvals.models import ACTIVE_RUN_STATUSES, RESOLVING_ACTIONS, AuditEvent, Request, RequestStatus, Run
from approvals.selectors import (
    API_PAGE_ROWS,
    REQUEST_CURSOR,
    REQUEST_ORDER,
    REQUEST_USERS,
    RUN_CURSOR,
    Page,
    active_runs_count,
    last_seq,
    latest_request,
    one_view,
    open_request_counts,
    open_requests_by_run,
    open_requests_of,
    recent_absent_ids,
    recent_runs,
    request_cursor,
)
from approvals.shapes import WireAnswer, answer_wire, event_view, for_user, request_view, run_for_user, run_view
from approvals.team import policies

# A dashboard's snapshot and each page frame carry at most this many open requests (and active runs),
# and no more JSON than this per list: the snapshot stays far below daphne's 1 MiB frame limit
# however many are open (a single request larger than that is still sent, alone on its page).
DASHBOARD_PAGE_ROWS = 50
DASHBOARD_PAGE_BYTES = 96 * 1024
# A run's page lists its requests, decided or not, this many at a time.
RUN_PAGE_REQUESTS = 50
# A run's page shows this many of its newest timeline events; "Show earlier" and a socket that
# (re)connects read this many more at a time (and no more JSON than DASHBOARD_PAGE_BYTES).
RUN_TIMELINE_EVENTS = 50


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


def _snapshot_in_view(viewer: policies.Viewer | None) -> dict[str, Any]:
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


def snapshot(viewer: policies.Viewer | None = None) -> dict[str, Any]:
    """What a dashboard shows first, with the sequence number it is current to; bounded whatever is open.

    The first page of open requests in the dashboard's order and of active runs (``next``
    and ``runs_next`` are the cursors a ``page`` frame continues from), the recently
    finished runs, and the totals (``counts``: open requests, per kind, for ``viewer``,
    and active runs), which each event's ``count_change`` keeps current. Read in ``one_view``,
    so ``seq``, the rows and the counts are the audit trail's state at event ``seq``.
    """
    with one_view():
        return _snapshot_in_view(viewer)


asnapshot = database_sync_to_async(snapshot)


def snapshot_to_follow(viewer: policies.Viewer | None = None) -> tuple[dict[str, Any], list[int]]:
    """A socket's ``snapshot`` and the ids at or below its ``seq`` that no event in it holds (PostgreSQL).

    Both are read in the snapshot's one view: an id whose transaction commits after the snapshot
    was read is one the snapshot did not see, so the socket still takes it when it comes
    (ChangeFollower.unseen); read a moment later, it would look present and be dropped.
    """
    with one_view():
        frame = _snapshot_in_view(viewer)
        return frame, recent_absent_ids(frame["seq"])


asnapshot_to_follow = database_sync_to_async(snapshot_to_follow)


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
    return _frame(event, request, run, None)


def frame_of_rows(
    event: AuditEvent,
    request: Request | None = None,
    run: Run | None = None,
    approvals: Sequence[str] | None = None,
) -> dict[str, Any]:
    """``event_frame`` without reading back: ``request`` and ``run`` are the event's subjects as its
    transaction left them (read or written after its last change to them), ``approvals`` the request's
    approvers if known. A run whose start this is has asked nothing yet: its open requests are not read."""
    just_started = event.action == AuditEvent.Action.RUN_STARTED and request is None
    return _frame(event, request, run, approvals, no_open_requests=just_started)


def _frame(
    event: AuditEvent,
    request: Request | None,
    run: Run | None,
    approvals: Sequence[str] | None,
    *,
    no_open_requests: bool = False,
) -> dict[str, Any]:
    in_hand = request if request is not None and run is not None and request.run_id == run.pk else None
    open_requests = () if no_open_requests or run is None else _open_requests_if_active(run, in_hand)
    return {
        "type": "event",
        **event_view(event),
        "run": run_view(run, open_requests=open_requests) if run is not None else None,
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


def frames_of(ids: Collection[int]) -> list[dict[str, Any]]:
    """The frames of the events among ``ids`` that are committed now, oldest id first."""
    return [event_frame(e) for e in AuditEvent.objects.filter(id__in=list(ids)).order_by("id")]


aframes_of = database_sync_to_async(frames_of)


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


# -- a frame seen through one viewer's eyes ----------------------------------------------------


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
    if action == AuditEvent.Action.REQUEST_ESCALATED:
        # The policy's fallback answerers may answer it from now on: counted for them as it is for an opening.
        added_users, added_groups = set(payload.get("added_users") or ()), set(payload.get("added_groups") or ())
        unescalated: policies.PolicyFacts = {
            **facts,
            "users": [name for name in facts["users"] if name not in added_users],
            "groups": [name for name in facts["groups"] if name not in added_groups],
        }
        change = _may_answer(facts, viewer) - _may_answer(unescalated, viewer) if added_users or added_groups else 0
        return {"for_me": change} if change else None
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
