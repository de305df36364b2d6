"""The one place a ``Request``, an ``Answer`` or a ``Run`` becomes JSON, and what one viewer may do with it.

Request fields leave the process in toolnexus' wire keys (``expiresAt``, ``ok``, ``reason``); console
fields sit beside them. Each view carries the policy facts (who may answer, who may cancel) that are the
same for every viewer; ``for_user`` and ``run_for_user`` add what one viewer may do, last.
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NotRequired, TypedDict, cast

from toolnexus import Answer

from approvals.models import AnswerReason, AuditEvent, Request, Run, RunStatus
from approvals.moments import iso_time, readable_time
from approvals.review import answers, deadlines, execution, outcomes, signatures
from approvals.selectors import latest_request, open_requests_of
from approvals.signing.answers import SignedAnswer
from approvals.signing.keys import PublishedKey
from approvals.team import policies


class WireAnswer(TypedDict):
    """A toolnexus Answer in its wire keys (``wire_answer``)."""

    id: str
    ok: bool
    data: NotRequired[dict[str, Any]]
    reason: NotRequired[str]
    # The console's signature (approvals/signing/answers.py): a top-level key beside toolnexus' own, never in data.
    signature: NotRequired[dict[str, Any]]


def wire_answer(answer: Answer) -> WireAnswer:
    """A toolnexus Answer in its wire keys; optional keys are left out when unset. A SignedAnswer's signature is
    the top-level ``signature`` key."""
    wire: WireAnswer = {"id": answer.id, "ok": answer.ok}
    if answer.data is not None:
        wire["data"] = answer.data
    if answer.reason is not None:
        wire["reason"] = answer.reason
    if isinstance(answer, SignedAnswer) and answer.signature:
        wire["signature"] = answer.signature
    return wire


def answer_wire(request: Request) -> WireAnswer | None:
    """The stored Answer of a request in wire keys, or None while it is open."""
    if request.answer_ok is None:
        return None
    reason = cast(AnswerReason | None, request.answer_reason or None)  # as the Answer carried it
    return wire_answer(
        SignedAnswer(request.id, request.answer_ok, request.answer_data, reason, request.answer_signature)
    )


def signing_keys_view(published: Sequence[PublishedKey]) -> dict[str, Any]:
    """``GET /api/v1/signing-keys``: the keys a host pins to verify answers (signing/keys.published_keys)."""
    return {
        "keys": [
            {
                "kid": key.kid,
                "alg": key.alg,
                "public_key": key.public_key,
                "pem": key.pem,
                "current": key.current,
                "created_at": iso_time(key.created_at) if key.created_at else None,
            }
            for key in published
        ]
    }


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
        decided_by=request.decided_by_of,
        said=outcomes.said_of(request.answer_data) if outcome == outcomes.DECLINED else None,
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
        # The digest of the call it guards (console_remote.call_digest): an answer may say it saw this one.
        "call_digest": signatures.request_call_digest(request),
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
        # Who decided it (models.DecidedBy: person, timeout, console), None while open; ``answered_by`` names the person.
        "decided_by": request.decided_by_of,
        # Its deadline passed and its policy escalated it this many times (its fallback answerers may answer), or
        # kept it open (``expiresAt`` is when the deadline passed); review/decisions.expire_request.
        "escalations": request.escalations,
        "kept_open": request.is_open and request.expires_at is None and bool(request.expires_at_wire),
        # How far its deadline moved, how far it may still move, and whether its reminder went out (review/deadlines.py).
        "deadline": deadlines.extension_view(request),
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
        view["form"] = answers.form_for(request, none_approved=approvals is not None and not approvals)
    # What a reviewer may answer instead of running the tool ("respond", "request_changes"); [] once resolved.
    view["responses"] = answers.responses_for(request) if request.is_open else []
    # What became of it, in words ("Declined by bob: too large"); None while open.
    view["decision"] = decision_view(request, view["policy"]["approvals"])
    view["deadline_note"] = deadline_note(request, view["kept_open"])
    # What became of the tool after an ok answer (executing, succeeded, failed; "unreported" for a host's), or None.
    view["execution"] = execution.execution_view(request)
    return view


def deadline_note(request: Request, kept_open: bool) -> str | None:
    """What its passed deadline did to an open request, in words: "Escalated to bob until 20:14 UTC" or
    "Deadline passed at 20:14 UTC, kept open"; None when nothing did (review/decisions.expire_request)."""
    if not request.is_open:
        return None
    if kept_open:
        passed = intake_time(request.expires_at_wire)
        return f"Deadline passed at {readable_time(passed)}, kept open" if passed else "Deadline passed, kept open"
    if request.escalations and request.expires_at is not None:
        rule = policies.rule_for(request.tool, request.kind)
        names = sorted(rule.fallback_users) + [policies.group_name(g) for g in sorted(rule.fallback_groups)]
        to = ", ".join(names) or "the fallback answerers"
        return f"Escalated to {to} until {readable_time(request.expires_at)}"
    return None


def intake_time(wire: str | None) -> datetime | None:
    """An ``expiresAt`` as stored, parsed (None when unset or unreadable)."""
    try:
        return datetime.fromisoformat(wire.replace("Z", "+00:00")) if wire else None
    except ValueError:
        return None


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
        "timeout_counts_waiting": run.timeout_counts_waiting,
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


# A tool run a refusal ended (outcomes.REFUSALS) reads as that refusal, not as "failed": it ended with one of these.
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
        if decision is not None and decision["outcome"] in outcomes.REFUSALS:
            return (decision["outcome"] if run.status == RunStatus.FAILED else label), decision["text"]
    return label, output


def _cancel_facts(run: Run, open_requests: Sequence[Request] | None) -> policies.RunFacts:
    return policies.run_facts(run, open_requests_of(run) if open_requests is None else open_requests)


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


# -- what one viewer sees ---------------------------------------------------------------------


def for_user(view: dict[str, Any] | None, viewer: policies.Viewer) -> dict[str, Any] | None:
    """A request view plus what ``viewer`` (a policies.Viewer) may do with it: may_answer, may_decline, why_not, ...

    The shared view (and the event payload every socket receives) stays the same
    for everyone; this per-viewer step runs last, in the consumer, page or API call.
    """
    if not view or not isinstance(view.get("policy"), dict):
        return view
    return {**view, "policy": {**view["policy"], **policies.viewer_bits(view["policy"], viewer, view["status"])}}


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
