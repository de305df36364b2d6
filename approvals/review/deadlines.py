"""A request's deadline while it is open: extensions by whoever may answer it, and its policy's reminder.

An extension moves ``expiresAt`` later by ``TOOLNEXUS["EXTEND_STEP_MINUTES"]`` (or the minutes asked), at
most ``TOOLNEXUS["EXTEND_MAX_MINUTES"]`` in all per request. How far it was moved so far is a column of the
request (``extended_seconds``), and each extension is one conditional update on the deadline and the total
it read, so the cap holds across clicks, tabs and processes: two people pressing at once both extend it
only when both steps fit. The expiry timer (``decisions.expire_due_requests``) reads the deadline from the
row, so it follows the new one.

A policy's ``remind_minutes_before`` re-notifies its answerers that long before a deadline, through its
webhook and the dashboards (``request.reminded``). The deadline reminded for is stored on the request
(``reminded_for_deadline``), so however many timers look, one reminder goes out per deadline; an extension
gives a new deadline, and so a new reminder.
"""

from datetime import datetime, timedelta

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from approvals import events
from approvals.models import AuditEvent, Request, RequestStatus
from approvals.moments import iso_time
from approvals.review import decisions
from approvals.review.errors import DecisionError, refusal_for_closed
from approvals.team import policies

# Two presses read the same row at once: the one whose update missed reads again and tries once more, this often.
_ATTEMPTS = 5
_EXTENDS_READS = ("answered_by", "opened_by", "claimed_by", "run__started_by")


def step_minutes() -> int:
    """How far one extension moves a deadline unless the caller says (``CONSOLE_EXTEND_STEP_MINUTES``)."""
    return max(1, int(settings.TOOLNEXUS.get("EXTEND_STEP_MINUTES", 60)))


def max_minutes() -> int:
    """The most a request's deadline may move in all (``CONSOLE_EXTEND_MAX_MINUTES``; 0: no extensions)."""
    return max(0, int(settings.TOOLNEXUS.get("EXTEND_MAX_MINUTES", 24 * 60)))


def room_minutes(request: Request) -> int:
    """The whole minutes this request's deadline may still move (0 when it has no deadline)."""
    if request.expires_at is None:
        return 0
    return max(0, max_minutes() * 60 - request.extended_seconds) // 60


def extension_view(request: Request) -> dict[str, int | bool] | None:
    """What the request view says about moving its deadline (``shapes.request_view``), None without one.

    ``reminded``: its policy's reminder went out for the deadline it has now."""
    if request.expires_at is None:
        return None
    return {
        "extended_minutes": request.extended_seconds // 60,
        "room_minutes": room_minutes(request) if request.is_open else 0,
        "step_minutes": step_minutes(),
        "reminded": request.reminded_for_deadline is not None and request.reminded_for_deadline == request.expires_at,
    }


def _hours(minutes: int) -> str:
    if minutes % 60 == 0:
        return f"{minutes // 60} h"
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def _checked_minutes(minutes: object) -> int:
    if minutes is None:
        return step_minutes()
    if isinstance(minutes, float) and minutes.is_integer():  # JSON's 60.0 is the whole number 60
        minutes = int(minutes)
    if isinstance(minutes, bool) or not isinstance(minutes, int) or not 1 <= minutes <= max(1, max_minutes()):
        message = f"minutes must be a whole number from 1 to {max(1, max_minutes())}; got {minutes!r}."
        raise DecisionError("invalid", message, {"minutes": [message]})
    return minutes


def _check_may_extend(request: Request, user: User) -> None:
    """Whoever may answer it may extend it: its policy's own verdict (``policies.extend_refusal``), fresh."""
    rule = policies.rule_for(request.tool, request.kind, fresh=True)
    refused = policies.extend_refusal(policies.facts(request, rule, approvals=()), policies.answerer_of(user, rule))
    if refused is not None:
        raise DecisionError("forbidden", f"Only someone who may answer this request may extend it. {refused.message}")


def extend_request(request_id: str, *, user: User, minutes: object = None) -> Request:
    """Move an open request's deadline later by ``minutes`` (default ``step_minutes()``); returns the row as left.

    Refused: no such request (not_found), not open or past its deadline (not_open, and a past deadline expires
    it), no deadline or no room left under the cap (conflict, saying how much is left), a user who may not
    answer it (forbidden). Audited as ``request.extended`` with the old and new deadline and the minutes.
    """
    amount = _checked_minutes(minutes)
    for _ in range(_ATTEMPTS):
        request = Request.objects.select_related(*_EXTENDS_READS).filter(pk=request_id).first()
        if request is None:
            raise DecisionError("not_found", f"There is no request with id {request_id!r}.")
        if not request.is_open:
            raise refusal_for_closed(request)
        _check_may_extend(request, user)
        if request.expires_at is None:
            if request.expires_at_wire:  # its policy kept it open past its deadline: nothing expires it any more
                raise DecisionError(
                    "conflict", "Its deadline passed and its policy keeps it open, so there is no deadline to extend."
                )
            raise DecisionError("conflict", "This request has no deadline, so there is nothing to extend.")
        if request.expires_at <= timezone.now():
            decisions.expire_request(request_id)
            request.refresh_from_db()
            if request.is_open:  # escalated (a new deadline) or kept open: read it again and go on from there
                continue
            raise refusal_for_closed(request)
        left = room_minutes(request)
        if amount > left:
            cap = _hours(max_minutes())
            raise DecisionError(
                "conflict",
                f"Its deadline was already moved by {_hours(request.extended_seconds // 60)}, of at most {cap}: "
                + (f"it may move {_hours(left)} more." if left else "it cannot be extended any further."),
            )
        if _apply(request, user, amount):
            return request
    raise DecisionError("conflict", "Others extended this request at the same moment; try again.")


