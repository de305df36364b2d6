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
from approvals.moments import readable_time
from approvals.review.errors import DecisionError, refusal_for_closed
from approvals.team import policies


def _open_request(request_id: str) -> Request:
    try:
        request = Request.objects.select_related("claimed_by", "run").get(pk=request_id)
    except Request.DoesNotExist:
        raise DecisionError("not_found", f"There is no request with id {request_id!r}.") from None
    if not request.is_open:
        raise refusal_for_closed(request)
    return request


def _check_may_act(request: Request, user: User, *, to_finish: bool) -> None:
    """Staff may; otherwise claiming is for whoever may approve the request (the claim says they will finish
    it), handing for whoever may at least decline it (a starter may hand their own to a reviewer)."""
    if user.is_staff:
        return
    refused = policies.refusal(policies.facts(request), policies.viewer_of(user), ok=to_finish)
    if refused is not None:
        raise DecisionError("forbidden", refused.message)


def _claimed_by_other(request: Request, user: User) -> str:
    holder = request.claimed_by.get_username() if request.claimed_by is not None else "someone"
    since = readable_time(request.claimed_at) if request.claimed_at else "earlier"
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
    it, unless ``user`` is staff, or it was handed to ``user`` (or their group) and its holder is not among
    those it was handed to."""
    request = _open_request(request_id)
    _check_may_act(request, user, to_finish=True)
    if request.claimed_by_id == user.pk:
        return request
    held = Request.objects.filter(pk=request_id, status=RequestStatus.OPEN)
    if user.is_staff or _may_take_from_holder(request, user):
        taken = held.filter(claimed_by_id=request.claimed_by_id)  # unchanged since read, or someone was quicker
    else:
        taken = held.filter(Q(claimed_by__isnull=True) | Q(claimed_by=user))
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


def _may_take_from_holder(request: Request, user: User) -> bool:
    """A request handed to a user or group may be taken back by them from someone else who picked it up,
    but those it was handed to do not take it from each other."""
    if not request.handed_to or request.claimed_by is None:
        return False
    if not policies.names_viewer(request.handed_to, policies.viewer_of(user)):
        return False
    return not policies.names_viewer(request.handed_to, policies.viewer_of(request.claimed_by))


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
    _check_may_act(request, user, to_finish=False)
    if request.claimed_by_id not in (None, user.pk) and not user.is_staff:
        raise DecisionError("forbidden", _claimed_by_other(request, user))
    target = _checked_target(to)
    if target == user.get_username():
        raise DecisionError("invalid", "You cannot hand a request to yourself: claim it instead.", {"to": ["is you"]})
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
    if to.startswith(policies.GROUP_PREFIX):
        name = to.removeprefix(policies.GROUP_PREFIX)
        if not Group.objects.filter(name=name).exists():
            raise DecisionError("invalid", f"There is no group {name!r}.", {"to": [f"no group {name!r}"]})
        return to
    users = get_user_model().objects.filter(is_active=True, **{get_user_model().USERNAME_FIELD: to})
    if not users.exists():
        raise DecisionError("invalid", f"There is no active user {to!r}.", {"to": [f"no active user {to!r}"]})
    return to
