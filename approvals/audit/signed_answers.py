"""The console's signatures on the trail's answers, checked beside the hash chain (``manage.py verify_audit``).

The chain proves the events were not changed without the audit key; this proves each answer is the one the
console signed, for the call it was asked, and that the request's row still says so. For every resolving
event (``RESOLVING_ACTIONS``) whose payload carries a ``signature`` (docs/signing.md, the wire object): the
Answer rebuilt from the event (its request id, ``ok``, ``data``, ``reason``) verifies under the key of its
``kid`` (``signing.keys.verifying_keys``: the registered keys and the current one); its ``call_digest`` is the
one the request's ``request.opened`` event recorded; and, while the request's row exists, the row's
``call_digest`` column, the digest of its tool and args now, the digest of the call its answer lets run
(``run_digest``), its stored ``answer_signature`` and its answer columns all still agree with what was signed.
Events resolved before the console signed answers carry no signature: they are counted as unsigned.
"""

import base64
import binascii
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from approvals.audit.archive import events_in
from approvals.models import AuditEvent, Request
from approvals.models.audit import RESOLVING_ACTIONS
from approvals.moments import iso_time
from approvals.review import answers
from console_remote import (
    SIGNATURE_ALGORITHM,
    SIGNATURE_KEY,
    SIGNATURE_VERSION,
    CanonicalJSONError,
    call_digest,
    signed_statement,
)

# What failed, as verify_audit names it.
UNKNOWN_KEY = "unknown key"
BAD_SIGNATURE = "bad signature"
DIGEST_MISMATCH = "digest mismatch"
ROW_ALTERED = "row altered"

# Resolving events read at a time, and their requests' rows and opened events with them (SQLite's older builds
# take at most 999 parameters a statement).
CHUNK = 500


@dataclass(frozen=True)
class Resolution:
    """One resolving event as the check reads it: from the database or from a line of an archive file."""

    request_id: str
    payload: Mapping[str, Any]
    name: str  # how verify_audit names the event: "#12", "#12 (id 14)"


@dataclass(frozen=True)
class AnswerFailure:
    """An answer that did not verify: its request and each thing that failed (``what``: one of UNKNOWN_KEY,
    BAD_SIGNATURE, DIGEST_MISMATCH, ROW_ALTERED, then a colon and what was found)."""

    request_id: str
    event: str
    problems: tuple[str, ...]

    def __str__(self) -> str:
        return f"Request {self.request_id!r} (event {self.event}): {'; '.join(self.problems)}."


@dataclass
class AnswerReport:
    """How many answers were checked; of them, how many signatures verified, how many are unsigned (decided
    before the console signed answers), and each one that failed."""

    checked: int = 0
    verified: int = 0
    unsigned: int = 0
    failures: list[AnswerFailure] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        """One line: "3 answers checked: 2 verified (signature, call digests, stored row), 1 unsigned (...)", and
        how many did not verify (each named on a line of its own)."""
        noun = "answer" if self.checked == 1 else "answers"
        parts = [f"{self.verified} verified (signature, call digests, stored row)"]
        if self.unsigned:
            parts.append(f"{self.unsigned} unsigned (decided before the console signed answers)")
        if self.failures:
            parts.append(f"{len(self.failures)} did not verify")
        return f"{self.checked} {noun} checked: {', '.join(parts)}."


def verify_answers(keys: Mapping[str, Ed25519PublicKey], using: str = "default") -> AnswerReport:
    """Check every resolving event of the trail in the database, oldest first, with the verifying ``keys``
    (``signing.keys.verifying_keys()``); a report of them all (it goes on after a failure, naming each)."""
    events = (
        AuditEvent.objects.using(using)
        .filter(action__in=RESOLVING_ACTIONS, request__isnull=False)
        .order_by("id")
        .values_list("id", "position", "request_id", "payload")
    )
    resolutions = (
        Resolution(request_id, _payload_of(payload), _event_name(pk, position))
        for pk, position, request_id, payload in events.iterator(chunk_size=CHUNK)
    )
    return check_resolutions(resolutions, keys, using=using)


