"""The one place a request changes state: open, answer, decline, cancel, expire.

Requests arrive from the console's own runs and, through the API, from remote
hosts (``open_host_request``, idempotent on the id, and ``withdraw_host_request``).

A request moves from open to resolved only here, by a conditional update
(``status = open`` in the WHERE clause), so two answers racing from two tabs, the
expiry timer and a cancelled run can never both win: the loser is told who won
and when, and the tool is resumed at most once (§10).
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, cast

import toolnexus
from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from toolnexus import Answer

from approvals import events, selectors
from approvals.hotpath import rows
from approvals.models import (
    ACTIVE_RUN_STATUSES,
    THIS_PROCESS_ID,
    AnswerReason,
    AuditEvent,
    DecidedBy,
    ExecutionState,
    OnTimeout,
    Request,
    RequestStatus,
    Run,
    run_state,
)
from approvals.models.team import stricter
from approvals.moments import iso_time, readable_time
from approvals.review import answers, forms, intake, quorum, signatures
from approvals.review.errors import DecisionError, refusal_for_closed
from approvals.review.quorum import ApprovalRecorded as ApprovalRecorded  # resolve_request may return one
from approvals.signing import keys
from approvals.signing.answers import SignedAnswer
from approvals.team import policies

# A refusal's reasons as resolve_request takes them. "expired" is the console's word alone, given only by
# expire_request (its timer, a late answer, the long-poll, a run's deadline), never by a person.
PERSON_REASONS = ("declined", "cancelled")
# The channels an answer comes by: a console page (its socket), the JSON API, a bulk answer (API or page).
Via = Literal["web", "api", "bulk"]
VIA: tuple[Via, ...] = ("web", "api", "bulk")
# What a reviewer may send instead of a plain decline (issue 36): both are refusals (ok false, reason declined),
# so a host written against the plain Answer never runs the tool for them. Their facts go in the refusal's data.
RESPONSES = ("respond", "request_changes")
MAX_MESSAGE_CHARS = 4000
# A comment goes to the team's record and, on a decline, to the model: it is held to the message's length.
MAX_COMMENT_CHARS = 4000
EXPIRED_IS_THE_CONSOLES = (
    'Only the console marks a request expired, when its deadline passes; decline it (reason "declined") '
    'or withdraw it (reason "cancelled") instead.'
)
STATUS_FOR_REASON = {
    "declined": RequestStatus.DECLINED,
    "cancelled": RequestStatus.CANCELLED,
    "expired": RequestStatus.EXPIRED,
}
ACTION_FOR_STATUS = {
    RequestStatus.ANSWERED: AuditEvent.Action.REQUEST_ANSWERED,
    RequestStatus.DECLINED: AuditEvent.Action.REQUEST_DECLINED,
    RequestStatus.CANCELLED: AuditEvent.Action.REQUEST_CANCELLED,
    RequestStatus.EXPIRED: AuditEvent.Action.REQUEST_EXPIRED,
}


def _real_user(user: User | None) -> User | None:
    return user if user is not None and user.is_authenticated else None


def parse_expiry(expires_at: str | None) -> datetime | None:
    """A request's ``expiresAt`` as an aware datetime in UTC (None when unset), or DecisionError saying why not."""
    if not expires_at:
        return None
    try:
        return intake.parse_expires_at(expires_at)
    except intake.IntakeError as exc:
        raise DecisionError("invalid", str(exc)) from None


def _default_expiry(kind: str) -> str | None:
    seconds = (settings.TOOLNEXUS.get("DEFAULT_EXPIRY_SECONDS") or {}).get(kind)
    if not seconds:
        return None
    return iso_time(timezone.now() + timedelta(seconds=seconds), timespec="milliseconds")


def argument_order(args: dict[str, Any], input_schema: dict[str, Any] | None) -> list[str]:
    """The names of ``args`` in the order a reviewer reads them: the tool's input schema's properties
    first (in the schema's order), then any others in the order they were sent.

    Stored beside the args (``Request.arg_order``) because PostgreSQL's jsonb does not keep key order.
    """
    properties = (input_schema or {}).get("properties") if isinstance(input_schema, dict) else None
    declared = [name for name in properties if name in args] if isinstance(properties, dict) else []
    return declared + [name for name in args if name not in declared]


