"""The team's policies at the door: who may answer a request, and approvals counted towards a quorum.

``decisions.resolve_request``, the one door, calls these as it applies an answer (an approval is
stored inside the answer's transaction); the rules themselves (who, how many, four-eyes) are
``team/policies.py``'s. ``user`` is always the person answering, or None for
the console itself (expiry, a cancelled run, a stopping process), which no policy binds.
"""

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from approvals import events
from approvals.models import AuditEvent, Request, RequestApproval, RequestStatus
from approvals.review import answers
from approvals.review.errors import DecisionError, refusal_for_closed
from approvals.team import policies


@dataclass
class ApprovalRecorded:
    """An approval counted towards a policy's quorum: the request stays open until enough reviewers approve."""

    id: str
    approvals: list[str]  # usernames, in the order they approved
    quorum: int

    @property
    def message(self) -> str:
        return (
            f"Your approval is recorded: {len(self.approvals)} of {self.quorum} approvals. "
            f"The request stays open until {self.quorum} different reviewers approve."
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": "open",
            "approvals": self.approvals,
            "quorum": self.quorum,
            "message": self.message,
        }


# Set on a request read with ``WITH_APPROVED_ANY`` (hotpath.rows.get's ``exists``): whether anyone approved it
# yet (most never are: quorum 1), known from that one read.
APPROVED_ANY = "approved_any"
WITH_APPROVED_ANY = {APPROVED_ANY: (RequestApproval, "request")}


def approvals_so_far(request: Request) -> list[str]:
    """Who approved ``request`` so far, in order; no read when it was read ``WITH_APPROVED_ANY`` and has none."""
    if getattr(request, APPROVED_ANY, None) is False:
        return []
    return policies.approvals_of(request)


def check_policy(
    request: Request, user: User | None, *, ok: bool, approvals: list[str] | None = None
) -> policies.Rule | None:
    """The rule governing ``request``; a user it does not let answer is refused, and the attempt recorded.

    The console itself (no user: expiry, a cancelled run, a stopping process) is not bound by policies.
    ``approvals``: who approved it so far, when the caller read them (``approvals_so_far``).
    """
    if user is None:
        return None
    rule = policies.rule_for(request.tool, request.kind, fresh=True)
    facts = policies.facts(request, rule, approvals=approvals_so_far(request) if approvals is None else approvals)
    refused = policies.refusal(facts, policies.answerer_of(user, rule), ok=ok)
    if refused is None:
        return rule
    with transaction.atomic():
        events.record(
            AuditEvent.Action.REQUEST_ANSWER_REFUSED,
            actor=events.actor_name(user),
            actor_user=user,
            run=request.run,
            request=request,
            payload={"ok": ok, "rule": refused.rule, "reason": refused.message, "policy": rule.name},
        )
    raise DecisionError("forbidden", refused.message)


def other_values_approved(request: Request, data: dict[str, Any] | None) -> str | None:
    """Why an approval with ``data`` cannot join ``request``'s quorum (its first approver approved
    other values), or None when it can: the door's judgement, which a bulk dry run asks too."""
    first = RequestApproval.objects.filter(request=request).select_related("user").order_by("id").first()
    if first is None or answers.approved_values(first.data) == answers.approved_values(data):
        return None
    return (
        f"{first.user.get_username()} approved different values ({answers.approved_values(first.data) or 'none'}); "
        "approve the same values, or decline."
    )


def add_approval(request: Request, user: User, data: dict[str, Any] | None, comment: str | None) -> list[str]:
    """Store ``user``'s approval (inside the answer's transaction); returns every approver's username so far."""
    current = Request.objects.filter(pk=request.pk).values_list("status", flat=True).first()
    if current != RequestStatus.OPEN:
        request.refresh_from_db()
        raise refusal_for_closed(request)
    differs = other_values_approved(request, data)
    if differs is not None:
        raise DecisionError("invalid", differs)
    try:
        with transaction.atomic():
            RequestApproval.objects.create(request=request, user=user, data=data, comment=comment or "")
    except IntegrityError:
        raise DecisionError(
            "forbidden", "You already approved this; someone else must give the next approval."
        ) from None
    return policies.approvals_of(request)


def approval_recorded(
    request: Request,
    user: User,
    rule: policies.Rule,
    approvals: list[str],
    data: dict[str, Any] | None,
    comment: str | None,
    via: str | None = None,
) -> ApprovalRecorded:
    """Record an approval that did not complete the quorum; the answer the approver gets back.

    ``via``: the channel it came by (decisions.VIA), kept in the payload as the resolving answer keeps it."""
    events.record(
        AuditEvent.Action.REQUEST_APPROVAL_RECORDED,
        actor=events.actor_name(user),
        actor_user=user,
        run=request.run,
        request=request,
        payload={
            "comment": comment or "",
            "data": data,
            "approvals": approvals,
            "quorum": rule.quorum,
            "policy": rule.name,
            **({"via": via} if via is not None else {}),
        },
    )
    return ApprovalRecorded(id=request.id, approvals=approvals, quorum=rule.quorum)


def policy_notes(rule: policies.Rule | None, approvals: list[str] | None) -> dict[str, Any]:
    """Extra audit payload for a resolving answer: which policy applied and who approved (only when it matters)."""
    notes: dict[str, Any] = {}
    if rule is not None and rule.source != "default":
        notes["policy"] = rule.name
    if approvals is not None:
        notes["approvals"] = approvals
    return notes
