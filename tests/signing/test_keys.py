"""The keys that verify this console's answers: the registered ones, rotated-away keys included, and the current."""

import base64

import pytest
from cryptography.hazmat.primitives import serialization

from approvals.models import SigningKey
from approvals.signing import keys

pytestmark = pytest.mark.django_db


def raw(public_key):
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def test_a_rotated_away_key_still_verifies(rotate_signing_key):
    old = rotate_signing_key()
    keys.register_current_key()
    new = rotate_signing_key()
    keys.register_current_key()
    found = keys.verifying_keys()
    assert set(found) == {old.kid, new.kid}
    assert raw(found[old.kid]) == old.public_raw
    found[old.kid].verify(old.private_key.sign(b"an old answer"), b"an old answer")


def test_the_current_key_verifies_though_its_row_is_missing(rotate_signing_key):
    pair = rotate_signing_key()
    assert not SigningKey.objects.exists()
    assert {kid: raw(key) for kid, key in keys.verifying_keys().items()} == {pair.kid: pair.public_raw}


def test_published_keys_list_the_current_first_then_the_newest(rotate_signing_key):
    oldest = rotate_signing_key()
    keys.register_current_key()
    older = rotate_signing_key()
    keys.register_current_key()
    current = rotate_signing_key()
    published = keys.published_keys()
    assert [(key.kid, key.current) for key in published] == [
        (current.kid, True),
        (older.kid, False),
        (oldest.kid, False),
    ]
    assert published[0].created_at is None  # not registered yet
    assert published[1].created_at >= published[2].created_at
    for key, pair in zip(published, (current, older, oldest), strict=True):
        assert key.alg == "Ed25519"
        assert base64.urlsafe_b64decode(key.public_key + "=") == pair.public_raw
        assert raw(serialization.load_pem_public_key(key.pem.encode())) == pair.public_raw
        assert key.pem.startswith("-----BEGIN PUBLIC KEY-----")


def test_registering_twice_keeps_the_first_registration(rotate_signing_key):
    rotate_signing_key()
    first = keys.register_current_key()
    created = SigningKey.objects.get(kid=first.kid).created_at
    keys.register_current_key()
    assert list(SigningKey.objects.values_list("kid", "created_at")) == [(first.kid, created)]
