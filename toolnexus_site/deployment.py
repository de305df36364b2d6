"""The deployment profile: settings for PostgreSQL and Redis read from two URLs.

Kept apart from settings.py so a bad URL says what is wrong before Django starts.
"""

import hashlib
from typing import Any
from urllib.parse import SplitResult, parse_qsl, unquote, urlsplit


class DeploymentConfigError(ValueError):
    """A deployment setting (DATABASE_URL, REDIS_URL, CONSOLE_AUDIT_KEYS) cannot be used as given; the message says what to change."""


POSTGRES_SCHEMES = {"postgres", "postgresql", "pgsql"}
REDIS_SCHEMES = {"redis", "rediss", "unix"}


def postgres_database(url: str, *, pool_max: int = 20) -> dict[str, Any]:
    """``postgresql://user:pass@host:5432/name?sslmode=require`` -> a Django DATABASES entry.

    psycopg 3's connection pool is on (so CONN_MAX_AGE stays 0): runs, dashboards and
    the expiry timer share a few connections instead of opening one per thread.
    Query parameters other than pool_min/pool_max go to libpq as they are.
    """
    parts = urlsplit(url)
    if parts.scheme not in POSTGRES_SCHEMES:
        raise DeploymentConfigError(
            f"DATABASE_URL must start with postgresql:// (got {parts.scheme or 'no scheme'}://); "
            "leave it unset for the embedded SQLite database."
        )
    name = unquote(parts.path.lstrip("/"))
    if not name:
        raise DeploymentConfigError(
            "DATABASE_URL names no database: add it after the host, e.g. postgresql://host/console."
        )
    port = _port(parts, "DATABASE_URL")
    options = dict(parse_qsl(parts.query))
    pool = {
        "min_size": _count(options.pop("pool_min", 2), "pool_min", least=0),
        "max_size": _count(options.pop("pool_max", pool_max), "pool_max", least=1),
        "timeout": 20,
    }
    if pool["min_size"] > pool["max_size"]:
        raise DeploymentConfigError(
            f"DATABASE_URL's pool_min ({pool['min_size']}) is above its pool_max ({pool['max_size']})."
        )
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": unquote(parts.hostname or ""),
        "PORT": str(port or ""),
        "CONN_MAX_AGE": 0,
        "OPTIONS": {"pool": pool, **options},
        # Tests that run the whole suite on PostgreSQL get a database of their own.
        "TEST": {"NAME": f"test_{name}"},
    }


def channel_layers(redis_url: str | None, capacity: int) -> dict[str, Any]:
    """The channel layer: Redis when ``redis_url`` is set, else the in-memory layer (one process)."""
    if not redis_url:
        return {
            "default": {
                "BACKEND": "approvals.hotpath.channel_layer.FanOutInMemoryChannelLayer",
                "CONFIG": {"capacity": capacity},
            }
        }
    parts = urlsplit(redis_url)
    if parts.scheme not in REDIS_SCHEMES:
        # The scheme only: the rest of the URL may hold a password.
        raise DeploymentConfigError(
            f"REDIS_URL must start with redis://, rediss:// or unix:// (got {parts.scheme or 'no scheme'}://)."
        )
    _port(parts, "REDIS_URL")
    return {
        "default": {
            "BACKEND": "approvals.hotpath.redis_layer.WaitingPoolRedisChannelLayer",
            "CONFIG": {
                "hosts": [{"address": redis_url, **REDIS_CONNECTION_OPTIONS}],
                "capacity": capacity,
                "expiry": 60,
                "group_expiry": 86400,
            },
        }
    }


# redis-py's keyword arguments for the layer's connections (the URL's own query parameters win).
REDIS_CONNECTION_OPTIONS = {
    # channels_redis blocks up to 5 s (RedisChannelLayer.brpop_timeout) reading an idle channel:
    # a read must outlast that, or every idle read fails (redis-py's default is 5 s too).
    "socket_timeout": 15,
    "socket_connect_timeout": 5,
    # A peer gone silently is found by the kernel, and an idle pooled connection is pinged before reuse.
    "socket_keepalive": True,
    "health_check_interval": 30,
    # Per process. Past them a command waits up to ``timeout`` seconds for a free one
    # (approvals.hotpath.redis_layer): a burst of sockets joining or leaving queues instead of failing.
    "max_connections": 100,
    "timeout": 20,
}


def _port(parts: SplitResult, name: str) -> int | None:
    try:
        return parts.port
    except ValueError:  # not a number, or out of range
        raise DeploymentConfigError(
            f"{name} has a bad port: put a number from 1 to 65535 after the host, e.g. host:5432."
        ) from None


def _count(value: str | int, option: str, *, least: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = None
    if number is None or number < least:
        raise DeploymentConfigError(
            f"DATABASE_URL's {option} must be a whole number of connections, {least} or more (got {value!r})."
        )
    return number


def audit_keys(text: str | None, secret_key: str) -> dict[int, bytes]:
    """``CONSOLE_AUDIT_KEYS`` ("1:<secret>,2:<secret>") -> {version: key bytes}; the highest version seals.

    Version 1 is, unless the setting names it, a key derived from SECRET_KEY: the one a console
    seals with before it is given keys of its own, so the events it sealed keep verifying after
    ``CONSOLE_AUDIT_KEYS=2:<secret>`` (and ``manage.py reseal_audit``) moves the trail to a new key.
    """
    derived = hashlib.sha256(b"toolnexus-console audit chain\x00" + secret_key.encode()).digest()
    if not text or not text.strip():
        return {1: derived}
    keys: dict[int, bytes] = {}
    for entry in text.split(","):
        version, separator, secret = entry.strip().partition(":")
        if not separator or not version.strip().isascii() or not version.strip().isdigit() or int(version) < 1:
            raise DeploymentConfigError(
                "CONSOLE_AUDIT_KEYS must be comma-separated <version>:<secret> pairs with versions 1, 2, … "
                f"(got an entry starting {entry.strip()[:12]!r})."
            )
        if len(secret) < 32:
            raise DeploymentConfigError(
                f"CONSOLE_AUDIT_KEYS' key version {int(version)} is {len(secret)} characters; use at least 32 "
                "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')."
            )
        if int(version) in keys:
            raise DeploymentConfigError(f"CONSOLE_AUDIT_KEYS names key version {int(version)} twice.")
        keys[int(version)] = secret.encode()
    keys.setdefault(1, derived)
    return dict(sorted(keys.items()))
