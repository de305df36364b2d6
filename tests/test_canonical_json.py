"""RFC 8785 canonical JSON and the call digest (console_remote): the shared vectors, and what has no canonical form."""

import hashlib
import json
from pathlib import Path

import pytest

from console_remote import CanonicalJSONError, call_digest, canonical_json

VECTORS = Path(__file__).resolve().parent.parent / "docs" / "vectors" / "canonical-json.json"


@pytest.mark.parametrize("vector", json.loads(VECTORS.read_text())["vectors"], ids=lambda vector: vector["name"])
def test_each_shared_vector_gives_its_canonical_bytes_and_digest(vector):
    canonical = canonical_json(json.loads(vector["json"]))
    assert canonical.decode("utf-8") == vector["canonical"]
    assert hashlib.sha256(canonical).hexdigest() == vector["sha256"]


def test_a_call_digest_is_the_same_for_25_and_25_point_0_and_any_key_order():
    assert call_digest("refund", {"amount": 25.0, "to": "acme"}) == call_digest("refund", {"to": "acme", "amount": 25})
    assert call_digest("refund", {"amount": 25}) != call_digest("refund", {"amount": 26})
    assert call_digest("refund", {"amount": 25}) != call_digest("charge", {"amount": 25})
    assert call_digest("", None) == "sha256:" + hashlib.sha256(b'{"args":{},"tool":""}').hexdigest()


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ({"amount": 2**53 + 1}, "$.amount is 9007199254740993"),
        ({"amount": 2**60}, "$.amount is 1152921504606846976"),  # its double prints as 1152921504606847000
        ({"amount": -(10**400)}, "$.amount is -1000"),  # beyond every double
        ({"list": [1, float("nan")]}, "$.list[1] is nan"),
        ({"x": float("inf")}, "$.x is inf"),
        ({"text": "\ud800"}, "$.text holds a lone surrogate"),
        ({1: "a"}, "$ has the key 1"),
        ({"when": object()}, "$.when is a object"),
    ],
)
def test_what_has_no_canonical_form_is_refused_naming_where(value, named):
    with pytest.raises(CanonicalJSONError, match=named.replace("[", r"\[").replace("]", r"\]").replace("$", r"\$")):
        canonical_json(value)


@pytest.mark.parametrize("number", [10**16, -(10**16), 123456789012345680000, 10**21, 2**53])
def test_a_large_integer_that_is_a_doubles_shortest_form_canonicalizes_as_that_double(number):
    """PostgreSQL's jsonb gives the float 1e16 back as the integer 10000000000000000: the same bytes as the float."""
    assert canonical_json({"x": number}) == canonical_json({"x": float(number)})
