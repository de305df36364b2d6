"""API tokens: issue (the secret is shown once), authenticate a bearer, revoke.

A token is ``tnx_`` plus 32 random bytes (url-safe base64), so a plain sha256 is
enough to store it: there is nothing to brute-force.

A verified token is kept in the process for at most ``settings.TOOLNEXUS["TOKEN_RECHECK_SECONDS"]``
(keyed by its digest), so a host's calls cost no read and no write. Revoking a token, or
deactivating or deleting its user, drops it from the process that did it at once (signals);
every other console process reads the row again within that bound (docs/team.md, "API tokens").
"""

import copy
import functools
import hashlib
import logging
import secrets
import threading
import time
from datetime import timedelta

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from approvals.models import ApiToken
from approvals.team import lockout

logger = logging.getLogger(__name__)

SCHEME = "tnx_"
PREFIX_LENGTH = len(SCHEME) + 8  # "tnx_" and the first 8 characters of the secret: enough to tell tokens apart
# last_used_at is written at most this often per token, and only when a process reads the token's row again
# (at most every TOKEN_RECHECK_SECONDS): a call answered from the verified tokens writes nothing.
LAST_USED_RESOLUTION = timedelta(seconds=30)


class TokenError(ValueError):
    """A token that cannot be used, worded for the person holding it."""


