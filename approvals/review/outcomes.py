"""What became of a resolved request, in the words a person reads everywhere: cards, the run page,
the transcript, the audit page and its export ("Declined by bob: too large", "Expired at 18:31 UTC",
"Approved by demo with amount 33 → 4"), a time written as everywhere else (approvals.moments).

What a refusal means is here too: which outcomes refuse (``REFUSALS``), and what the refused tool call
returns (``refused_output``: the §10 wording ``declined/expired: <prompt>``, which these words go beside).
"""

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from approvals.models import AuditEvent, DecidedBy, RequestStatus
from approvals.moments import readable_time

APPROVED, ANSWERED, DECLINED, CANCELLED, EXPIRED = "approved", "answered", "declined", "cancelled", "expired"
OUTCOMES = (APPROVED, ANSWERED, DECLINED, CANCELLED, EXPIRED)
# The outcomes that refuse a request (its Answer is ok=false): the tool is not run again with an answer.
REFUSALS = (DECLINED, CANCELLED, EXPIRED)
# Who a decision is credited to when no person made it: the expiry timer, a stopping process, a script.
THE_CONSOLE = "the console"
# A comment longer than this is cut in the one-line text; the decision's "comment" keeps it whole.
TEXT_COMMENT_CHARS = 120
# An edited value (or argument name) longer than this is cut in the one-line text, and at most this many
# edits are named there ("and 2 more changes"); the decision's "changes" keep every one whole.
TEXT_VALUE_CHARS = 40
TEXT_CHANGES = 4

_OUTCOME_OF_STATUS: dict[str, str] = {
    RequestStatus.DECLINED: DECLINED,
    RequestStatus.CANCELLED: CANCELLED,
    RequestStatus.EXPIRED: EXPIRED,
}
_OUTCOME_OF_ACTION: dict[str, str] = {
    AuditEvent.Action.REQUEST_DECLINED: DECLINED,
    AuditEvent.Action.REQUEST_CANCELLED: CANCELLED,
    AuditEvent.Action.REQUEST_EXPIRED: EXPIRED,
}
_VERB = {APPROVED: "Approved", ANSWERED: "Answered", DECLINED: "Declined", CANCELLED: "Cancelled"}


def refused_output(
    prompt: str,
    *,
    expired_at: datetime | None = None,
    note: str | None = "",
    declined_by: str | None = None,
    said: Mapping[str, Any] | None = None,
    tool: str = "",
) -> str:
    """§10: a tool call whose request was refused (declined, cancelled or expired) returns this as its error
    result, without running the tool again; toolnexus' own client writes the same words. An expiry (``expired_at``
    given) goes on with what happened, after the exact prefix: "declined/expired: <prompt> (expired at 20:14 UTC,
    nobody answered)"; an expiry is never worded as a person's refusal.

    A decline (``declined_by``: who, or None for the console) goes on with who and why (``decline_words``), from
    the refusal's data ``said``; a reply ("respond") is not a refusal to the model: ``respond_words``. A withdrawal
    keeps the prefix alone: its run is ending."""
    if said and said.get("response") == RESPOND:
        return respond_words(said, by=declined_by, tool=tool)
    text = f"declined/expired: {prompt}"
    if expired_at is not None:
        text += f" (expired at {readable_time(expired_at)}, {expiry_words(expired_at, note)})"
    elif declined_by is not None or said is not None:
        text += " " + decline_words(said or {}, by=declined_by, tool=tool)
    return text


# What a reviewer may answer instead of a plain decline (review/decisions.RESPONSES), as the refusal's data says.
RESPOND, REQUEST_CHANGES = "respond", "request_changes"
# After a decline's reasons: what the model should do next, worded so it does not simply retry the same call.
DECLINE_ADVICE = "Do not make the same call again; follow the reviewer's reason, or ask the user how to go on."
PLAIN_DECLINE_ADVICE = "Do not make the same call again; ask the user how to go on."
CHANGES_ADVICE = "Do not make the same call again; call {tool} again only with these changes, or ask the user."


def _model_line(text: object) -> str:
    """Words for the model on one line, whole (the model reads all of a reviewer's message)."""
    return " ".join(str(text or "").split())