aextend_request = database_sync_to_async(extend_request)


def _apply(request: Request, user: User, minutes: int) -> bool:
    """One conditional update from the deadline and total as read; False when someone changed them meanwhile."""
    old, old_wire = request.expires_at, request.expires_at_wire
    assert old is not None  # checked by the caller
    new = old + timedelta(minutes=minutes)
    new_wire = iso_time(new, timespec="milliseconds")
    with transaction.atomic():
        moved = Request.objects.filter(
            pk=request.pk,
            status=RequestStatus.OPEN,
            expires_at=old,
            extended_seconds=request.extended_seconds,
            extended_seconds__lte=max_minutes() * 60 - minutes * 60,
        ).update(expires_at=new, expires_at_wire=new_wire, extended_seconds=F("extended_seconds") + minutes * 60)
        if not moved:
            return False
        request.expires_at, request.expires_at_wire = new, new_wire
        request.extended_seconds += minutes * 60
        events.record(
            AuditEvent.Action.REQUEST_EXTENDED,
            actor=events.actor_name(user),
            actor_user=user,
            run=request.run,
            request=request,
            payload={"from": old_wire, "to": new_wire, "minutes": minutes},
            rows_current=True,  # the request as this update left it, its users and run read with it: no read-back
        )
    return True


# -- reminders ------------------------------------------------------------------------------------------


def _reminding_rules() -> list[policies.Rule]:
    return [r for r in (*policies.database_rules(), *policies.settings_rules()) if r.remind_minutes_before]


def remind_due_requests() -> float | None:
    """Send each open request's policy reminder once its deadline is that close (the console's own timer).

    Returns the seconds until the next reminder may be due (a lower bound), or None when none can be.
    A request opened already inside its lead time is not reminded: its opening was the notice.
    """
    rules = _reminding_rules()
    if not rules:
        return None
    now = timezone.now()
    lead = timedelta(minutes=max(r.remind_minutes_before or 0 for r in rules))
    candidates = (
        Request.objects.filter(status=RequestStatus.OPEN, expires_at__gt=now, expires_at__lte=now + lead)
        .filter(Q(reminded_for_deadline__isnull=True) | ~Q(reminded_for_deadline=F("expires_at")))
        .values_list("pk", "tool", "kind", "expires_at", "created_at")
    )
    upcoming: float | None = None
    for request_id, tool, kind, deadline, created_at in candidates:
        minutes = policies.rule_for(tool, kind).remind_minutes_before
        if not minutes or deadline is None:  # every candidate has a deadline (the filter): for the types
            continue
        due = deadline - timedelta(minutes=minutes)
        if created_at > due:
            continue
        if due > now:
            wait = (due - now).total_seconds()
            upcoming = wait if upcoming is None else min(upcoming, wait)
            continue
        remind(request_id, deadline, minutes)
    # The next deadline beyond the widest lead time: its reminder is due no sooner than the lead before it.
    beyond = (
        Request.objects.filter(status=RequestStatus.OPEN, expires_at__gt=now + lead)
        .order_by("expires_at")
        .values_list("expires_at", flat=True)
        .first()
    )
    if beyond is not None:
        wait = (beyond - lead - now).total_seconds()
        upcoming = wait if upcoming is None else min(upcoming, wait)
    return upcoming


aremind_due_requests = database_sync_to_async(remind_due_requests)


def remind(request_id: str, deadline: datetime, minutes: int) -> bool:
    """Record the reminder for ``deadline`` unless one was (True when this call did): ``request.reminded``,
    which the policy's webhook hears (team.webhooks) and every dashboard shows."""
    with transaction.atomic():
        if not (
            Request.objects.filter(pk=request_id, status=RequestStatus.OPEN, expires_at=deadline)
            .filter(Q(reminded_for_deadline__isnull=True) | ~Q(reminded_for_deadline=deadline))
            .update(reminded_for_deadline=deadline)
        ):
            return False
        request = Request.objects.select_related(*_EXTENDS_READS).get(pk=request_id)
        events.record(
            AuditEvent.Action.REQUEST_REMINDED,
            actor="system",
            run=request.run,
            request=request,
            payload={"deadline": request.expires_at_wire, "minutes_before": minutes},
            rows_current=True,  # read after its update, in this transaction
        )
    return True
