"""Who is working on an open request: claim it ("bob is on it"), let it go, or hand it to a user or group.

A claim does not answer anything and does not stop anyone who may answer from answering; it
tells the team who has it, so two reviewers do not work on one request. Every change is one
conditional update plus its audit event, so two reviewers claiming at once cannot both win.
"""

from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, User
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from approvals import events
from approvals.models import AuditEvent, Request, RequestStatus
from approvals.review.errors import DecisionError, refusal_for_closed
from approvals.team import policies

GROUP_PREFIX = "group:"


def _open_request(request_id: str) -> Request:
    try:
        request = Request.objects.select_related("claimed_by", "run").get(pk=request_id)
    except Request.DoesNotExist:
        raise DecisionError("not_found", f"There is no request with id {request_id!r}.") from None
    if not request.is_open:
        raise refusal_for_closed(request)
    return request


def _check_may_act(request: Request, user: User) -> None:
    """Claiming and handing are for whoever may decide the request (at least decline it), and staff."""
    if user.is_staff:
        return
    refused = policies.refusal(policies.facts(request), policies.viewer_of(user), ok=False)
    if refused is not None:
        raise DecisionError("forbidden", refused.message)


def _claimed_by_other(request: Request, user: User) -> str:
    holder = request.claimed_by.get_username() if request.claimed_by is not None else "someone"
    since = timezone.localtime(request.claimed_at).strftime("%H:%M") if request.claimed_at else "earlier"
    return f"{holder} is on it (since {since}); ask them to hand it over, or an admin can take it."


def _record(action: str, request: Request, user: User, payload: dict[str, str | None]) -> None:
    events.record(
        action,
        actor=events.actor_name(user),
        actor_user=user,
        run=request.run,
        request=request,
        payload=payload,
    )


def claim(request_id: str, *, user: User) -> Request:
    """``user`` takes the open request. Idempotent for its claimant; refused (409) while someone else holds
    it, unless ``user`` is staff or it was handed to them or their group."""
    request = _open_request(request_id)
    _check_may_act(request, user)
    if request.claimed_by_id == user.pk:
        return request
    viewer = policies.viewer_of(user)
    handed_to_viewer = bool(request.handed_to) and policies.names_viewer(request.handed_to, viewer)
    free = Q(claimed_by__isnull=True) | Q(claimed_by=user)
    if not (user.is_staff or handed_to_viewer):
        taken = Request.objects.filter(free, pk=request_id, status=RequestStatus.OPEN)
    else:
        taken = Request.objects.filter(pk=request_id, status=RequestStatus.OPEN)
    previous = request.claimed_by.get_username() if request.claimed_by is not None else None
    now = timezone.now()
    with transaction.atomic():
        if not taken.update(claimed_by=user, claimed_at=now):
            request = _open_request(request_id)  # closed meanwhile (raises), or someone else was quicker
            raise DecisionError("conflict", _claimed_by_other(request, user))
        request.claimed_by, request.claimed_at = user, now
        _record(AuditEvent.Action.REQUEST_CLAIMED, request, user, {"from": previous} if previous else {})
    return request


aclaim = database_sync_to_async(claim)


def release(request_id: str, *, user: User) -> Request:
    """Its claimant (or staff) lets the open request go; anyone may then claim it."""
    request = _open_request(request_id)
    if request.claimed_by is None:
        return request
    if request.claimed_by_id != user.pk and not user.is_staff:
        raise DecisionError("forbidden", _claimed_by_other(request, user))
    with transaction.atomic():
        if not Request.objects.filter(pk=request_id, claimed_by_id=request.claimed_by_id).update(
            claimed_by=None, claimed_at=None
        ):
            raise DecisionError("conflict", "Someone else changed who has this request; reload and try again.")
        holder = request.claimed_by.get_username()
        request.claimed_by, request.claimed_at = None, None
        _record(AuditEvent.Action.REQUEST_RELEASED, request, user, {"from": holder})
    return request


arelease = database_sync_to_async(release)


def hand(request_id: str, *, user: User, to: object) -> Request:
    """Hand the open request to a user ("alice") or a group ("group:ops"): it shows as assigned to them and
    nobody holds it until one of them claims it. Its claimant, staff, or (unclaimed) anyone who may decide it."""
    request = _open_request(request_id)
    target = _checked_target(to)
    _check_may_act(request, user)
    if request.claimed_by_id not in (None, user.pk) and not user.is_staff:
        raise DecisionError("forbidden", _claimed_by_other(request, user))
    with transaction.atomic():
        if not Request.objects.filter(
            pk=request_id, status=RequestStatus.OPEN, claimed_by_id=request.claimed_by_id
        ).update(handed_to=target, claimed_by=None, claimed_at=None):
            raise DecisionError("conflict", "Someone else changed this request meanwhile; reload and try again.")
        holder = request.claimed_by.get_username() if request.claimed_by is not None else None
        request.handed_to, request.claimed_by, request.claimed_at = target, None, None
        _record(AuditEvent.Action.REQUEST_HANDED, request, user, {"to": target, "from": holder})
    return request


ahand = database_sync_to_async(hand)


def _checked_target(to: object) -> str:
    """``to`` as stored: an active user's name or ``group:<name>`` of an existing group; else a 400 naming it."""
    if not isinstance(to, str) or not to.strip():
        raise DecisionError("invalid", "Say whom to hand it to: a username or group:<name>.", {"to": ["required"]})
    to = to.strip()
    if to.startswith(GROUP_PREFIX):
        name = to[len(GROUP_PREFIX) :]
        if not Group.objects.filter(name=name).exists():
            raise DecisionError("invalid", f"There is no group {name!r}.", {"to": [f"no group {name!r}"]})
        return to
    users = get_user_model().objects.filter(is_active=True, **{get_user_model().USERNAME_FIELD: to})
    if not users.exists():
        raise DecisionError("invalid", f"There is no active user {to!r}.", {"to": [f"no active user {to!r}"]})
    return to