def _reasons(said: Mapping[str, Any], *, with_message: bool) -> str:
    """A decline's reasons in the order the model reads them: the option's label and text, the message (request
    changes), then the comment in quotes: 'Too large. Refunds above 100 EUR need a manager. "split it"'."""
    picked = said.get("option")
    option: Mapping[str, Any] = picked if isinstance(picked, Mapping) else {}
    parts = [_model_line(option.get("label")), _model_line(option.get("text"))]
    if with_message:
        parts.append(_model_line(said.get("message")))
    plain = [part.rstrip(". ") for part in parts if part.rstrip(". ")]
    comment = _model_line(said.get("comment"))
    return ". ".join(plain + ([f'"{comment}"'] if comment else []))


def decline_words(said: Mapping[str, Any], *, by: str | None, tool: str = "") -> str:
    """What the model reads after §10's ``declined/expired: <prompt>`` when a person declined: who and why, then
    what to do. "(declined by bob: Too large. Refunds above 100 EUR need a manager. "split it") Do not make the
    same call again; ..."; request changes: "(bob requested changes: Use EUR) Do not make the same call again;
    call refund again only with these changes, or ask the user."."""
    who = by or THE_CONSOLE
    if said.get("response") == REQUEST_CHANGES:
        advice = CHANGES_ADVICE.format(tool=tool or "the tool")
        return f"({who} requested changes: {_reasons(said, with_message=True)}) {advice}"
    reasons = _reasons(said, with_message=False)
    if not reasons:
        return f"(declined by {who}) {PLAIN_DECLINE_ADVICE}"
    return f"(declined by {who}: {reasons}) {DECLINE_ADVICE}"


def respond_words(said: Mapping[str, Any], *, by: str | None, tool: str = "") -> str:
    """What the model reads when a reviewer answered instead of letting the tool run ("respond"): not a refusal,
    the reviewer's reply as the call's result: "bob answered instead of running refund: <message>"."""
    return f"{by or 'a reviewer'} answered instead of running {tool or 'the tool'}: {said.get('message') or ''}"


def unresolved_output(prompt: str) -> str:
    """§10: the error result of a tool that suspended again when re-run with its answer (never loop on one request)."""
    return f"unresolved: {prompt}"


def outcome_of_status(status: str, kind: str) -> str | None:
    """The outcome of a request in ``status`` (None while open): an answered approval is "approved"."""
    if status == RequestStatus.ANSWERED:
        return APPROVED if kind == "approval" else ANSWERED
    return _OUTCOME_OF_STATUS.get(status)


def outcome_of_action(action: str, kind: str) -> str | None:
    """The outcome an audit event records (None for an event that resolves nothing)."""
    if action == AuditEvent.Action.REQUEST_ANSWERED:
        return APPROVED if kind == "approval" else ANSWERED
    return _OUTCOME_OF_ACTION.get(action)