def digest_of(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def issue_token(user: User, name: str | None = "") -> tuple[ApiToken, str]:
    """Create a token for ``user``; returns ``(row, secret)``. The secret is not stored and cannot be shown again."""
    secret = SCHEME + secrets.token_urlsafe(32)
    row = ApiToken.objects.create(
        user=user, name=(name or "").strip()[:100], prefix=secret[:PREFIX_LENGTH], digest=digest_of(secret)
    )
    return row, secret


def bearer_secret(authorization: str | None) -> str | None:
    """The secret in an ``Authorization: Bearer <token>`` value, or None when it is not a bearer header."""
    if not authorization:
        return None
    scheme, _, secret = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return secret.strip()


def _log_refusal(client: HttpRequest | None) -> None:
    """The "token refused" line: where it came from, never the token (nor its prefix: it may be a guess)."""
    path = client.path if client is not None else ""
    channel = "api" if path.startswith("/api/") else "socket" if path.startswith("/ws/") else None
    address = client.META.get("REMOTE_ADDR") if client is not None else None
    logger.warning("token refused", extra={"fields": {"outcome": "refused", "channel": channel, "address": address}})


def authenticate(secret: str | None, *, client: HttpRequest | None = None) -> ApiToken:
    """The active token row (with its user) for ``secret``; raises TokenError saying why not.

    ``client`` (lockout.client_request) is who presents it: a refused token counts against that
    client address, and once the address is locked out a refused token raises lockout.LockedOut.
    A valid token always passes: it is no guess, and hosts behind one shared address must not
    lose their good tokens to another's bad ones. The lockout is read only on a refusal.
    """
    try:
        return _authenticate(secret)
    except TokenError:
        _log_refusal(client)
        if client is not None:
            lockout.check_token_allowed(client)  # locked already: refused unchecked, the lock not extended
            lockout.record_token_refused(client)
        raise


aauthenticate = database_sync_to_async(authenticate)


# digest -> (the token row with its user as verified, time.monotonic() of the verification)
_verified: dict[str, tuple[ApiToken, float]] = {}
_verified_lock = threading.Lock()
# Counts forget_verified calls: a verification keeps its row only if nothing was forgotten since it began, so
# a row read before a revoke is never kept after the revoke dropped what was kept.
_forgotten = 0


def recheck_seconds() -> float:
    """How long a verified token is trusted in this process before its row is read again."""
    return float(settings.TOOLNEXUS.get("TOKEN_RECHECK_SECONDS", 5.0))


def _held(digest: str) -> ApiToken | None:
    """A copy of the token verified within the bound (each call gets its own row and user), or None."""
    with _verified_lock:
        held = _verified.get(digest)
        if held is None:
            return None
        row, at = held
        if time.monotonic() - at >= recheck_seconds():
            del _verified[digest]
            return None
    token, user = copy.copy(row), copy.copy(row.user)
    token.user = user
    return token


def forget_verified(*, digest: str | None = None, user_id: int | None = None) -> None:
    """Drop verified tokens from this process: one (``digest``), a user's (``user_id``), or all (neither)."""
    global _forgotten
    with _verified_lock:
        _forgotten += 1
        if digest is None and user_id is None:
            _verified.clear()
        for key in [k for k, (row, _at) in _verified.items() if k == digest or row.user_id == user_id]:
            del _verified[key]


def forget_now_and_at_commit(*, digest: str | None = None, user_id: int | None = None) -> None:
    """``forget_verified`` now and, inside a transaction, again once it commits: a call that verifies the token
    in between reads the row as it was before the change and must not keep it past the commit."""
    forget_verified(digest=digest, user_id=user_id)
    if transaction.get_connection().in_atomic_block:
        transaction.on_commit(functools.partial(forget_verified, digest=digest, user_id=user_id))


def forget_token(instance: ApiToken, **_ignored: object) -> None:
    """Signal receiver: a token row changed or went away in this process (revoked, deleted)."""
    forget_now_and_at_commit(digest=instance.digest)


def forget_tokens_of_user(instance: User, **_ignored: object) -> None:
    """Signal receiver: a user changed or went away in this process (deactivated, deleted)."""
    forget_now_and_at_commit(user_id=instance.pk)


def _authenticate(secret: str | None) -> ApiToken:
    if not secret:
        raise TokenError("The Authorization header has no token after 'Bearer'.")
    digest = digest_of(secret)
    held = _held(digest)
    if held is not None:
        return held
    with _verified_lock:
        verified_at, forgotten = time.monotonic(), _forgotten
    row = ApiToken.objects.select_related("user").filter(digest=digest).first()
    if row is None:
        raise TokenError("This token is not known to the console. Issue one at /tokens/ or with manage.py issue_token.")
    if row.is_revoked:
        raise TokenError(f"Token {row.prefix}… was revoked; issue a new one at /tokens/.")
    if not row.user.is_active:
        raise TokenError(f"Token {row.prefix}… belongs to an inactive user.")
    now = timezone.now()
    if row.last_used_at is None or now - row.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
        row.last_used_at = now
    with _verified_lock:
        if _forgotten != forgotten:  # a revoke (or a user's change) came while the row was read: not kept
            return row
        _verified[digest] = (row, verified_at)
    return _held(digest) or row


def is_active(token_id: int) -> bool:
    """Whether a token still works (not revoked, its user active): an open host socket re-checks this."""
    return ApiToken.objects.filter(pk=token_id, revoked_at__isnull=True, user__is_active=True).exists()


ais_active = database_sync_to_async(is_active)


def own_token_of(user: User, secret: str) -> ApiToken | None:
    """``user``'s token row for ``secret``, or None when the secret is not one of theirs."""
    return ApiToken.objects.filter(user=user, digest=digest_of(secret)).first()


def tokens_of(user: User) -> list[ApiToken]:
    return list(ApiToken.objects.filter(user=user))


def revoke_token(user: User, token_id: int) -> ApiToken:
    """Revoke one of ``user``'s tokens; returns the row, or raises TokenError if it is not theirs."""
    row = ApiToken.objects.filter(user=user, pk=token_id).first()
    if row is None:
        raise TokenError("There is no such token among yours.")
    if not row.is_revoked:
        ApiToken.objects.filter(pk=row.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        row.refresh_from_db()
    forget_now_and_at_commit(digest=row.digest)  # refused at once here; other processes within TOKEN_RECHECK_SECONDS
    return row