def open_request(
    wire: toolnexus.Request,
    *,
    run_id: int | None = None,
    tool: str = "",
    args: dict[str, Any] | None = None,
    tool_input_schema: dict[str, Any] | None = None,
    actor: str | None = None,
    host: str = "",
    opened_by: User | None = None,
    resumable: bool = False,
    mark_run_waiting: bool = True,
) -> Request:
    """Persist a §10 Request as open (and its run as waiting); returns the model row. A run that has ended
    opens nothing (DecisionError ``not_open``).

    A request without ``expiresAt`` gets the per-kind default from settings, if any;
    the wire object is updated too, so the tool and the dashboard see one deadline.
    ``host`` and ``opened_by`` mark a request a remote host opened with a user's token.
    ``resumable`` marks a suspension the tool already returned (it survives a restart);
    an agent run opens its suspensions with ``mark_run_waiting=False`` because its other
    tool calls may still be running: it turns waiting when its loop blocks.
    """
    opened_by = _real_user(opened_by)
    actor = actor or events.actor_name(opened_by)
    options_refused = intake.reject_options_problem(wire.data)
    if options_refused:
        raise DecisionError("invalid", options_refused, {"data": [options_refused]})
    digest = signatures.checked_call_digest(tool, args)
    if not wire.expiresAt:
        wire.expiresAt = _default_expiry(wire.kind)
    expires_at = parse_expiry(wire.expiresAt)
    try:
        with transaction.atomic():
            request = Request(
                id=wire.id,
                run_id=run_id,
                kind=wire.kind,
                prompt=wire.prompt,
                url=wire.url,
                data=wire.data,
                expires_at_wire=wire.expiresAt,
                expires_at=expires_at,
                tool=tool,
                args=args or {},
                arg_order=argument_order(args or {}, tool_input_schema),
                tool_input_schema=tool_input_schema,
                host=host or "",
                opened_by=opened_by,
                resumable=resumable,
                call_digest=digest,
            )
            # Every suspension runs these: plain SQL built once (rows.py), as the ORM would write and read them.
            rows.insert_or_save(request, lambda: request.save(force_insert=True))
            if run_id is not None:
                # A run taken over meanwhile (its owner was declared dead: runs.recover_orphaned_runs) asks
                # nothing more: its suspension is not opened, so no answer is accepted that nobody would act on.
                waiting = None
                if mark_run_waiting:
                    waiting = run_state.wait_on_suspension(run_id, request.pk)
                    active = waiting is not None
                else:
                    active = Run.objects.select_for_update().filter(pk=run_id, status__in=ACTIVE_RUN_STATUSES).exists()
                # As this transaction left it: handed back by the wait's UPDATE, else read.
                request.run = (
                    _waiting_run(waiting, request)
                    if waiting is not None
                    else rows.get(Run, run_id, related=("started_by",))
                )
                if request.run is None:
                    raise Run.DoesNotExist(f"run {run_id} does not exist")
                if not active:
                    raise DecisionError(
                        "not_open", f"Run {run_id} has already ended ({request.run.status}); it asks nothing more."
                    )
            payload = {"kind": wire.kind, "prompt": wire.prompt, "expiresAt": wire.expiresAt, "call_digest": digest}
            if host:
                payload["host"] = host
            # The rows are as written (a new request has no approvals yet): the frame needs no read-back.
            as_written: dict[str, Any] = {"run": request.run, "request": request, "rows_current": True, "approvals": ()}
            events.record(
                AuditEvent.Action.REQUEST_OPENED,
                actor=actor,
                actor_user=opened_by,
                payload=payload,
                **as_written,
            )
            refusal = answers.credential_refusal(request)
            if refusal:
                # §10 trust boundary: input and question never collect credentials.
                events.record(
                    AuditEvent.Action.REQUEST_CREDENTIALS_REFUSED,
                    actor="system",
                    payload={"reason": refusal},
                    **as_written,
                )
    except IntegrityError as exc:
        raise DecisionError("conflict", f"A request with id {wire.id!r} already exists.") from exc
    return request


aopen_request = database_sync_to_async(open_request)


def _waiting_run(run: Run, request: Request) -> Run:
    """The run its wait's UPDATE handed back (``run_state.wait_on_suspension``), made whole for the frame: its starter
    (a user with only the username loaded; the rest is read if ever asked for), and its open requests when
    ``request`` is the only one."""
    if run.started_by_id is not None:
        username = get_user_model().USERNAME_FIELD
        run.started_by = get_user_model().from_db(
            run._state.db, ["id", username], [run.started_by_id, getattr(run, run_state.STARTER_NAME)]
        )
    if not getattr(run, run_state.OTHERS_OPEN):
        selectors.hold_open_requests(run, [request])
    return run


def _differences(
    row: Request,
    wire: toolnexus.Request,
    *,
    expires_at_sent: str | None,
    host: str,
    tool: str,
    args: dict[str, Any],
    user: User,
) -> list[str]:
    """The fields in which a repeated POST differs from the stored request (empty: the same request)."""
    wanted = {
        "kind": (row.kind, wire.kind),
        "prompt": (row.prompt, wire.prompt),
        "url": (row.url, wire.url),
        "data": (row.data, wire.data),
        "host": (row.host, host),
        "tool": (row.tool, tool),
        "args": (row.args or {}, args),
    }
    # Left out, it got the default; escalated or extended, the console moved it since.
    if expires_at_sent is not None and not row.escalations and not row.extended_seconds:
        wanted["expiresAt"] = (row.expires_at_wire, expires_at_sent)
    changed = [name for name, (stored, sent) in wanted.items() if stored != sent]
    if row.opened_by_id != user.pk:
        changed.insert(0, "opened by")
    return changed