def _names(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _one_line(comment: str | None, most: int = TEXT_COMMENT_CHARS) -> str:
    flat = " ".join(str(comment or "").split())
    return flat if len(flat) <= most else flat[: most - 1].rstrip() + "…"


def _as_js(value: Any) -> Any:
    """A JSON value as JavaScript writes it: a whole float (33.0) is the number 33."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_as_js(item) for item in value]
    if isinstance(value, dict):
        return {key: _as_js(item) for key, item in value.items()}
    return value


def _as_text(value: Any) -> str:
    """As console/dom.js ``asText``: a string as it is, anything else as JSON.stringify writes it."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return json.dumps(_as_js(value), ensure_ascii=False, separators=(",", ":"))


def shown(value: Any) -> str:
    """A value as a person reads it, as the browser's diff panel shows an edit (console/confirm.js ``shown``):
    numbers bare, text as it is, true/false as yes/no, a list comma-joined, nothing as "(empty)"."""
    if isinstance(value, list):
        return ", ".join(_as_text(item) for item in value) if value else "(none)"
    if value is True:
        return "yes"
    if value is False:
        return "no"
    return "(empty)" if value is None or value == "" else _as_text(value)


def changes_text(changes: Sequence[Mapping[str, Any]]) -> str:
    """The edits in one line: "amount 33 → 4, currency EUR → USD" (long values cut with …)."""
    cut = [
        f"{_one_line(change.get('field'), TEXT_VALUE_CHARS)} {_one_line(shown(change.get('from')), TEXT_VALUE_CHARS)}"
        f" → {_one_line(shown(change.get('to')), TEXT_VALUE_CHARS)}"
        for change in changes[:TEXT_CHANGES]
    ]
    more = len(changes) - TEXT_CHANGES
    text = ", ".join(cut)
    if more > 0:
        text += f" and {more} more change{'s' if more > 1 else ''}"
    return text


def edit_notice(changes: Sequence[Mapping[str, Any]]) -> str:
    """What the model reads after the result of a call a reviewer edited before approving (the retry ran with
    the merged arguments): " (a reviewer changed amount 500 → 50 before approving; the call ran with the changed
    values)", in ``changes_text``'s words; "" when nothing changed. It starts with a space: it goes after the
    tool's own output."""
    if not changes:
        return ""
    return f" (a reviewer changed {changes_text(changes)} before approving; the call ran with the changed values)"


def expiry_words(at: datetime | None, note: str | None = "") -> str:
    """What an expiry did, after "Expired at 18:31 UTC" and after §10's ``declined/expired: <prompt>``:
    "nobody answered", or the record's note ("defaults did not fit")."""
    note = _one_line(note)
    return f"nobody answered; {note}" if note else "nobody answered"


def decision_text(
    outcome: str,
    *,
    by: str | None = None,
    at: datetime | None = None,
    comment: str | None = "",
    approvers: Sequence[str] = (),
    changes: Sequence[Mapping[str, Any]] = (),
    decided_by: str | None = None,
    said: Mapping[str, Any] | None = None,
) -> str:
    """The decision in one line: "Approved by alice", "Answered by alice", "Declined by bob: too large",
    "Cancelled by demo", "Expired at 18:31 UTC, nobody answered", "Approved by demo with amount 33 → 4",
    "Approved with its defaults when it expired at 18:31 UTC".

    ``by`` None credits the console itself. ``approvers``: everyone whose approval made up a quorum
    ("Approved by alice and bob"). ``changes``: the args an approval edited (answers.edited_args),
    each {field, from, to}. A refusal (declined, cancelled) carries its comment, cut to one
    line; an expiry says when, as every time is written for people (``moments.readable_time``: in UTC), and
    never reads as a person's refusal; its comment is the timeout's note ("defaults did not fit").
    ``decided_by`` "timeout" on an approval or an answer: the request's defaults, applied when it expired.
    """
    if outcome == EXPIRED:
        when = f"Expired at {readable_time(at)}" if at is not None else "Expired"
        return f"{when}, {expiry_words(at, comment)}"
    if decided_by == DecidedBy.TIMEOUT and outcome in (APPROVED, ANSWERED):
        when = f" when it expired at {readable_time(at)}" if at is not None else " when it expired"
        return f"{_VERB[outcome]} with its defaults{when}"
    who = _names(approvers) if outcome == APPROVED and len(approvers) > 1 else (by or THE_CONSOLE)
    if outcome == DECLINED and said:
        return _declined_text(who, comment, said)
    text = f"{_VERB[outcome]} by {who}"
    if outcome in (DECLINED, CANCELLED) and _one_line(comment):
        text += f": {_one_line(comment)}"
    if outcome == APPROVED and changes:
        text += f" with {changes_text(changes)}"
    return text


def _declined_text(who: str, comment: str | None, said: Mapping[str, Any]) -> str:
    """A decline that said more than a comment, in one line: "Declined by bob (Too large): split it",
    "Responded by bob: use the EU account", "Changes requested by bob (Too large): use EUR"."""
    option = said.get("option") if isinstance(said.get("option"), Mapping) else None
    label = f" ({_one_line(option.get('label'))})" if option else ""
    if said.get("response") == RESPOND:
        return f"Responded by {who}: {_one_line(said.get('message'))}"
    if said.get("response") == REQUEST_CHANGES:
        return f"Changes requested by {who}{label}: {_one_line(said.get('message'))}"
    words = _one_line(comment)
    return f"Declined by {who}{label}" + (f": {words}" if words else "")


def said_of(data: object) -> dict[str, Any] | None:
    """What a refusal's data says beyond its comment: {response, message, option}, only the keys it has (None when
    it has none): a plain decline's data is ``{"comment": ...}`` or None."""
    if not isinstance(data, Mapping):
        return None
    said = {key: data[key] for key in ("response", "message", "option") if data.get(key) is not None}
    return said or None


def decision(
    outcome: str,
    *,
    by: str | None,
    at: datetime | None,
    at_wire: str | None,
    comment: str | None = "",
    approvers: Sequence[str] = (),
    changes: Sequence[Mapping[str, Any]] = (),
    decided_by: str | None = None,
    said: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The contract's "decision" object: outcome, by (a username or None), at (ISO 8601), comment, text,
    ``changes``: what an approval edited, each {field, from, to} with the raw values ([] when nothing), and
    ``decided_by`` (models.DecidedBy): "person" (``by`` names them), "timeout" or "console".

    A decline's ``response`` ("respond" | "request_changes"), ``message`` and reject ``option`` ({key, label,
    text}) from ``said`` (``said_of`` its data); null when unused."""
    changes = list(changes) if outcome == APPROVED else []
    said = said if outcome == DECLINED and said else None
    if decided_by is None:
        decided_by = DecidedBy.TIMEOUT if outcome == EXPIRED else DecidedBy.PERSON if by else DecidedBy.CONSOLE
    return {
        "outcome": outcome,
        "decided_by": str(decided_by),
        "by": by,
        "at": at_wire,
        "comment": comment or "",
        "changes": changes,
        "response": said.get("response") if said else None,
        "message": said.get("message") if said else None,
        "option": said.get("option") if said else None,
        "text": decision_text(
            outcome,
            by=by,
            at=at,
            comment=comment,
            approvers=approvers,
            changes=changes,
            decided_by=decided_by,
            said=said,
        ),
    }


def _who(actor: str) -> str:
    """An audit actor as people say it: a username as it is, the console's own acts, a tool or a model by name."""
    if not actor or actor == "system":
        return THE_CONSOLE
    if actor.startswith("tool:"):
        return actor.removeprefix("tool:")
    if actor.startswith("model:"):
        return f"the model {actor.removeprefix('model:')}"
    return actor


