"""Read-side views of the database: what dashboards, the API and the run page show.

Request fields leave the process in toolnexus' wire keys (``expiresAt``, ``ok``,
``reason``); console fields sit beside them.
"""
from toolnexus import Answer

from . import answers
from .models import ACTIVE_RUN_STATUSES, AuditEvent, Request, RequestStatus, Run


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


def request_view(request):
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
        "created_at": _iso(request.created_at),
        "answer": answer_wire(request),
        "comment": request.comment,
        "answered_by": request.answered_by.get_username() if request.answered_by_id else None,
        "answered_at": _iso(request.answered_at),
        "form": None,
        "credentials": None,
    }
    if request.is_open:
        view["credentials"] = answers.credential_refusal(request)
        view["form"] = answers.form_for(request)
    return view


def run_view(run, open_request=None):
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
    }


def latest_request(run):
    return run.requests.select_related("answered_by").order_by("-created_at").first()


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
        Request.objects.filter(status=RequestStatus.OPEN).select_related("answered_by").order_by("created_at")
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
        return {
            "type": "snapshot",
            "seq": seq,
            "requests": [request_view(r) for r in open_requests()],
            "runs": [run_view(r) for r in active_runs()],
            "recent_runs": [run_view(r) for r in recent_runs()],
        }


def event_frame(event):
    """The frame a dashboard receives for one audit event: the event plus the current state of its subjects."""
    frame = {"type": "event", **event_view(event), "run": None, "request": None}
    if event.request_id:
        frame["request"] = request_view(Request.objects.select_related("answered_by").get(pk=event.request_id))
    if event.run_id:
        frame["run"] = run_view(Run.objects.select_related("started_by").get(pk=event.run_id))
    return frame


def frames_after(seq, upto=None):
    events = AuditEvent.objects.filter(id__gt=seq).order_by("id")
    if upto is not None:
        events = events.filter(id__lte=upto)
    return [event_frame(e) for e in events[:500]]


def run_timeline(run):
    events = AuditEvent.objects.filter(run=run).order_by("id")
    return [event_view(e) for e in events]