def open_host_request(
    wire: toolnexus.Request, *, user: User, host: str = "", tool: str = "", args: dict[str, Any] | None = None
) -> tuple[Request, bool]:
    """Open a request a remote host sent; returns ``(row, created)``.

    Idempotent on the id, so a host may retry a POST it is unsure about: the same
    request again returns the stored one (``created`` False); a different request
    under a used id is a conflict naming the fields that differ.
    """
    args = args or {}
    expires_at_sent = wire.expiresAt
    try:
        return open_request(wire, tool=tool, args=args, host=host, opened_by=user), True
    except DecisionError as exc:
        if exc.code != "conflict":
            raise
    row = Request.objects.select_related("answered_by", "opened_by").get(pk=wire.id)
    wire.expiresAt = expires_at_sent
    changed = _differences(row, wire, expires_at_sent=expires_at_sent, host=host, tool=tool, args=args, user=user)
    if changed:
        raise DecisionError(
            "conflict",
            f"A different request with id {wire.id!r} already exists (it differs in {', '.join(changed)}). "
            "Send the same body to fetch it again, or use a new id.",
        )
    return row, False


aopen_host_request = database_sync_to_async(open_host_request)


def _checked_reason(reason: str | None) -> AnswerReason:
    """The reason of a refusal as given: declined or cancelled (a request expires only through expire_request)."""
    reason = reason or "declined"
    if reason == "expired":
        raise DecisionError("invalid", EXPIRED_IS_THE_CONSOLES, {"reason": [EXPIRED_IS_THE_CONSOLES]})
    if reason not in PERSON_REASONS:
        raise DecisionError("invalid", f"reason must be one of {', '.join(PERSON_REASONS)}; got {reason!r}.")
    return cast(AnswerReason, reason)  # one of PERSON_REASONS


@dataclass(frozen=True)
class Said:
    """What a reviewer said with a decline beyond its comment: a response (``RESPONSES``) with its message, and
    the key of a reject option; checked by ``check_said`` once the request is found open."""

    response: str | None = None
    message: str = ""
    option: str | None = None


def _validated(
    request: Request,
    ok: bool,
    data: object,
    form: object,
    reason: AnswerReason | None,
    comment: str | None,
    said: Said | None = None,
    rule: policies.Rule | None = None,
) -> tuple[dict[str, Any] | None, AnswerReason | None]:
    """The (data, reason) to store, or DecisionError saying what to fix (``reason`` is already checked).

    A refusal's data is ``{"comment": ...}`` or None, as toolnexus hosts read it; with ``said`` (a response, a
    message, a reject option) it gains those keys, present only when used (docs/api.md, "Declining")."""
    if ok:
        try:
            return answers.validated_answer_data(request, data=data, form=form, comment=comment), None
        except answers.AnswerInvalid as exc:
            raise DecisionError("invalid", exc.message, exc.field_errors) from None
    refusal: dict[str, Any] = {"comment": comment} if comment else {}
    if said is not None:
        if said.response:
            refusal["response"] = said.response
            refusal["message"] = said.message
        if said.option:
            refusal["option"] = _picked_option(request, said.option, rule)
    return (refusal or None), reason


def _invalid(field: str, message: str) -> DecisionError:
    return DecisionError("invalid", message, {field: [message]})


def check_comment(comment: object) -> None:
    """DecisionError (``field_errors.comment``) unless ``comment`` is text of at most MAX_COMMENT_CHARS (or None)."""
    if comment is not None and not isinstance(comment, str):
        raise _invalid("comment", "comment must be text, or left out.")
    if comment is not None and len(comment) > MAX_COMMENT_CHARS:
        raise _invalid(
            "comment", f"The comment is {len(comment)} characters long; at most {MAX_COMMENT_CHARS} are allowed."
        )


