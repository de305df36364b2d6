"""Reading the console's signing key file: plain cryptography, no Django, so the deployment check
(toolnexus_site/deployment.py, before settings exist) and the signing keys (keys.py) read it one way."""

from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


class KeyFileError(ValueError):
    """A key file the console cannot sign with; ``problem`` ends the sentence "<the file> ..." (never quoting the
    file's contents): "cannot be read (...)", "is not an unencrypted PEM private key", "holds an RSA key, ..."."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(problem)


def read_private_key(path: Path) -> Ed25519PrivateKey:
    """The Ed25519 private key in the unencrypted PEM file ``path``; KeyFileError says what is wrong with it."""
    try:
        text = path.read_bytes()
    except OSError as error:
        raise KeyFileError(f"cannot be read ({error.strerror or error})") from None
    try:
        key = serialization.load_pem_private_key(text, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):  # not PEM, encrypted, or a key type cryptography lacks
        raise KeyFileError("is not an unencrypted PEM private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        kind = type(key).__name__.removesuffix("PrivateKey")  # RSA, EC, Ed448, ...
        raise KeyFileError(f"holds an {kind} key, not Ed25519; the console signs with Ed25519")
    return key