def _when(wire: object) -> str:
    """An ISO 8601 time from a payload as people read it ("20:14 UTC"), or as it is when it is not one."""
    try:
        return readable_time(datetime.fromisoformat(str(wire).replace("Z", "+00:00")))
    except ValueError:
        return str(wire or "?")


def _listed(names: object) -> list[str]:
    listed = [str(name) for name in names] if isinstance(names, list) else []
    return listed or ["the fallback answerers"]


def _finished(status: object) -> str:
    # A failed run's own words are on its page (a refusal reads "declined"): the timeline does not contradict them.
    return "Finished" if status in ("succeeded", "failed", None) else f"Finished: {str(status).replace('_', ' ')}"


def _minutes(minutes: object) -> str:
    """A span of minutes as people read it: whole hours as "2 h", the rest as "90 min"."""
    if isinstance(minutes, bool) or not isinstance(minutes, int):
        return "some time"
    return f"{minutes // 60} h" if minutes and minutes % 60 == 0 else f"{minutes} min"


def _declined_words(who: str, facts: Mapping[str, Any]) -> str:
    """A decline event in the timeline's words: "Declined by bob", "Declined by bob (Too large)", "Responded by
    bob", "Changes requested by bob"."""
    response = facts.get("response")
    if response == RESPOND:
        return f"Responded by {who} instead of running the tool"
    option = facts.get("option") if isinstance(facts.get("option"), Mapping) else None
    label = f" ({_one_line(option.get('label'))})" if option else ""
    return f"{'Changes requested' if response == REQUEST_CHANGES else 'Declined'} by {who}{label}"