def check_said(*, ok: bool, reason: str | None, response: object, message: object, option: object) -> Said | None:
    """The reviewer's response, message and option as the door stores them (None when none was given), or
    DecisionError naming the field to fix. Respond and request changes are declines: they need a message."""
    for name, value in (("response", response), ("message", message), ("option", option)):
        if value is not None and not isinstance(value, str):
            raise _invalid(name, f"{name} must be a string, or left out.")
    response, message, option = (
        cast(str | None, response or None),
        cast(str, message or ""),
        cast(str | None, option or None),
    )
    if response is None and not message and option is None:
        return None
    if ok:
        raise _invalid("response", "A response, a message or a reject option goes with a decline (ok false).")
    if reason not in (None, "declined"):
        raise _invalid("reason", 'A response, a message or a reject option goes with reason "declined".')
    if response is not None and response not in RESPONSES:
        raise _invalid("response", f"response must be one of {', '.join(RESPONSES)}; got {response!r}.")
    if response is None and message:
        raise _invalid(
            "message",
            'A message goes with a response ("respond" or "request_changes"); a decline\'s own words are its comment.',
        )
    if response is not None and not message.strip():
        what = "the reply the model reads" if response == "respond" else "the changes the model should make"
        raise _invalid("message", f"Write a message: {what}.")
    if len(message) > MAX_MESSAGE_CHARS:
        raise _invalid(
            "message", f"The message is {len(message)} characters long; at most {MAX_MESSAGE_CHARS} are allowed."
        )
    if response == "respond" and option is not None:
        raise _invalid("option", "A reject option goes with a decline or a request for changes, not a reply.")
    return Said(response=response, message=message.strip(), option=option)


def check_response_offered(request: Request, response: str) -> None:
    """DecisionError (``field_errors.response``) unless ``request`` takes ``response`` (answers.responses_for):
    respond goes to an approval, an input or a question, request_changes to an approval, neither to a request
    asked from inside a running call, an authorization or a request for a secret."""
    if response in answers.responses_for(request):
        return
    if answers.asked_inside_a_call(request):
        why = (
            "This request was asked from inside a running call: the tool is already running, so there is no call "
            "to answer instead of or to change. Answer it or decline it."
        )
    elif response == "respond":
        why = f"A reply (respond) does not go to {_a_kind(request)}: answer it or decline it."
    else:
        instead = "respond or decline" if answers.responses_for(request) else "answer it or decline"
        why = f"Changes are asked of an approval, not of {_a_kind(request)}: {instead} instead."
    raise _invalid("response", why)


def _a_kind(request: Request) -> str:
    if answers.credential_refusal(request):
        return "a request that asks for a secret"
    return f"{'an' if request.kind[:1] in 'aeiou' else 'a'} {request.kind} request"


def _picked_option(request: Request, key: str, rule: policies.Rule | None) -> dict[str, str]:
    """The reject option ``key`` names, copied whole from the request's or its policy's (policies.reject_options_of),
    or DecisionError listing the keys there are. ``rule``: the policy the door already read, if it did."""
    rule = rule or policies.rule_for(request.tool, request.kind, fresh=True)
    options = policies.reject_options_of(request, rule)
    for option in options:
        if option["key"] == key:
            return dict(option)
    there = ", ".join(option["key"] for option in options) or "none: this request offers no reject options"
    raise _invalid("option", f"There is no reject option {key!r} for this request; the options are {there}.")


def _is_past_deadline(request: Request) -> bool:
    return request.expires_at is not None and request.expires_at <= timezone.now()


def _decided_by(request: Request, user: User | None, reason: str | None) -> tuple[User | None, dict[str, str]]:
    """Who the decision is credited to, and the audit payload's note when that is not the actor.

    The console withdraws a run's open requests when someone cancels the run: the request was
    cancelled by that person (stored as ``answered_by``), though the console did it for them.
    """
    person = _real_user(user)
    if person is None and reason == "cancelled" and request.run is not None:
        canceller = request.run.cancel_requested_by
        if canceller is not None:
            return canceller, {"cancelled_with_run_by": canceller.get_username()}
    return person, {}


def resolve_request(
    request_id: str,
    *,
    ok: bool,
    data: object = None,
    form: object = None,
    reason: str | None = None,
    comment: str | None = "",
    user: User | None = None,
    actor: str | None = None,
    via: Via | None = None,
    response: object = None,
    message: object = None,
    option: object = None,
    digest: object = None,
) -> Answer | ApprovalRecorded:
    """Apply an answer exactly once; returns the stored toolnexus Answer or raises DecisionError.

    ``form`` carries the dashboard's raw form values, converted here against the
    request's own schema; ``data`` is typed JSON from a program. An answer that
    arrives after ``expiresAt`` expires the request instead and is told so.

    A user the request's policy does not let answer is refused ("forbidden", recorded
    in the audit trail). Under a quorum above one, an approval that does not complete
    it returns ApprovalRecorded and the request stays open; any allowed decline
    declines at once. Reason "expired" is refused: a request expires only through ``expire_request``.

    ``via`` is the channel the answer came by (``VIA``), recorded in the event's payload; None for the
    console's own acts (a run withdrawing its requests, a stopped console).

    A decline may carry ``option`` (the key of one of the request's reject options, stored whole) and a
    ``response``: "respond" (``message`` is the reply the model reads instead of the tool's result) or
    "request_changes" (``message`` is what to change). Both are refusals: ok false, reason declined.

    ``digest``: the call digest the answerer was shown (``Request.call_digest``); an answer made for another call
    is refused ("conflict"), so a stale page or a replay never decides what a request asks now. The stored answer
    carries the console's signature (``signatures.answer_signature``), written in the same UPDATE.
    """
    ok = bool(ok)
    check_comment(comment)
    checked = None if ok else _checked_reason(reason)  # an approval has no reason
    said = {"response": response, "message": message, "option": option}
    return _resolve(
        request_id,
        ok=ok,
        data=data,
        form=form,
        reason=checked,
        comment=comment,
        user=user,
        actor=actor,
        via=via,
        said_asked=said if any(value is not None for value in said.values()) else None,
        digest=digest,
    )


