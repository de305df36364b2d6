"""The signing key file, read one way by the deployment check (before Django) and by the signing keys."""

import base64

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from approvals.signing import keys
from toolnexus_site.deployment import signing_key_problem

ED25519_OID = bytes.fromhex("06032b6570")  # 1.3.101.112
UNKNOWN_OID = bytes.fromhex("06032b6563")  # 1.3.101.99: a key type cryptography has no loader for


def pkcs8(key, oid=None):
    der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    if oid is not None:
        der = der.replace(ED25519_OID, oid)
    return b"-----BEGIN PRIVATE KEY-----\n" + base64.encodebytes(der) + b"-----END PRIVATE KEY-----\n"


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("unknown-type.pem", "is not an unencrypted PEM private key"),
        ("rsa.pem", "holds an RSA key, not Ed25519; the console signs with Ed25519"),
        ("missing.pem", "cannot be read (No such file or directory)"),
    ],
)
def test_an_unusable_key_file_is_refused_the_same_way_by_both_readers(tmp_path, name, says):
    """A PKCS#8 key of a type cryptography does not know raises its UnsupportedAlgorithm, which used to escape
    read_key_file; both readers now name the file and the same problem."""
    (tmp_path / "unknown-type.pem").write_bytes(pkcs8(Ed25519PrivateKey.generate(), UNKNOWN_OID))
    (tmp_path / "rsa.pem").write_bytes(pkcs8(rsa.generate_private_key(public_exponent=65537, key_size=2048)))
    path = tmp_path / name
    with pytest.raises(keys.SigningKeyError) as refused:
        keys.read_key_file(path)
    assert str(refused.value).startswith(f"The signing key file {path} {says}: make one with")
    assert signing_key_problem(path).startswith(f"CONSOLE_SIGNING_KEY_FILE names {path}, which {says}: make one")


def test_a_good_key_file_reads_as_its_key(tmp_path):
    key = Ed25519PrivateKey.generate()
    path = tmp_path / "good.pem"
    path.write_bytes(pkcs8(key))
    assert keys.key_pair(keys.read_key_file(path)).kid == keys.key_pair(key).kid
    assert signing_key_problem(path) is None


def test_a_development_key_that_cannot_be_made_is_a_signing_key_error(tmp_path, settings):
    settings.CONSOLE_SIGNING_KEY_FILE = ""
    settings.BASE_DIR = tmp_path / "file"
    settings.BASE_DIR.write_text("a file where var/ should go")
    keys.current_key.cache_clear()
    try:
        with pytest.raises(keys.SigningKeyError, match="The development signing key .* cannot be made"):
            keys.current_key()
    finally:
        keys.current_key.cache_clear()
