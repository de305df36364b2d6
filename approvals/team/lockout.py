"""Lockout after repeated failed logins and refused API tokens, by account and by client address.

django-axes does the counting, in its own tables (``AccessAttempt``, ``AccessLog``; both in the
admin): its authentication backend refuses a locked-out login before the password is checked,
and its signal handler records each failure. A refused API token is reported to axes the same
way a refused password is, through Django's ``user_login_failed`` signal, naming no account: it
counts towards its client address only, so one host's bad token never locks out another's good
one. The limits are ``AXES_FAILURE_LIMIT`` and ``AXES_COOLOFF_TIME`` (docs/team.md, "Lockout").

Everything here touches the database and runs in a thread (the login view's, the database
thread for API calls and sockets), never on the event loop.
"""

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from axes.handlers.proxy import AxesProxyHandler
from axes.helpers import get_cool_off, get_credentials, get_failure_limit
from django.contrib.auth.signals import user_login_failed
from django.http import HttpRequest
from django.utils import timezone

from approvals import events
from approvals.models import AuditEvent

# The credentials a refused token is reported with: no account, so the client address alone counts it.
TOKEN_CREDENTIALS = get_credentials(None)


def lockout_parameters(request: HttpRequest | None, credentials: dict[str, Any] | None = None) -> list[str]:
    """axes' ``AXES_LOCKOUT_PARAMETERS``: by account and by client address, each on its own.

    Failures that name no account (a refused token) are counted by address alone: axes would
    otherwise pool every one of them under one empty account and lock out every token holder.
    """
    username = (credentials or {}).get("username")
    return ["username", "ip_address"] if username else ["ip_address"]


@dataclass(frozen=True)
class Lock:
    """A lockout in force: until when, and whether the account or the client address is locked."""

    until: datetime  # aware
    by: str  # "account" or "address"

    @property
    def retry_after(self) -> int:
        """Whole seconds until it lifts (at least 1): the ``Retry-After`` header's value."""
        return max(1, math.ceil((self.until - timezone.now()).total_seconds()))

    def message(self, what: str = "login") -> str:
        whose = "this account" if self.by == "account" else "your address"
        return (
            f"Too many failed {what}s for {whose}: it is locked for now. "
            f"Try again in {_duration(self.retry_after)}, or ask an administrator to unlock it."
        )


class LockedOut(Exception):
    """Refused unchecked: the account or client address is locked out. ``lock`` says until when."""

    def __init__(self, lock: Lock, what: str) -> None:
        self.lock = lock
        super().__init__(lock.message(what))


def _duration(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    minutes = math.ceil(seconds / 60)
    return f"{minutes} minute{'s' if minutes != 1 else ''}"


def current_lock(request: HttpRequest, credentials: dict[str, Any]) -> Lock | None:
    """The lock on this request's account or address, or None.

    axes counts a row's failures while its latest is newer than the cool-down, so a lock lifts
    when enough of the newest rows have aged out to leave fewer failures than the limit.
    """
    handler = AxesProxyHandler.get_implementation()
    AxesProxyHandler.update_request(request)
    limit = get_failure_limit(request, credentials)
    cool_off = get_cool_off(request)
    parameters = lockout_parameters(request, credentials)
    locks: list[Lock] = []
    for parameter, attempts in zip(parameters, handler.get_user_attempts(request, credentials)):
        failures = 0
        for attempt_time, count in attempts.order_by("-attempt_time").values_list(
            "attempt_time", "failures_since_start"
        ):
            failures += count
            if failures >= limit:
                locks.append(
                    Lock(until=attempt_time + cool_off, by="account" if parameter == "username" else "address")
                )
                break
    return max(locks, key=lambda lock: lock.until, default=None)


def check_token_allowed(request: HttpRequest) -> None:
    """Raise LockedOut when the request's client address is locked out for refused tokens."""
    if not AxesProxyHandler.is_allowed(request, TOKEN_CREDENTIALS):
        raise LockedOut(lock_in_force(request, TOKEN_CREDENTIALS), "API token")


def record_token_refused(request: HttpRequest) -> None:
    """Count a refused token against its client address; raise LockedOut if it completes a lockout."""
    user_login_failed.send(sender=__name__, credentials=TOKEN_CREDENTIALS, request=request)
    if getattr(request, "axes_locked_out", False):
        raise LockedOut(lock_in_force(request, TOKEN_CREDENTIALS), "API token")


def lock_in_force(request: HttpRequest, credentials: dict[str, Any]) -> Lock:
    """The lock a refused login or token is under: the current one, or a full cool-off from now when axes
    refused before its rows show a lock (the failure that completes it is being recorded)."""
    return current_lock(request, credentials) or Lock(until=timezone.now() + get_cool_off(request), by="address")


def client_request(
    *, address: str | None, path: str, user_agent: str | None = None, accept: str | None = None
) -> HttpRequest:
    """A bare HttpRequest that tells axes who is calling (address, path, agent) and nothing else.

    API calls and socket handshakes are reported through one, so axes never reads their body
    or query string (where a socket's token may be).
    """
    request = HttpRequest()
    request.path = request.path_info = path
    request.META = {
        "REMOTE_ADDR": address,
        "PATH_INFO": path,
        "HTTP_USER_AGENT": user_agent or "<unknown>",
        "HTTP_ACCEPT": accept or "<unknown>",
    }
    return request


def client_of_api_call(request: HttpRequest) -> HttpRequest:
    return client_request(
        address=request.META.get("REMOTE_ADDR"),
        path=request.path,
        user_agent=request.META.get("HTTP_USER_AGENT"),
        accept=request.META.get("HTTP_ACCEPT"),
    )


def client_of_socket(scope: dict[str, Any]) -> HttpRequest:
    headers = {key.decode("latin1").lower(): value.decode("latin1") for key, value in scope.get("headers", [])}
    return client_request(
        address=(scope.get("client") or [None])[0],
        path=scope.get("path", ""),
        user_agent=headers.get("user-agent"),
        accept=headers.get("accept"),
    )


def audit_lockout(
    sender: object,
    request: HttpRequest | None = None,
    username: str | None = None,
    ip_address: str | None = None,
    **kwargs: object,
) -> None:
    """axes' ``user_locked_out`` receiver: the failure that starts a lockout goes into the audit trail.

    axes sends the signal again for each attempt refused while locked; those were not counted
    (``axes_failures_since_start`` is unset) and are not recorded again.
    """
    failures = getattr(request, "axes_failures_since_start", None)
    if request is None or failures is None:
        return
    credentials = getattr(request, "axes_credentials", None) or get_credentials(username)
    lock = lock_in_force(request, credentials)
    path = request.path or ""
    via = "api token" if path.startswith("/api/") else "socket token" if path.startswith("/ws/") else "login"
    events.record(
        AuditEvent.Action.AUTH_LOCKED_OUT,
        actor="system",
        payload={
            "locked": lock.by,
            "username": username or "",
            "address": ip_address or "",
            "via": via,
            "failures": failures,
            "until": lock.until.isoformat(),
            "cool_down_seconds": lock.retry_after,
        },
    )