def verify_archived_answers(path: Path, keys: Mapping[str, Ed25519PublicKey], using: str = "default") -> AnswerReport:
    """The same checks over the events of an archive file (``archive.events_in``; verify it with
    ``archive.verify_archive`` first). A request's opened event is looked for in the same file, then in the
    database; its row, while it exists, is checked as for the trail."""
    # Two reads of the file: the opened events' digests first (a string a request), then each resolving event.
    opened = {
        str(line["request"]): {"call_digest": (line.get("payload") or {}).get("call_digest")}
        for line in events_in(path)
        if line.get("action") == AuditEvent.Action.REQUEST_OPENED and line.get("request")
    }
    resolutions = (
        Resolution(
            str(line["request"]),
            _payload_of(line.get("payload")),
            _event_name(line.get("id"), line.get("position", line.get("id"))),
        )
        for line in events_in(path)
        if line.get("action") in RESOLVING_ACTIONS and line.get("request")
    )
    return check_resolutions(resolutions, keys, using=using, opened=opened)


def check_resolutions(
    resolutions: Iterable[Resolution],
    keys: Mapping[str, Ed25519PublicKey],
    *,
    using: str = "default",
    opened: Mapping[str, Mapping[str, Any]] | None = None,
) -> AnswerReport:
    """Check each resolution (a chunk at a time: its requests' rows and opened events in two queries)."""
    report = AnswerReport()
    for chunk in _chunks(resolutions, CHUNK):
        ids = {resolution.request_id for resolution in chunk}
        rows = Request.objects.using(using).select_related("answered_by").in_bulk(list(ids))
        opened_here = dict(
            AuditEvent.objects.using(using)
            .filter(action=AuditEvent.Action.REQUEST_OPENED, request_id__in=list(ids))
            .values_list("request_id", "payload")
        )
        for resolution in chunk:
            report.checked += 1
            opened_payload = (opened or {}).get(resolution.request_id) or opened_here.get(resolution.request_id)
            signature = resolution.payload.get(SIGNATURE_KEY)
            row = rows.get(resolution.request_id)
            if signature is None:
                if row is not None and row.answer_signature:
                    failure = f"{ROW_ALTERED}: the row carries a signature its resolving event did not record"
                    report.failures.append(AnswerFailure(resolution.request_id, resolution.name, (failure,)))
                else:
                    report.unsigned += 1
                continue
            problems = answer_problems(resolution, keys, opened_payload, row)
            if problems:
                report.failures.append(AnswerFailure(resolution.request_id, resolution.name, tuple(problems)))
            else:
                report.verified += 1
    return report


def answer_problems(
    resolution: Resolution,
    keys: Mapping[str, Ed25519PublicKey],
    opened: Mapping[str, Any] | None,
    row: Request | None,
) -> list[str]:
    """What is wrong with one signed answer, [] when nothing: its signature, its digests, its row."""
    payload = resolution.payload
    signature = payload.get(SIGNATURE_KEY)
    wire = {
        "id": resolution.request_id,
        "ok": payload.get("ok"),
        "data": payload.get("data"),
        "reason": payload.get("reason"),
        SIGNATURE_KEY: signature,
    }
    problem = signature_problem(wire, keys)
    if problem is not None:
        return [problem]  # what it signed cannot be trusted: its digests say nothing either
    assert isinstance(signature, dict)  # signature_problem refused anything else
    signed_call = signature.get("call_digest")
    problems: list[str] = []
    recorded = (opened or {}).get("call_digest")
    if recorded and recorded != signed_call:
        problems.append(
            f"{DIGEST_MISMATCH}: the request was opened for the call {recorded}, the answer was signed for "
            f"{signed_call}"
        )
    if row is not None:
        problems.extend(_row_problems(row, wire, signature, keys))
    return problems


