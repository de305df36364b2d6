"""The keys that verify this console's answers: the registered ones, rotated-away keys included, and the current."""

import base64

import pytest
from cryptography.hazmat.primitives import serialization

from approvals.models import Request, SigningKey
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


def test_the_door_registers_a_key_the_process_signs_with_once_before_its_transaction(
    rotate_signing_key, make_user, django_assert_num_queries
):
    """A process whose supervisor never started (a command, a worker) signs an answer: the key's public half is
    registered first, outside the answer's transaction, and only once per process."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from approvals.review import decisions
    from tests.support.dashboard import waiting_request

    alice = make_user("alice")
    pair = rotate_signing_key()
    waiting_request("reg-1", starter=alice)
    waiting_request("reg-2", starter=alice)
    assert not SigningKey.objects.filter(kid=pair.kid).exists()
    with CaptureQueriesContext(connection) as first:
        decisions.resolve_request("reg-1", ok=True, user=alice, via="api")
    assert SigningKey.objects.get(kid=pair.kid).public_key == pair.public_b64
    table = SigningKey._meta.db_table
    sql = [query["sql"] for query in first.captured_queries]
    answered = next(i for i, text in enumerate(sql) if text.startswith(f'UPDATE "{Request._meta.db_table}"'))
    assert sql[answered - 1].startswith("SAVEPOINT")  # the answer's transaction (a savepoint in this test's)
    assert max(i for i, text in enumerate(sql) if table in text) < answered - 1
    with CaptureQueriesContext(connection) as second:
        decisions.resolve_request("reg-2", ok=True, user=alice, via="api")
    assert not [query for query in second.captured_queries if table in query["sql"]]
