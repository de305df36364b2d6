"""``GET /api/v1/signing-keys``: the public keys a host pins to verify answers, the current one first and the
rotated-away ones after it, to any signed-in user or API token (docs/signing.md)."""

import base64
import re

import pytest
from asgiref.sync import sync_to_async
from cryptography.hazmat.primitives import serialization
from django.test import AsyncClient
from toolnexus import Request as Wire

from approvals.review import decisions
from approvals.signing import keys
from console_remote import signed_statement
from tests.support.users import bearer

pytestmark = pytest.mark.django_db(transaction=True)

ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")


def unpadded(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


async def test_it_lists_the_current_key_first_then_the_rotated_away_ones(api, rotate_signing_key):
    old = rotate_signing_key()
    await keys.aregister_current_key()
    new = rotate_signing_key()
    await keys.aregister_current_key()
    response = await api.get("/api/v1/signing-keys")
    assert response.status_code == 200
    listed = response.json()["keys"]
    assert [(key["kid"], key["current"], key["alg"]) for key in listed] == [
        (new.kid, True, "Ed25519"),
        (old.kid, False, "Ed25519"),
    ]
    for key, pair in zip(listed, (new, old), strict=True):
        assert set(key) == {"kid", "alg", "public_key", "pem", "current", "created_at"}
        assert unpadded(key["public_key"]) == pair.public_raw and "=" not in key["public_key"]
        public = serialization.load_pem_public_key(key["pem"].encode())
        assert public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw) == pair.public_raw
        assert ISO.fullmatch(key["created_at"])


async def test_the_current_key_is_listed_though_its_row_is_missing(api, rotate_signing_key):
    pair = rotate_signing_key()  # not registered: a database restored from before this process started, say
    listed = (await api.get("/api/v1/signing-keys")).json()["keys"]
    assert [(key["kid"], key["current"], key["created_at"]) for key in listed] == [(pair.kid, True, None)]


async def test_an_answer_signed_before_a_rotation_verifies_with_a_listed_key(api, rotate_signing_key, host_request):
    rotate_signing_key()
    await keys.aregister_current_key()
    request_id = await host_request("sig-keys-1")
    await decisions.aresolve_request(request_id, ok=True)
    answer = (await api.get(f"/api/v1/requests/{request_id}")).json()["answer"]
    rotate_signing_key()
    await keys.aregister_current_key()
    listed = {key["kid"]: key for key in (await api.get("/api/v1/signing-keys")).json()["keys"]}
    key = listed[answer["signature"]["kid"]]
    assert key["current"] is False
    public = serialization.load_pem_public_key(key["pem"].encode())
    public.verify(unpadded(answer["signature"]["sig"]), signed_statement(answer))


async def test_an_api_token_reads_them_and_no_credentials_do_not(alice, issue_token):
    secret = await sync_to_async(issue_token)(alice)
    assert (await AsyncClient().get("/api/v1/signing-keys", headers=bearer(secret))).status_code == 200
    refused = await AsyncClient().get("/api/v1/signing-keys")
    assert refused.status_code == 401 and refused.json()["error"] == "unauthenticated"


@pytest.fixture
def host_request(alice):
    async def open_one(request_id):
        row, _ = await decisions.aopen_host_request(
            Wire(id=request_id, kind="approval", prompt="Deploy?"),
            user=alice,
            host="ci",
            tool="deploy",
            args={"service": "web"},
        )
        return row.pk

    return open_one


async def test_a_row_whose_kid_is_not_its_keys_id_is_not_served(api, rotate_signing_key):
    """A SigningKey row written by hand under another key's id is never handed to hosts to pin."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from approvals.models import SigningKey

    current = rotate_signing_key()
    await keys.aregister_current_key()
    planted = keys.key_pair(Ed25519PrivateKey.generate())
    await SigningKey.objects.acreate(kid="0123456789abcdef", public_key=planted.public_b64)
    response = await api.get("/api/v1/signing-keys")
    assert [key["kid"] for key in response.json()["keys"]] == [current.kid]