aresolve_request = database_sync_to_async(resolve_request)


# What an answer reads of its request, in one statement built once (hotpath/rows.py): who answered, opened and
# claimed it, and its run with who started and who cancelled it.
_ANSWER_READS = ("answered_by", "opened_by", "claimed_by", "run__started_by", "run__cancel_requested_by")


def _resolve(
    request_id: str,
    *,
    ok: bool,
    data: object,
    form: object,
    reason: AnswerReason | None,
    comment: str | None,
    user: User | None,
    actor: str | None,
    via: Via | None = None,
    by_timeout: bool = False,
    notes: dict[str, Any] | None = None,
    deadline_read: datetime | None = None,
    said_asked: dict[str, object] | None = None,
    digest: object = None,
) -> Answer | ApprovalRecorded:
    """resolve_request with its reason checked (or, with ``by_timeout``, expire_request's outcome: "expired",
    or an approval with the request's defaults). ``notes``: more of the event's payload (the outcome on expiry).
    ``deadline_read``: the passed deadline the timeout acts on; the decision is stored only while the request
    still has it, so an extension or an escalation committed meanwhile stands."""
    request = rows.get(Request, request_id, related=_ANSWER_READS, exists=quorum.WITH_APPROVED_ANY)
    if request is None:
        raise DecisionError("not_found", f"There is no request with id {request_id!r}.")
    if not request.is_open:
        raise refusal_for_closed(request)
    if deadline_read is not None and request.expires_at != deadline_read:
        raise DecisionError("conflict", "Its deadline moved while the timeout acted on it.")
    if not by_timeout and _is_past_deadline(request) and not _late_refusal_stands(request, ok):
        # Its policy decides what the passed deadline does; escalated or kept open, the answer still counts.
        expire_request(request_id)
        request = rows.get(Request, request_id, related=_ANSWER_READS, exists=quorum.WITH_APPROVED_ANY)
        if request is None or not request.is_open or _is_past_deadline(request):
            if request is None:
                raise DecisionError("not_found", f"There is no request with id {request_id!r}.")
            raise refusal_for_closed(request)
    signatures.check_seen_digest(request, digest)
    # What a decline said beyond its comment, checked once the request is known to be open (a stale one is a 409).
    said = check_said(ok=ok, reason=reason, **said_asked) if said_asked else None
    if said is not None and said.response is not None:
        check_response_offered(request, said.response)
    # Who approved so far, read once for the verdict and the event's frame (the console's own acts need neither).
    approved_so_far = quorum.approvals_so_far(request) if _real_user(user) is not None else None
    rule = quorum.check_policy(request, _real_user(user), ok=ok, approvals=approved_so_far)
    data, reason = _validated(request, ok, data, form, reason, comment, said, rule)
    status = RequestStatus.ANSWERED if ok else STATUS_FOR_REASON[cast(str, reason)]  # a refusal has its reason
    decided_by, cancelled_with_run_by = _decided_by(request, user, reason)
    who_decided = DecidedBy.TIMEOUT if by_timeout else DecidedBy.PERSON if decided_by is not None else DecidedBy.CONSOLE
    keys.register_current_key_once()  # outside the answer's transaction: a rollback never takes the key away
    now = timezone.now()
    approvals: list[str] | None = None  # the approvers, once this answer's approval is counted (quorum > 1)
    with transaction.atomic():
        if ok and rule is not None and rule.quorum > 1:
            reviewer = cast(User, _real_user(user))  # a rule binds only a user (check_policy)
            approvals = quorum.add_approval(request, reviewer, data, comment)
            if len(approvals) < rule.quorum:
                return quorum.approval_recorded(request, reviewer, rule, approvals, data, comment, via)
        answered: dict[str, Any] = {
            "status": status,
            "answer_ok": ok,
            "answer_data": data if data is not None else None,
            "answer_reason": reason,
            "comment": comment or "",
            "answered_at": now,
            "decided_by": who_decided,
            # Signed here, so the one UPDATE that stores the answer stores its signature (no statement of its own).
            "answer_signature": signatures.answer_signature(
                request, ok=ok, data=data, reason=reason, decided_by=decided_by, who_decided=who_decided, at=now
            ),
        }
        # One statement built once (hotpath/rows.py); who decided is written as its id.
        columns = {**answered, "answered_by_id": decided_by.pk if decided_by is not None else None}
        if deadline_read is not None:  # the timeout's: only while the deadline it acts on stands (rare, not hot)
            stored = Request.objects.filter(pk=request_id, status=RequestStatus.OPEN, expires_at=deadline_read).update(
                **columns
            )
        else:
            stored = rows.update(Request, request_id, columns, only_if=("status", (RequestStatus.OPEN,)))
        if not stored:
            request.refresh_from_db()
            raise refusal_for_closed(request)
        # The row was open, and nothing but an answer changes an open request: it now holds what was read plus this.
        for name, value in answered.items():
            setattr(request, name, value)
        request.answered_by = decided_by
        if request.run_id is not None:
            resumed = run_state.resume_unless_blocked(request.run_id)
            if request.resumable and resumed is not None and getattr(resumed, run_state.CLAIMED_HERE):
                # As the claim left the row (a tool run's one resumable request): its waiter takes it from here.
                request.resumed_by = THIS_PROCESS_ID
                if ok:  # the claim marked its tool executing (run_state.claim_resume_here), as the frame shows
                    request.execution_state, request.execution_at = ExecutionState.EXECUTING, now
            request.run = _run_as_left(request.run, resumed)
        events.record(
            ACTION_FOR_STATUS[status],
            # A request withdrawn because someone cancelled its run is that person's act, done for them.
            actor=cancelled_with_run_by.get("cancelled_with_run_by") or actor or events.actor_name(user),
            actor_user=decided_by if cancelled_with_run_by else _real_user(user),
            run=request.run,
            request=request,
            payload={
                "ok": ok,
                "reason": reason,
                "comment": comment or "",
                "data": data,
                # What the approval edited, in the words' own terms, so the sealed trail says it (audit.pages).
                **({"changes": answers.edited_args(request, data)} if ok and request.kind == "approval" else {}),
                **quorum.policy_notes(rule, approvals),
                **cancelled_with_run_by,
                **({"via": via} if via is not None else {}),
                **_said_notes(data if said is not None else None),
                "decided_by": who_decided,
                "signature": answered["answer_signature"],
                **(notes or {}),
            },
            rows_current=True,
            approvals=approvals if approvals is not None else _approvals_standing(rule, approved_so_far),
        )
    return SignedAnswer(id=request.id, ok=ok, data=data, reason=reason, signature=answered["answer_signature"])


