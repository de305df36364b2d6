"""Read-side views of the database: what dashboards, the API and the run page show.

Request fields leave the process in toolnexus' wire keys (``expiresAt``, ``ok``,
``reason``); console fields sit beside them.
"""
from toolnexus import Answer

from . import answers, policies, rows
from .models import ACTIVE_RUN_STATUSES, RESOLVING_ACTIONS, AuditEvent, Request, RequestStatus, Run

# Load the users a request view names in the same query.
# (run__started_by: the policy facts name who started the run, for four-eyes.)
REQUEST_USERS = ("answered_by", "opened_by", "run__started_by")


def _iso(moment):
    return moment.isoformat().replace("+00:00", "Z") if moment else None


def wire_answer(answer):
    """A toolnexus Answer in its wire keys; optional keys are left out when unset."""
    wire = {"id": answer.id, "ok": answer.ok}
    if answer.data is not None:
        wire["data"] = answer.data
    if answer.reason is not None:
        wire["reason"] = answer.reason
    return wire


def answer_wire(request):
    """The stored Answer of a request in wire keys, or None while it is open."""
    if request.answer_ok is None:
        return None
    return wire_answer(Answer(request.id, request.answer_ok, request.answer_data, request.answer_reason or None))


def request_view(request, approvals=None):
    view = {
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
        # Set when a remote host opened it through the API (the program's own label, and the token's user).
        "host": request.host or None,
        "opened_by": request.opened_by.get_username() if request.opened_by_id else None,
        "created_at": _iso(request.created_at),
        "answer": answer_wire(request),
        "comment": request.comment,
        "answered_by": request.answered_by.get_username() if request.answered_by_id else None,
        "answered_at": _iso(request.answered_at),
        "form": None,
        "credentials": None,
        # Who may answer (policies.facts): the same for every viewer; for_user adds what *you* may do.
        "policy": policies.facts(request, approvals=approvals),
    }
    if request.is_open:
        view["credentials"] = answers.credential_refusal(request)
        view["form"] = answers.form_for(request)
    return view


def run_view(run, open_request=None, open_requests=None):
    """``open_request``: the request to show with it; ``open_requests``: all its open requests, when the
    caller read them (else they are read here, for who may cancel an active run)."""
    return {
        "id": run.pk,
        "tool": run.tool,
        "args": run.args,
        "timeout": run.timeout,
        "status": run.status,
        "result": run.result_wire(),
        "started_by": run.started_by.get_username() if run.started_by_id else None,
        "cancel_requested": run.cancel_requested,
        "created_at": _iso(run.created_at),
        "finished_at": _iso(run.finished_at),
        "request": request_view(open_request) if open_request is not None else None,
        "kind": run.kind,
        "label": run.label,
        "agent": {"prompt": run.agent_prompt, "model": run.agent_model} if run.kind == "agent" else None,
        "retry_of": run.retry_of_id,
        "owner": run.owner,
        # Who may cancel (policies.run_facts): the same for every viewer; frame_for_user adds what *you* may do.
        "cancel": _cancel_facts(run, open_requests) if run.is_active else None,
    }


def _cancel_facts(run, open_requests):
    return policies.run_facts(run, open_requests_of(run) if open_requests is None else open_requests)


def open_requests_of(run, in_hand=None):
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


def latest_request(run):
    return run.requests.select_related(*REQUEST_USERS).order_by("-created_at").first()


def run_detail(run_id):
    run = Run.objects.select_related("started_by").get(pk=run_id)
    return run_view(run, latest_request(run))


def event_view(event):
    return {
        "seq": event.pk,
        "action": event.action,
        "actor": event.actor,
        "at": _iso(event.created_at),
        "run_id": event.run_id,
        "request_id": event.request_id,
        "payload": event.payload,
    }


def open_requests():
    return list(
        Request.objects.filter(status=RequestStatus.OPEN).select_related(*REQUEST_USERS)
        .prefetch_related("approvals__user").order_by("created_at")
    )


def active_runs():
    return list(Run.objects.filter(status__in=ACTIVE_RUN_STATUSES).select_related("started_by").order_by("id"))


def recent_runs(limit=10):
    finished = Run.objects.exclude(status__in=ACTIVE_RUN_STATUSES).select_related("started_by")
    return list(finished.order_by("-finished_at", "-id")[:limit])


def last_seq():
    return AuditEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0


def snapshot():
    """Everything a dashboard shows, with the sequence number it is current to.

    Read in one transaction so ``seq`` and the rows agree.
    """
    from django.db import transaction

    with transaction.atomic():
        seq = last_seq()
        requests = open_requests()
        by_run = {}
        for request in requests:
            by_run.setdefault(request.run_id, []).append(request)
        return {
            "type": "snapshot",
            "seq": seq,
            "requests": [request_view(r) for r in requests],
            "runs": [run_view(r, open_requests=by_run.get(r.pk, ())) for r in active_runs()],
            "recent_runs": [run_view(r) for r in recent_runs()],
        }


