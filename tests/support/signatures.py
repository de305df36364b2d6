"""The console's signature on a wire Answer, checked: tests compare the Answer as toolnexus defines it."""

import base64
from typing import Any

from approvals.signing.keys import current_key
from console_remote import SIGNATURE_KEY, signed_statement


def verified(answer: dict[str, Any]) -> dict[str, Any]:
    """``answer`` without its ``signature``, once that signature is checked with this checkout's key (the one a
    development console signs with); fails the test when it is missing or does not verify."""
    signature = answer[SIGNATURE_KEY]
    key = current_key()
    assert signature["kid"] == key.kid, signature
    sig = base64.urlsafe_b64decode(signature["sig"] + "=" * (-len(signature["sig"]) % 4))
    key.private_key.public_key().verify(sig, signed_statement(answer))  # raises InvalidSignature
    return {name: value for name, value in answer.items() if name != SIGNATURE_KEY}


def without(payload: dict[str, Any], *names: str) -> dict[str, Any]:
    """An event payload without ``names`` (the call digest and signature an event records), once each is there."""
    for name in names:
        assert payload.get(name), f"{name!r} missing from {payload}"
    return {key: value for key, value in payload.items() if key not in names}


def verified_frame(frame: dict[str, Any]) -> dict[str, Any]:
    """A host socket's ``answer`` frame with its Answer ``verified``."""
    return {**frame, "answer": verified(frame["answer"])}