def _said_notes(data: dict[str, Any] | None) -> dict[str, Any]:
    """A decline's response, message and reject option, as the audit event's payload records them."""
    if not data:
        return {}
    return {key: data[key] for key in ("response", "message", "option") if key in data}


def _late_refusal_stands(request: Request, ok: bool) -> bool:
    """A person's refusal that arrives after the deadline, before the timer acted, stands where the timeout would
    approve (``apply_defaults``): it is the stricter outcome, and a late "no" must never turn into a "yes"."""
    if ok:
        return False
    rule = policies.rule_for(request.tool, request.kind, fresh=True)
    return on_timeout_of(request, rule) == OnTimeout.APPLY_DEFAULTS


def _approvals_standing(rule: policies.Rule | None, read: list[str] | None) -> list[str] | None:
    """The approvers the answer's frame shows, when what was read before its transaction still stands: under
    a quorum of one nobody adds an approval (quorum.add_approval runs only above one). Otherwise None: the
    frame reads them after the commit (a concurrent approver's may have joined)."""
    return read if rule is not None and rule.quorum <= 1 else None


def _run_as_left(read: Run | None, resumed: Run | None) -> Run | None:
    """The answered request's run as the answer's transaction left it, for the event's frame.

    Resumed: the row its UPDATE returned, with the starter read before (a run's starter never changes),
    and no open request (the update's condition). Otherwise (still blocked, or not waiting) read again.
    """
    if resumed is None or read is None or read.started_by_id != resumed.started_by_id:
        run_id = resumed.pk if resumed is not None else read.pk if read is not None else None
        return rows.get(Run, run_id, related=("started_by",)) if run_id is not None else None
    resumed.started_by = read.started_by
    selectors.hold_open_requests(resumed, ())
    return resumed