def event_words(action: str, actor: str, payload: Mapping[str, Any] | None, kind: str = "") -> str:
    """One audit event of a run's timeline in words: "Started by demo", "Cancel asked by demo",
    "Input request opened by deploy", "Request withdrawn by demo". The raw ``action`` stays with it
    for programs (the event's ``action``; a data attribute and title on the page)."""
    facts = payload if isinstance(payload, Mapping) else {}
    who = _who(actor)
    reason = _one_line(facts.get("reason"))
    action_words: dict[str, str] = {
        AuditEvent.Action.RUN_STARTED: f"Started by {who}",
        AuditEvent.Action.RUN_CANCEL_REQUESTED: f"Cancel asked by {who}",
        AuditEvent.Action.RUN_CANCEL_REFUSED: f"Cancel refused to {who}" + (f": {reason}" if reason else ""),
        AuditEvent.Action.RUN_FINISHED: _finished(facts.get("status"))
        + (f"; its approved call {facts['execution']}" if facts.get("execution") else ""),
        AuditEvent.Action.RUN_INTERRUPTED: "Interrupted: the console stopped while the run was executing",
        AuditEvent.Action.RUN_ADOPTED: "Taken over by a live console after its own stopped",
        AuditEvent.Action.RUN_TRANSCRIPT: f"Agent step ({facts.get('kind') or 'entry'}) by {who}",
        AuditEvent.Action.REQUEST_OPENED: f"{(kind or 'a').capitalize()} request opened by {who}",
        AuditEvent.Action.REQUEST_ANSWERED: f"{'Approved' if kind == 'approval' else 'Answered'} "
        + ("with its defaults when it expired" if facts.get("decided_by") == DecidedBy.TIMEOUT else f"by {who}"),
        AuditEvent.Action.REQUEST_DECLINED: _declined_words(who, facts),
        AuditEvent.Action.REQUEST_CANCELLED: f"Request withdrawn by {who}",
        AuditEvent.Action.REQUEST_EXPIRED: "Request expired, nobody answered",
        AuditEvent.Action.REQUEST_ESCALATED: f"Deadline passed, escalated to {_names(_listed(facts.get('to')))}"
        f" until {_when(facts.get('expiresAt'))}",
        AuditEvent.Action.REQUEST_KEPT_OPEN: "Deadline passed, kept open",
        AuditEvent.Action.REQUEST_CREDENTIALS_REFUSED: "Refused by the console: it asks for a credential",
        AuditEvent.Action.REQUEST_APPROVAL_RECORDED: f"Approval by {who} recorded",
        AuditEvent.Action.REQUEST_ANSWER_REFUSED: f"Answer refused to {who}" + (f": {reason}" if reason else ""),
        AuditEvent.Action.REQUEST_CLAIMED: f"Claimed by {who}",
        AuditEvent.Action.REQUEST_RELEASED: f"Released by {who}",
        AuditEvent.Action.REQUEST_HANDED: f"Handed by {who} to {facts.get('to') or 'someone'}",
        AuditEvent.Action.REQUEST_EXTENDED: f"Deadline extended by {who}, {_minutes(facts.get('minutes'))} later",
        AuditEvent.Action.REQUEST_REMINDED: f"Answerers reminded {_minutes(facts.get('minutes_before'))} before the deadline",
        AuditEvent.Action.REQUEST_EXECUTING: "Tool executing after the approval",
        AuditEvent.Action.REQUEST_EXECUTED: f"Execution {facts.get('outcome') or 'reported'}"
        + (f", reported by {who}" if facts.get("via") == "api" else ""),
        AuditEvent.Action.AUTH_LOCKED_OUT: "Sign-in locked after failed attempts",
        AuditEvent.Action.AUDIT_ARCHIVED: (
            f"Events #{facts.get('first', '?')}–#{facts.get('last', '?')} archived by {who} to {facts.get('file') or 'a file'}"
        ),
    }
    words = action_words.get(action, action)
    if action == AuditEvent.Action.REQUEST_APPROVAL_RECORDED:
        approvals = facts.get("approvals")
        words += f" ({len(approvals) if isinstance(approvals, list) else '?'} of {facts.get('quorum', '?')})"
    return words
