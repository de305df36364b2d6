"""The signature the door stores with an answer, in the same write (review/decisions.py), and its check."""

import base64
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from toolnexus import Answer

from console_remote import SIGNATURE_ALGORITHM, SIGNATURE_KEY, SIGNATURE_VERSION, signed_statement


def signature_for(
    private_key: Ed25519PrivateKey,
    kid: str,
    *,
    request_id: str,
    ok: bool,
    data: Any,
    reason: str | None,
    call_digest: str,
    run_digest: str,
    by: str | None,
    decided_by: str,
    at: str,
) -> dict[str, Any]:
    """The ``signature`` object of an Answer: who decided (``by``, a username or None; ``decided_by``, a
    DecidedBy) and when (``at``, the wire's ISO time), the digests of the call as asked (``call_digest``) and of
    the call that runs after this answer (``run_digest``: the asked arguments with the approved edits; the asked
    call's for a refusal), the key's id, and ``sig``: the base64url Ed25519 signature over
    ``console_remote.signed_statement`` of the Answer with all of this."""
    signature: dict[str, Any] = {
        "v": SIGNATURE_VERSION,
        "alg": SIGNATURE_ALGORITHM,
        "kid": kid,
        "call_digest": call_digest,
        "run_digest": run_digest,
        "by": by,
        "decided_by": decided_by,
        "at": at,
    }
    statement = signed_statement({"id": request_id, "ok": ok, "data": data, "reason": reason, SIGNATURE_KEY: signature})
    signature["sig"] = base64.urlsafe_b64encode(private_key.sign(statement)).decode().rstrip("=")
    return signature


@dataclass(eq=False)
class SignedAnswer(Answer):
    """A toolnexus Answer with the console's signature beside it, as the door stored it: the wire carries it as the
    top-level ``signature`` key (shapes.wire_answer). It equals any Answer with the same id, ok, data and reason,
    so code written against the plain Answer compares it as one; the signature is not part of toolnexus' Answer."""

    signature: dict[str, Any] | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Answer):
            return NotImplemented
        return (self.id, self.ok, self.data, self.reason) == (other.id, other.ok, other.data, other.reason)

    __hash__ = None  # type: ignore[assignment]  # mutable, like the Answer it extends