def event_frame(event):
    """The frame a dashboard receives for one audit event: the event plus the current state of its subjects."""
    request = Request.objects.select_related(*REQUEST_USERS).get(pk=event.request_id) if event.request_id else None
    run = None
    if event.run_id:
        # The request's run was read in the same query (REQUEST_USERS joins it): no second read.
        run = request.run if request is not None and request.run_id == event.run_id else (
            Run.objects.select_related("started_by").get(pk=event.run_id)
        )
    return frame_of_rows(event, request, run)


def frame_of_rows(event, request=None, run=None, approvals=None):
    """``event_frame`` without reading back: ``request`` and ``run`` are the event's subjects as its
    transaction left them (read or written after its last change to them), ``approvals`` the request's
    approvers if known."""
    in_hand = request if request is not None and run is not None and request.run_id == run.pk else None
    return {
        "type": "event", **event_view(event),
        "run": run_view(run, open_requests=_open_requests_if_active(run, in_hand)) if run is not None else None,
        "request": request_view(request, approvals) if request is not None else None,
    }


def _open_requests_if_active(run, in_hand):
    return open_requests_of(run, in_hand) if run.is_active else ()


def frames_after(seq, upto=None):
    events = AuditEvent.objects.filter(id__gt=seq).order_by("id")
    if upto is not None:
        events = events.filter(id__lte=upto)
    return [event_frame(e) for e in events[:500]]


def run_timeline(run):
    """Every event of the run, its requests' included (also any recorded without the run set)."""
    from django.db.models import Q

    events = AuditEvent.objects.filter(Q(run=run) | Q(request__run=run)).order_by("id")
    return [event_view(e) for e in events]


def request_detail(request_id):
    """One request's view, or None when there is no such request."""
    request = Request.objects.select_related(*REQUEST_USERS).filter(pk=request_id).first()
    return request_view(request) if request is not None else None


def request_exists(request_id):
    return Request.objects.filter(pk=request_id).exists()


def requests_list(status=None, limit=500):
    rows = Request.objects.select_related(*REQUEST_USERS).order_by("created_at")
    if status:
        rows = rows.filter(status=status)
    return [request_view(r) for r in rows[:limit]]


# -- what a host socket is sent ---------------------------------------------------------


def host_answer_in_frame(frame, username, watched=()):
    """The wire Answer an event frame carries for this host (its own request, or one it watches), or None."""
    request = frame.get("request") or {}
    if frame.get("action") not in RESOLVING_ACTIONS or not request.get("answer"):
        return None
    if request.get("opened_by") == username or request.get("id") in watched:
        return request["answer"]
    return None


def host_answers_after(user_id, watched, seq, upto):
    """The answers a host socket missed between two sequence numbers: its own requests and the ones it watches."""
    from django.db.models import Q

    resolved = (
        AuditEvent.objects.filter(id__gt=seq, id__lte=upto, action__in=RESOLVING_ACTIONS)
        .filter(Q(request__opened_by_id=user_id) | Q(request_id__in=list(watched)))
        .select_related("request")
        .order_by("id")
    )
    return [answer_wire(event.request) for event in resolved if event.request.answer_ok is not None]


# -- what one viewer sees ---------------------------------------------------------------------


def for_user(view, viewer):
    """A request view plus what ``viewer`` (a policies.Viewer) may do with it: may_answer, why_not, ...

    The shared view (and the event payload every socket receives) stays the same
    for everyone; this per-viewer step runs last, in the consumer, page or API call.
    """
    if not view or not isinstance(view.get("policy"), dict):
        return view
    return {**view, "policy": {**view["policy"], **policies.viewer_bits(view["policy"], viewer, view["status"])}}


def frame_for_user(frame, viewer):
    """A snapshot or event frame with every request in it seen through ``viewer``'s eyes."""
    if viewer is None or not isinstance(frame, dict):
        return frame
    if frame.get("type") == "snapshot":
        return {
            **frame,
            "requests": [for_user(r, viewer) for r in frame.get("requests") or []],
            "runs": [run_for_user(r, viewer) for r in frame.get("runs") or []],
        }
    if frame.get("type") == "event":
        return {**frame, "request": for_user(frame.get("request"), viewer), "run": run_for_user(frame.get("run"), viewer)}
    return frame


def run_for_user(run, viewer):
    """A run view plus what ``viewer`` may do with it (cancel it) and with its request."""
    if not run:
        return run
    seen = dict(run)
    if isinstance(run.get("cancel"), dict):
        seen["cancel"] = {**run["cancel"], **policies.cancel_bits(run["cancel"], viewer)}
    if run.get("request"):
        seen["request"] = for_user(run["request"], viewer)
    return seen