def withdraw_host_request(request_id: str, *, user: User) -> Answer:
    """The host that opened a request takes it back: ok=false, reason cancelled (the tool stops waiting)."""
    opener = Request.objects.filter(pk=request_id).values_list("opened_by_id", flat=True).first()
    if opener is None and not Request.objects.filter(pk=request_id).exists():
        raise DecisionError("not_found", f"There is no request with id {request_id!r}.")
    if opener != user.pk:
        raise DecisionError(
            "forbidden",
            "Only the host that opened this request can withdraw it; reviewers answer or decline it instead.",
        )
    answer = resolve_request(request_id, ok=False, reason="cancelled", user=user, via="api")
    assert isinstance(answer, Answer), "only an approval is counted towards a quorum; a decline resolves at once"
    return answer


awithdraw_host_request = database_sync_to_async(withdraw_host_request)


def on_timeout_of(request: Request, rule: policies.Rule) -> str:
    """What ``request``'s passed deadline does (models.OnTimeout): its policy's choice, or the request's own
    ``data.on_timeout`` when that is stricter. A tool or a host can never approve its own request by waiting."""
    asked = request.data.get("on_timeout") if isinstance(request.data, dict) else None
    return stricter(rule.on_timeout, asked)


# The event's "note" (and an expiry's comment) when the timeout did not simply decline.
DEFAULTS_DID_NOT_FIT = "defaults did not fit"
KEPT_OPEN = "deadline passed, kept open"
RUN_NOT_KEPT_OPEN = "not kept open: its run has a timeout, and would wait without end"


def _run_would_wait_without_end(request: Request) -> bool:
    """Whether keeping ``request`` open would leave its run waiting with nothing to end the wait: a run with a
    timeout under human-aware time, whose timeout no longer counts the wait (runs/clock.py). Its request
    declines instead; a host's request, or a run without a timeout or on the wall clock, may be kept open."""
    run = request.run
    return run is not None and run.timeout is not None and not run.timeout_counts_waiting


def _timeout_decides(
    request_id: str,
    *,
    ok: bool,
    data: dict[str, Any] | None,
    notes: dict[str, Any],
    deadline_read: datetime | None = None,
) -> bool:
    """The timeout's decision, through the door: expired (a refusal) or approved with the request's defaults.
    ``deadline_read``: the passed deadline it acts on (None when the run timed out: any deadline)."""
    reason: AnswerReason | None = None if ok else "expired"
    comment = notes.get("note", "") if not ok else ""
    try:
        _resolve(
            request_id,
            ok=ok,
            data=data,
            form=None,
            reason=reason,
            comment=comment,
            user=None,
            actor="system",
            by_timeout=True,
            notes=notes,
            deadline_read=deadline_read,
        )
    except DecisionError:
        return False
    return True


def _too_soon_for_defaults(request: Request) -> str | None:
    """Why ``request`` may not be approved with its defaults yet (None when it may): people must have had
    ``CONSOLE_DEFAULTS_AFTER_MINUTES`` since it opened, so a tool or a host cannot approve its own request by
    sending a deadline that has passed, or is seconds away."""
    minutes = float(settings.TOOLNEXUS.get("DEFAULTS_AFTER_MINUTES", 5))
    open_for = timezone.now() - request.created_at
    if open_for >= timedelta(minutes=minutes):
        return None
    return f"defaults not applied: open {int(open_for.total_seconds())} s, under the {minutes:g} min people must have"


def _defaults_fitting(request: Request) -> tuple[dict[str, Any] | None] | None:
    """``(data,)`` to approve ``request`` with when its deadline passes under ``apply_defaults``, or None when its
    defaults do not fit: an approval approves as asked (no data); an input takes its schema's ``default`` values,
    validated as a person's answer would be; a question or an authorization has no defaults."""
    if request.kind == "approval":
        data: dict[str, Any] | None = None
    elif request.kind == "input":
        schema = forms.request_schema(request.data)
        properties = schema.get("properties") if isinstance(schema, dict) else None
        data = (
            {name: prop["default"] for name, prop in properties.items() if isinstance(prop, dict) and "default" in prop}
            if isinstance(properties, dict)
            else {}
        )
    else:
        return None
    try:
        return (answers.validated_answer_data(request, data=data, comment=""),)
    except answers.AnswerInvalid:
        return None


def _keep_open(request: Request) -> bool:
    """``keep_open``: the deadline passes and the request stays answerable; audited once. Its parsed deadline is
    cleared so nothing expires it later by it (its ``expiresAt`` as sent stays, to show when it passed)."""
    with transaction.atomic():
        if not Request.objects.filter(pk=request.pk, status=RequestStatus.OPEN, expires_at=request.expires_at).update(
            expires_at=None
        ):
            return False
        request.expires_at = None
        events.record(
            AuditEvent.Action.REQUEST_KEPT_OPEN,
            actor="system",
            run=request.run,
            request=request,
            payload={"on_timeout": OnTimeout.KEEP_OPEN.value, "note": KEPT_OPEN, "expiresAt": request.expires_at_wire},
        )
    return False


