"""What binds an answer to the call it lets run: the request's call digest, the check of the digest an answerer
saw, and the console's signature the door stores with each answer (docs/signing.md)."""

import re
from typing import Any

from django.contrib.auth.models import User

from approvals.models import Request
from approvals.moments import iso_time
from approvals.review import answers
from approvals.review.errors import DecisionError
from approvals.signing import keys
from approvals.signing.answers import signature_for
from console_remote import CanonicalJSONError, call_digest


def checked_call_digest(tool: str, args: dict[str, Any] | None) -> str:
    """``console_remote.call_digest`` of a call a request is opened for; DecisionError ("invalid", on ``args``)
    for arguments with no canonical form (an integer beyond ±(2**53 - 1), say), naming where."""
    try:
        return call_digest(tool, args)
    except CanonicalJSONError as exc:
        message = f"The arguments cannot be bound to an answer: {exc}"
        raise DecisionError("invalid", message, {"args": [message]}) from None


def request_call_digest(request: Request) -> str | None:
    """The digest of the call ``request`` guards: as stored when it opened, or for a row opened before the console
    kept it, of its tool and args now (they never change once open); None for such a row whose args have no
    canonical form (it opened before the console refused those)."""
    if request.call_digest:
        return request.call_digest
    try:
        return call_digest(request.tool, request.args if isinstance(request.args, dict) else {})
    except CanonicalJSONError:
        return None


# What a call digest looks like (console_remote.call_digest).
DIGEST_FORM = re.compile(r"sha256:[0-9a-f]{64}")


def check_seen_digest(request: Request, seen: object) -> None:
    """Refuse an answer made for another call than ``request`` asks for now (a stale page, a replay, a request id
    used again): ``seen`` is the call digest the answerer was shown, None when it did not say."""
    if seen is None:
        return
    if not isinstance(seen, str) or not DIGEST_FORM.fullmatch(seen):
        message = f"digest must be a call digest, 'sha256:' and 64 lower-case hex digits; got {str(seen)[:80]!r}."
        raise DecisionError("invalid", message, {"digest": [message]})
    current = request_call_digest(request)
    if current is None:
        return
    if seen != current:
        raise DecisionError(
            "conflict",
            f"This answer was made for a different call than request {request.id!r} asks for now (shown: "
            f"{_short(seen)}, asked now: {_short(current)}), so nothing was answered: reload it and decide on what "
            "it asks now.",
        )


def _short(digest: object) -> str:
    """A digest as a person compares two: ``sha256:`` and its first 12 hex digits."""
    text = str(digest)
    return text[:19] + "…" if len(text) > 19 else text


def answer_signature(
    request: Request,
    *,
    ok: bool,
    data: Any,
    reason: str | None,
    decided_by: User | None,
    who_decided: str,
    at: Any,
) -> dict[str, Any] | None:
    """The console's signature on the answer the door is about to store (``signing.answers.signature_for``): the
    call as asked, the call that runs after it (an approval's edits merged as the retry merges them:
    ``answers.retry_args``), who decided and when. DecisionError ("invalid") for answer data with no canonical
    form (on ``data``), or a call to run that has none (on ``args``). None for a row opened before digests were kept whose args have no canonical form."""
    asked = request_call_digest(request)
    if asked is None:
        return None
    args = request.args if isinstance(request.args, dict) else {}
    pair = keys.current_key()
    try:
        runs = (
            call_digest(request.tool, answers.retry_args(request.kind, args, data, request.tool_input_schema))
            if ok
            else asked
        )
    except CanonicalJSONError as exc:  # the call that would run, the request's args with the approved edits
        message = f"The answer cannot be signed: {exc}"
        raise DecisionError("invalid", message, {"args": [message]}) from None
    try:
        return signature_for(
            pair.private_key,
            pair.kid,
            request_id=request.id,
            ok=ok,
            data=data,
            reason=reason,
            call_digest=asked,
            run_digest=runs,
            by=decided_by.get_username() if decided_by is not None else None,
            decided_by=who_decided,
            at=iso_time(at) or "",
        )
    except CanonicalJSONError as exc:
        message = f"The answer cannot be signed: {exc}"
        raise DecisionError("invalid", message, {"data": [message]}) from None