def signature_problem(wire: Mapping[str, Any], keys: Mapping[str, Ed25519PublicKey]) -> str | None:
    """Why the Answer ``wire`` (in its wire keys, with its ``signature``) does not verify under ``keys``, or
    None when it does."""
    signature = wire.get(SIGNATURE_KEY)
    if not isinstance(signature, dict):
        return f"{BAD_SIGNATURE}: its signature is not a signature object"
    if signature.get("v") != SIGNATURE_VERSION or signature.get("alg") != SIGNATURE_ALGORITHM:
        return (
            f"{BAD_SIGNATURE}: version {signature.get('v')!r} with {signature.get('alg')!r}, where the console "
            f"signs version {SIGNATURE_VERSION} with {SIGNATURE_ALGORITHM}"
        )
    kid = signature.get("kid")
    key = keys.get(kid) if isinstance(kid, str) else None
    if key is None:
        return f"{UNKNOWN_KEY}: {kid!r} is neither a registered signing key nor the current one"
    try:
        sig = str(signature.get("sig") or "")
        key.verify(base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4)), signed_statement(dict(wire)))
    except (InvalidSignature, binascii.Error, ValueError):  # CanonicalJSONError is a ValueError
        return f"{BAD_SIGNATURE}: it does not verify under key {kid} (the answer or its signature was changed)"
    return None


def _row_problems(
    row: Request, event_wire: Mapping[str, Any], signature: Mapping[str, Any], keys: Mapping[str, Ed25519PublicKey]
) -> list[str]:
    """The request's row against what its resolving event signed: digests first, then its stored answer."""
    problems: list[str] = []
    signed_call = signature.get("call_digest")
    args = row.args if isinstance(row.args, dict) else {}
    if row.call_digest and row.call_digest != signed_call:
        problems.append(
            f"{DIGEST_MISMATCH}: the row's call_digest is {row.call_digest}, the answer signed {signed_call}"
        )
    try:
        now = call_digest(row.tool, args)
        runs = (
            call_digest(row.tool, answers.retry_args(row.kind, args, row.answer_data, row.tool_input_schema))
            if row.answer_ok
            else now
        )
    except CanonicalJSONError as exc:
        problems.append(f"{DIGEST_MISMATCH}: the row's tool and args have no digest now ({exc})")
        return problems
    if now != signed_call:
        problems.append(f"{DIGEST_MISMATCH}: the row's tool and args hash to {now}, the answer signed {signed_call}")
    elif runs != signature.get("run_digest"):
        problems.append(
            f"{DIGEST_MISMATCH}: the call the row's answer lets run hashes to {runs}, the answer signed "
            f"{signature.get('run_digest')}"
        )
    altered: list[str] = []
    stored = {
        "id": row.id,
        "ok": row.answer_ok,
        "data": row.answer_data,
        "reason": row.answer_reason or None,
        SIGNATURE_KEY: row.answer_signature,
    }
    answer_differs = any(stored[name] != event_wire[name] for name in ("ok", "data", "reason"))
    # The same answer under the same signature as the event's, which just verified, verifies too: checked again
    # only when it differs (half the time of the whole check: an Ed25519 verify and a canonical form each).
    if answer_differs or row.answer_signature != signature:
        if signature_problem(stored, keys) is not None:
            altered.append("its stored answer (ok, data, reason) and signature no longer verify")
        if row.answer_signature != signature:
            altered.append("its stored signature is not the one its resolving event recorded")
        elif answer_differs:
            altered.append("its answer is not the one its resolving event recorded")
    by = row.answered_by.get_username() if row.answered_by is not None else None
    if (by, row.decided_by_of, iso_time(row.answered_at)) != (
        signature.get("by"),
        signature.get("decided_by"),
        signature.get("at"),
    ):
        altered.append("who decided it and when are not what was signed")
    if altered:
        problems.append(f"{ROW_ALTERED}: {', and '.join(altered)}")
    return problems


def _payload_of(payload: object) -> Mapping[str, Any]:
    return payload if isinstance(payload, dict) else {}


def _event_name(pk: object, position: object) -> str:
    if position is None:
        return f"id {pk} (not chained yet)"
    return f"#{position}" if position == pk else f"#{position} (id {pk})"


def _chunks(items: Iterable[Resolution], size: int) -> Iterator[list[Resolution]]:
    chunk: list[Resolution] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