def _newly_allowed(rule: policies.Rule, *, first: bool) -> dict[str, list[str]]:
    if not first:
        return {"added_users": [], "added_groups": []}
    users, groups = policies.answerers(rule, escalated=True)
    return {"added_users": sorted(users - rule.users), "added_groups": sorted(groups - rule.groups)}


def _escalate(request: Request, rule: policies.Rule) -> bool:
    """``escalate``: the policy's fallback answerers may answer it too from now on (``Request.escalations``, read by
    policies.facts), they are told (the webhook, a dashboard frame), and the deadline moves by the policy's step."""
    level = request.escalations + 1
    deadline = max(cast(datetime, request.expires_at), timezone.now()) + timedelta(minutes=rule.escalation_step_minutes)
    wire = iso_time(deadline, timespec="milliseconds")
    with transaction.atomic():
        moved = Request.objects.filter(
            pk=request.pk, status=RequestStatus.OPEN, escalations=request.escalations, expires_at=request.expires_at
        ).update(escalations=F("escalations") + 1, expires_at=deadline, expires_at_wire=wire)
        if not moved:
            return False
        request.escalations, request.expires_at, request.expires_at_wire = level, deadline, wire
        events.record(
            AuditEvent.Action.REQUEST_ESCALATED,
            actor="system",
            run=request.run,
            request=request,
            payload={
                "on_timeout": OnTimeout.ESCALATE.value,
                "escalations": level,
                "max_escalations": rule.max_escalations,
                "to": sorted(rule.fallback_users) + [policies.group_name(g) for g in sorted(rule.fallback_groups)],
                "expiresAt": wire,
                "note": f"escalated until {readable_time(deadline)}",
                # Who may answer now and could not before (frames.count_change counts it for them).
                **_newly_allowed(rule, first=level == 1),
            },
        )
    return False


def expire_request(request_id: str, *, run_timed_out: bool = False) -> bool:
    """The one place a request's deadline passing is acted on, for every caller: the console's expiry timer, an
    answer that arrives late, the API's long-poll, and a run whose deadline passed while it waited.

    A request is due when its own ``expiresAt`` has passed or, with ``run_timed_out``, when the run waiting on it
    ran out of time (its tool can take no answer any more: that always declines). What a passed ``expiresAt``
    does is its policy's ``on_timeout`` (``on_timeout_of``): decline (expired), keep it open, escalate it to the
    policy's fallback answerers, or approve it with its defaults. True when this call resolved it; False when it
    is not due, already resolved (whichever decision was stored first stands), or escalated or kept open.
    """
    request = Request.objects.filter(pk=request_id, status=RequestStatus.OPEN).first()
    if request is None or not (run_timed_out or _is_past_deadline(request)):
        return False
    outcome = OnTimeout.DECLINE.value
    notes: dict[str, Any] = {}
    if not run_timed_out:
        rule = policies.rule_for(request.tool, request.kind, fresh=True)
        outcome = on_timeout_of(request, rule)
        notes = {"on_timeout": outcome}
        if outcome == OnTimeout.KEEP_OPEN:
            if not _run_would_wait_without_end(request):
                return _keep_open(request)
            notes["note"] = RUN_NOT_KEPT_OPEN
        if outcome == OnTimeout.ESCALATE:
            if request.escalations < rule.max_escalations:
                return _escalate(request, rule)
            notes["escalations"] = request.escalations
        if outcome == OnTimeout.APPLY_DEFAULTS:
            too_soon = _too_soon_for_defaults(request)
            defaults = _defaults_fitting(request) if too_soon is None else None
            if defaults is not None:
                return _timeout_decides(
                    request_id, ok=True, data=defaults[0], notes=notes, deadline_read=request.expires_at
                )
            notes["note"] = too_soon or DEFAULTS_DID_NOT_FIT
    deadline_read = None if run_timed_out else request.expires_at
    return _timeout_decides(request_id, ok=False, data=None, notes=notes, deadline_read=deadline_read)


aexpire_request = database_sync_to_async(expire_request)


def expire_due_requests() -> float | None:
    """Expire every open request past its deadline (the server's own timer: no dashboard needed).

    Returns the seconds until the next deadline, or None when no open request has one.
    """
    now = timezone.now()
    for request_id in Request.objects.filter(status=RequestStatus.OPEN, expires_at__lte=now).values_list(
        "pk", flat=True
    ):
        expire_request(request_id)
    upcoming = (
        Request.objects.filter(status=RequestStatus.OPEN, expires_at__gt=now)
        .order_by("expires_at")
        .values_list("expires_at", flat=True)
        .first()
    )
    return (upcoming - now).total_seconds() if upcoming is not None else None


aexpire_due_requests = database_sync_to_async(expire_due_requests)
