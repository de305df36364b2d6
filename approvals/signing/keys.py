"""The console's Ed25519 signing key: read from ``CONSOLE_SIGNING_KEY_FILE`` (PKCS#8 PEM), or in development made
once at ``var/signing-key.pem`` and shared by every process of that checkout; its public half is registered in
``SigningKey`` so answers it signed still verify after the key is rotated away (docs/signing.md)."""

import base64
import os
import tempfile
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path

from channels.db import database_sync_to_async
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings

from approvals.models import SigningKey
from approvals.signing.key_files import KeyFileError, read_private_key
from console_remote import SIGNATURE_ALGORITHM, key_id


class SigningKeyError(ValueError):
    """A signing key file that cannot be used; the message names the file and what to do."""


@dataclass(frozen=True)
class KeyPair:
    """The key this process signs with: its private half, its raw public half and that half's id."""

    private_key: Ed25519PrivateKey
    public_raw: bytes
    kid: str

    @property
    def public_b64(self) -> str:
        """The raw public key in unpadded base64url, as ``SigningKey.public_key`` and the API give it."""
        return base64.urlsafe_b64encode(self.public_raw).decode().rstrip("=")


def key_pair(private_key: Ed25519PrivateKey) -> KeyPair:
    raw = private_key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return KeyPair(private_key=private_key, public_raw=raw, kid=key_id(raw))


def pem_of(private_key: Ed25519PrivateKey) -> bytes:
    """A private key as unencrypted PKCS#8 PEM, the form ``CONSOLE_SIGNING_KEY_FILE`` holds."""
    return private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def read_key_file(path: Path) -> Ed25519PrivateKey:
    """The Ed25519 private key in the PEM file ``path``; SigningKeyError says what is wrong with it."""
    try:
        return read_private_key(path)
    except KeyFileError as error:
        raise SigningKeyError(
            f"The signing key file {path} {error.problem}: make one with `python manage.py new_signing_key <path>` "
            "or `openssl genpkey -algorithm ed25519 -out <path>`."
        ) from None


def write_new_key(path: Path) -> Ed25519PrivateKey:
    """A new key written to ``path`` readable by its owner only, unless a file is there already (FileExistsError).

    Written beside it first and linked into place, so a process that reads ``path`` never sees half a key, and of
    two processes making one at once, one key wins and both use it."""
    key = Ed25519PrivateKey.generate()
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".signing-key-")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(pem_of(key))
        os.link(temporary, path)
    finally:
        os.unlink(temporary)
    return key


def development_key_path() -> Path:
    return Path(settings.BASE_DIR) / "var" / "signing-key.pem"


@cache
def current_key() -> KeyPair:
    """The key this process signs with: ``CONSOLE_SIGNING_KEY_FILE``'s, or (development only, where the production
    check lets it be unset) the checkout's own, made on first use."""
    configured = getattr(settings, "CONSOLE_SIGNING_KEY_FILE", "")
    if configured:
        return key_pair(read_key_file(Path(configured)))
    path = development_key_path()
    try:
        return key_pair(write_new_key(path))
    except FileExistsError:
        return key_pair(read_key_file(path))
    except OSError as error:  # var/ not writable, say: a SigningKeyError as for a configured file
        raise SigningKeyError(
            f"The development signing key {path} cannot be made ({error.strerror or error})."
        ) from None


def register_current_key() -> KeyPair:
    """Keep the current key's public half in ``SigningKey`` (once; its first registration's time stands).

    Called as each console process's supervisor starts (runs/runner.py ``ensure_started``), never on the answer's
    path; it also reads the key file then, so the first answer does not."""
    pair = current_key()
    SigningKey.objects.get_or_create(kid=pair.kid, defaults={"public_key": pair.public_b64})
    return pair


aregister_current_key = database_sync_to_async(register_current_key)

_registered_kids: set[str] = set()  # keys this process has registered (a rotation brings a new kid)


def register_current_key_once() -> KeyPair:
    """``register_current_key`` the first time this process signs with its key, then nothing: the door calls it
    before its transaction, so a process whose supervisor has not started (a management command, a worker) still
    leaves the public half of what it signs with, and the registration is never undone with an answer rolled
    back. Only a registration that succeeded is remembered."""
    pair = current_key()
    if pair.kid not in _registered_kids:
        register_current_key()
        _registered_kids.add(pair.kid)
    return pair


def public_key_of(signing_key: SigningKey) -> Ed25519PublicKey:
    raw = base64.urlsafe_b64decode(signing_key.public_key + "=" * (-len(signing_key.public_key) % 4))
    return Ed25519PublicKey.from_public_bytes(raw)


def is_genuine(signing_key: SigningKey) -> bool:
    """Whether the row's kid is the id of its own public key (``console_remote.key_id``), as every row the console
    registers is; a row written by hand under another key's id is not, and is never used."""
    try:
        raw = base64.urlsafe_b64decode(signing_key.public_key + "=" * (-len(signing_key.public_key) % 4))
    except (ValueError, TypeError):
        return False
    return len(raw) == 32 and key_id(raw) == signing_key.kid


def planted_keys() -> list[str]:
    """The kids of SigningKey rows that are not genuine (``is_genuine``), for verify_audit to name."""
    return sorted(row.kid for row in SigningKey.objects.order_by("kid") if not is_genuine(row))


def verifying_keys() -> dict[str, Ed25519PublicKey]:
    """The public keys an answer of this console may be signed with, by kid: every registered one (rotated-away
    keys stay, so old answers still verify; a row whose kid is not its key's id is left out) and the current key
    even where its row is missing (a database rolled back or restored from before this process started)."""
    found = {row.kid: public_key_of(row) for row in SigningKey.objects.all() if is_genuine(row)}
    pair = current_key()
    found[pair.kid] = pair.private_key.public_key()
    return found


@dataclass(frozen=True)
class PublishedKey:
    """One verifying key as ``GET /api/v1/signing-keys`` gives it; ``created_at`` is None for a current key
    whose registration row is missing."""

    kid: str
    public_key: str
    pem: str
    current: bool
    created_at: datetime | None
    alg: str = SIGNATURE_ALGORITHM


def published_keys() -> list[PublishedKey]:
    """The verifying keys (``verifying_keys``, so never a row whose kid is not its key's id) for hosts to pin: the
    current key first, then the others newest first, each with its raw public half in unpadded base64url and as a SubjectPublicKeyInfo PEM."""
    pair = current_key()
    rows = {row.kid: row for row in SigningKey.objects.order_by("-created_at", "kid") if is_genuine(row)}
    current_row = rows.pop(pair.kid, None)
    published = [_published(pair.kid, pair.public_b64, pair.private_key.public_key(), current=True, row=current_row)]
    published += [
        _published(kid, row.public_key, public_key_of(row), current=False, row=row) for kid, row in rows.items()
    ]
    return published


apublished_keys = database_sync_to_async(published_keys)


def _published(
    kid: str, public_b64: str, public_key: Ed25519PublicKey, *, current: bool, row: SigningKey | None
) -> PublishedKey:
    pem = public_key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return PublishedKey(
        kid=kid,
        public_key=public_b64,
        pem=pem.decode(),
        current=current,
        created_at=row.created_at if row else None,
    )
