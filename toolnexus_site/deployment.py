"""The deployment profile: settings for PostgreSQL and Redis read from two URLs.

Kept apart from settings.py so a bad URL says what is wrong before Django starts.
"""
from urllib.parse import parse_qsl, unquote, urlsplit


class DeploymentConfigError(ValueError):
    """DATABASE_URL or REDIS_URL cannot be used as given; the message says what to change."""


POSTGRES_SCHEMES = {"postgres", "postgresql", "pgsql"}
REDIS_SCHEMES = {"redis", "rediss", "unix"}


def postgres_database(url, *, pool_max=20):
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
        raise DeploymentConfigError("DATABASE_URL names no database: add it after the host, e.g. postgresql://host/console.")
    options = dict(parse_qsl(parts.query))
    pool = {
        "min_size": int(options.pop("pool_min", 2)),
        "max_size": int(options.pop("pool_max", pool_max)),
        "timeout": 20,
    }
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": unquote(parts.hostname or ""),
        "PORT": str(parts.port or ""),
        "CONN_MAX_AGE": 0,
        "OPTIONS": {"pool": pool, **options},
        # Tests that run the whole suite on PostgreSQL get a database of their own.
        "TEST": {"NAME": f"test_{name}"},
    }


def channel_layers(redis_url, capacity):
    """The channel layer: Redis when ``redis_url`` is set, else the in-memory layer (one process)."""
    if not redis_url:
        return {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer", "CONFIG": {"capacity": capacity}}}
    if urlsplit(redis_url).scheme not in REDIS_SCHEMES:
        raise DeploymentConfigError(f"REDIS_URL must start with redis:// or rediss:// (got {redis_url!r}).")
    return {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [redis_url], "capacity": capacity, "expiry": 60, "group_expiry": 86400},
        }
    }
