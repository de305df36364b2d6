"""The deployment profile: the environment (development or production) and what it needs, and the
settings for PostgreSQL and Redis read from two URLs.

Kept apart from settings.py so a bad setting says what is wrong before Django starts.
"""

import hashlib
import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, parse_qsl, unquote, urlsplit

from django.core.checks.security.base import (
    SECRET_KEY_INSECURE_PREFIX,
    SECRET_KEY_MIN_LENGTH,
    SECRET_KEY_MIN_UNIQUE_CHARACTERS,
)

from approvals.signing.key_files import KeyFileError, read_private_key


class DeploymentConfigError(ValueError):
    """A deployment setting (CONSOLE_ENV and what it needs, DATABASE_URL, REDIS_URL, CONSOLE_AUDIT_KEYS,
    CONSOLE_SIGNING_KEY_FILE, CONSOLE_TRUSTED_PROXIES) cannot be used as given; the message says what to change."""


# Public, so it seals nothing a production console keeps: version 1 of a development trail's audit key is
# derived from it, so it stays as it is (docs/operations.md, "Moving a development trail to real keys").
DEVELOPMENT_SECRET_KEY = "dev-only-insecure-key-set-DJANGO_SECRET_KEY-in-production"
DEVELOPMENT_ALLOWED_HOSTS = "127.0.0.1,localhost,[::1]"
ENVIRONMENTS = ("development", "production")
# A reviewer logs in once a shift: a session left open on a shared machine ends by the next one.
DEFAULT_SESSION_HOURS = 12
DEFAULT_HSTS_SECONDS = 31_536_000  # a year, what hstspreload.org asks for
NEW_SECRET = "python -c 'import secrets; print(secrets.token_urlsafe(50))'"
NEW_SIGNING_KEY = (
    "make one with `python manage.py new_signing_key <path>` (from a development checkout) or "
    "`openssl genpkey -algorithm ed25519 -out <path>`, readable by the console's user only"
)
# Secrets a deployment may give as a file instead (NAME_FILE, e.g. a container's /run/secrets/...).
SECRETS = ("DJANGO_SECRET_KEY", "DJANGO_SECRET_KEY_FALLBACKS", "CONSOLE_AUDIT_KEYS")


@dataclass(frozen=True)
class ConsoleEnvironment:
    """What CONSOLE_ENV decides, read by ``console_environment``; settings.py copies it into Django's names."""

    name: str
    secret_key: str
    secret_key_fallbacks: list[str]
    debug: bool
    allowed_hosts: list[str]
    audit_keys: dict[int, bytes]
    session_seconds: int
    # The Ed25519 key answers are signed with (approvals/signing/keys.py); "" in development: var/signing-key.pem.
    signing_key_file: str = ""
    # Production only: over https, cookies that never travel over http, HSTS and the redirect to https.
    hsts_seconds: int = 0
    hsts_include_subdomains: bool = False
    hsts_preload: bool = False
    ssl_redirect: bool = False
    # Whether a proxy in front terminates TLS and says so in X-Forwarded-Proto (CONSOLE_PROXY_TLS=1).
    proxy_tls: bool = False

    @property
    def production(self) -> bool:
        return self.name == "production"


def console_environment(environ: Mapping[str, str]) -> ConsoleEnvironment:
    """``CONSOLE_ENV`` (``development``, the default, or ``production``) and the settings it governs.

    Production refuses to start without its own ``DJANGO_SECRET_KEY`` (Django's W009 rule),
    ``DJANGO_ALLOWED_HOSTS``, ``CONSOLE_AUDIT_KEYS`` and ``CONSOLE_SIGNING_KEY_FILE``, or with ``DJANGO_DEBUG=1``: one
    DeploymentConfigError names every setting to change, so a deployment is fixed in one go.
    """
    name = environ.get("CONSOLE_ENV", "development")
    if name not in ENVIRONMENTS:
        raise DeploymentConfigError(
            f"CONSOLE_ENV must be development or production (got {name!r}); leave it unset for development."
        )
    problems: list[str] = []
    secrets = {secret: read_secret(environ, secret, problems) for secret in SECRETS}
    session_seconds = round(_hours(environ, "CONSOLE_SESSION_HOURS", DEFAULT_SESSION_HOURS, problems) * 3600)
    hosts = [host.strip() for host in environ.get("DJANGO_ALLOWED_HOSTS", "").split(",") if host.strip()]
    fallbacks = [key.strip() for key in secrets["DJANGO_SECRET_KEY_FALLBACKS"].split(",") if key.strip()]
    signing_key_file = environ.get("CONSOLE_SIGNING_KEY_FILE", "")
    if not signing_key_file and name == "production":
        problems.append(
            "CONSOLE_SIGNING_KEY_FILE is not set: give the console the Ed25519 key it signs answers with, a PEM "
            f"file: {NEW_SIGNING_KEY} (docs/signing.md)."
        )
    # In development too: a key file named and unusable is a mistake, not a reason to sign with another key.
    elif signing_key_file and (problem := signing_key_problem(Path(signing_key_file))):
        problems.append(problem)
    if name == "development":
        secret_key = secrets["DJANGO_SECRET_KEY"] or DEVELOPMENT_SECRET_KEY
        environment = ConsoleEnvironment(
            name=name,
            secret_key=secret_key,
            secret_key_fallbacks=fallbacks,
            debug=environ.get("DJANGO_DEBUG", "0") == "1",
            allowed_hosts=hosts or DEVELOPMENT_ALLOWED_HOSTS.split(","),
            audit_keys=_audit_keys(secrets["CONSOLE_AUDIT_KEYS"], secret_key, problems),
            session_seconds=session_seconds,
            signing_key_file=signing_key_file,
        )
    else:
        environment = _production(environ, secrets, hosts, fallbacks, session_seconds, problems)
        environment = replace(environment, signing_key_file=signing_key_file)
    if problems:
        where = "in production " if name == "production" else ""
        raise DeploymentConfigError(
            f"The console will not start {where}until these settings are changed:\n"
            + "\n".join(f"  - {problem}" for problem in problems)
            + '\nEach is described in docs/operations.md, "Production settings".'
        )
    return environment


def _production(
    environ: Mapping[str, str],
    secrets: dict[str, str],
    hosts: list[str],
    fallbacks: list[str],
    session_seconds: int,
    problems: list[str],
) -> ConsoleEnvironment:
    secret_key = secrets["DJANGO_SECRET_KEY"]
    if not secret_key:
        problems.append(
            "DJANGO_SECRET_KEY (or DJANGO_SECRET_KEY_FILE) is not set: give the console its own random key of "
            f"{SECRET_KEY_MIN_LENGTH} or more characters, e.g. {NEW_SECRET}."
        )
    elif problem := secret_key_problem(secret_key):
        problems.append(f"DJANGO_SECRET_KEY {problem}")
    for number, key in enumerate(fallbacks, start=1):
        if problem := secret_key_problem(key):
            problems.append(f"DJANGO_SECRET_KEY_FALLBACKS' key {number} {problem}")
    if environ.get("DJANGO_DEBUG", "0") not in ("", "0"):
        problems.append(
            "DJANGO_DEBUG is refused in production (got "
            f"{environ['DJANGO_DEBUG']!r}): its error pages show settings and code to whoever asks; unset it."
        )
    if not hosts:
        problems.append(
            "DJANGO_ALLOWED_HOSTS is not set: list the host names browsers and hosts use to reach the console, "
            "comma-separated, e.g. console.example.com."
        )
    elif "*" in hosts:
        problems.append(
            "DJANGO_ALLOWED_HOSTS has '*', which answers to any Host header (and puts it into links the console "
            "mails): list the console's own host names."
        )
    elif sorted(hosts) == sorted(DEVELOPMENT_ALLOWED_HOSTS.split(",")):
        problems.append(
            f"DJANGO_ALLOWED_HOSTS is the development default ({DEVELOPMENT_ALLOWED_HOSTS}): list the host names "
            "the console is reached by, e.g. console.example.com."
        )
    if not secrets["CONSOLE_AUDIT_KEYS"]:
        problems.append(
            "CONSOLE_AUDIT_KEYS (or CONSOLE_AUDIT_KEYS_FILE) is not set: give the audit trail a key of its own, "
            "e.g. 2:<secret> with a secret from python -c 'import secrets; print(secrets.token_urlsafe(32))' "
            "(a trail sealed in development is moved to it with manage.py reseal_audit first)."
        )
    return ConsoleEnvironment(
        name="production",
        secret_key=secret_key,
        secret_key_fallbacks=fallbacks,
        debug=False,
        allowed_hosts=hosts,
        # Only the keys named: a key derived from SECRET_KEY would let whoever holds that re-seal the trail.
        audit_keys=_audit_keys(secrets["CONSOLE_AUDIT_KEYS"], secret_key, problems, derive_version_1=False),
        session_seconds=session_seconds,
        hsts_seconds=_seconds(environ, "CONSOLE_HSTS_SECONDS", DEFAULT_HSTS_SECONDS, problems),
        hsts_include_subdomains=_flag(environ, "CONSOLE_HSTS_INCLUDE_SUBDOMAINS", True, problems),
        hsts_preload=_flag(environ, "CONSOLE_HSTS_PRELOAD", True, problems),
        ssl_redirect=_flag(environ, "CONSOLE_SSL_REDIRECT", True, problems),
        proxy_tls=_flag(environ, "CONSOLE_PROXY_TLS", False, problems),
    )


def secret_key_problem(key: str) -> str | None:
    """What makes ``key`` unfit for production, in words that follow its setting's name (never the key itself).

    Django's own rule (``manage.py check --deploy``, security.W009), and not the development key, which is public.
    """
    if key == DEVELOPMENT_SECRET_KEY:
        return f"is the development key, which anyone can read in the source: use a new one, e.g. {NEW_SECRET}."
    if key.startswith(SECRET_KEY_INSECURE_PREFIX):
        return (
            f"starts with {SECRET_KEY_INSECURE_PREFIX!r}, as Django's generated development keys do: use a new one, "
            f"e.g. {NEW_SECRET}."
        )
    if len(key) < SECRET_KEY_MIN_LENGTH:
        return f"is {len(key)} characters: use {SECRET_KEY_MIN_LENGTH} or more, random, e.g. {NEW_SECRET}."
    if len(set(key)) < SECRET_KEY_MIN_UNIQUE_CHARACTERS:
        return (
            f"has {len(set(key))} different characters: use a random key with {SECRET_KEY_MIN_UNIQUE_CHARACTERS} "
            f"or more, e.g. {NEW_SECRET}."
        )
    return None


def signing_key_problem(path: Path) -> str | None:
    """What makes the PEM file ``path`` unfit to sign answers with (unreadable, not an unencrypted PEM private
    key, not Ed25519), naming the file and how to make one; None when the console can sign with it. Read as
    approvals/signing/keys.py reads it once Django runs (approvals/signing/key_files.py)."""
    try:
        read_private_key(path)
    except KeyFileError as error:
        return f"CONSOLE_SIGNING_KEY_FILE names {path}, which {error.problem}: {NEW_SIGNING_KEY}."
    return None


def read_secret(environ: Mapping[str, str], name: str, problems: list[str]) -> str:
    """``name`` from the environment, or the contents of the file ``name``_FILE names (one trailing newline
    dropped, as ``echo`` and editors leave it); "" when neither is set. Both set, or a file that cannot be
    read, is a problem."""
    value = environ.get(name, "")
    path = environ.get(f"{name}_FILE", "")
    if not path:
        return value
    if value:
        problems.append(f"{name} and {name}_FILE are both set: keep one of them.")
        return value
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        problems.append(
            f"{name}_FILE names {path}, which cannot be read ({getattr(error, 'strerror', None) or error})."
        )
        return ""
    text = text.removesuffix("\n").removesuffix("\r")
    if not text:
        problems.append(f"{name}_FILE names {path}, which is empty.")
    return text


def _audit_keys(text: str, secret_key: str, problems: list[str], *, derive_version_1: bool = True) -> dict[int, bytes]:
    try:
        return audit_keys(text, secret_key, derive_version_1=derive_version_1)
    except DeploymentConfigError as error:
        problems.append(str(error))
        return {}


def _flag(environ: Mapping[str, str], name: str, default: bool, problems: list[str]) -> bool:
    value = environ.get(name, "")
    if value == "":
        return default
    if value not in ("0", "1"):
        problems.append(f"{name} must be 1 (on) or 0 (off) (got {value!r}).")
        return default
    return value == "1"


def _hours(environ: Mapping[str, str], name: str, default: float, problems: list[str]) -> float:
    value = environ.get(name, "")
    if value == "":
        return default
    try:
        hours = float(value)
    except ValueError:
        hours = 0.0
    if not 0 < hours < float("inf"):
        problems.append(f"{name} must be a number of hours above 0, e.g. 8 or 0.5 (got {value!r}).")
        return default
    return hours


def _seconds(environ: Mapping[str, str], name: str, default: int, problems: list[str]) -> int:
    value = environ.get(name, "")
    if value == "":
        return default
    if not value.isascii() or not value.isdigit():
        problems.append(f"{name} must be a whole number of seconds, 0 or more (got {value!r}).")
        return default
    return int(value)


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


def audit_keys(text: str | None, secret_key: str, *, derive_version_1: bool = True) -> dict[int, bytes]:
    """``CONSOLE_AUDIT_KEYS`` ("1:<secret>,2:<secret>") -> {version: key bytes}; the highest version seals.

    In development version 1 is, unless the setting names it, a key derived from SECRET_KEY: the one
    a console seals with before it is given keys of its own, so the events it sealed keep verifying
    after ``CONSOLE_AUDIT_KEYS=2:<secret>`` (and ``manage.py reseal_audit``) moves the trail to a new
    key. Production (``derive_version_1=False``) holds only the keys the setting names.
    """
    derived = hashlib.sha256(b"toolnexus-console audit chain\x00" + secret_key.encode()).digest()
    if not text or not text.strip():
        return {1: derived}
    keys: dict[int, bytes] = {}
    for position, entry in enumerate(text.split(","), start=1):
        version, separator, secret = entry.strip().partition(":")
        if not separator or not version.strip().isascii() or not version.strip().isdigit() or int(version) < 1:
            # By position, never by content: the entry may be a secret, and this message goes to the logs.
            raise DeploymentConfigError(
                "CONSOLE_AUDIT_KEYS must be comma-separated <version>:<secret> pairs with versions 1, 2, … "
                f"(entry {position} is not)."
            )
        if len(secret) < 32:
            raise DeploymentConfigError(
                f"CONSOLE_AUDIT_KEYS' key version {int(version)} is {len(secret)} characters; use at least 32 "
                "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')."
            )
        if int(version) in keys:
            raise DeploymentConfigError(f"CONSOLE_AUDIT_KEYS names key version {int(version)} twice.")
        keys[int(version)] = secret.encode()
    if derive_version_1:
        keys.setdefault(1, derived)
    return dict(sorted(keys.items()))


def trusted_proxies(text: str | None) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """``CONSOLE_TRUSTED_PROXIES`` ("172.30.0.10, 10.0.0.0/8") -> the networks whose forwarded headers count.

    Addresses or CIDR networks only: a host name would be resolved once and go stale when the
    proxy moves. Unset or empty trusts no one (approvals/web/proxy_headers.py).
    """
    networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    for entry in (text or "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise DeploymentConfigError(
                f"CONSOLE_TRUSTED_PROXIES must list IP addresses or networks, comma-separated "
                f"(e.g. 172.30.0.10 or 10.0.0.0/8); {entry[:40]!r} is neither."
            ) from None
        if network.prefixlen == 0:
            raise DeploymentConfigError(
                f"CONSOLE_TRUSTED_PROXIES' {entry} trusts every address, so any client could name its own: "
                "list your proxies' addresses or their network."
            )
        networks.append(network)
    return tuple(networks)


@dataclass(frozen=True)
class MetricsAccess:
    """Who may read ``/metrics`` (approvals/web/metrics.py): whoever presents the bearer ``token``, and any
    client in ``allow``. Neither set: no one."""

    token: str
    allow: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]


# Under CONSOLE_ENV=development, with CONSOLE_METRICS_ALLOW unset: a Prometheus on the same machine.
DEVELOPMENT_METRICS_ALLOW = "127.0.0.0/8,::1"


def metrics_access(environ: Mapping[str, str], *, development: bool) -> MetricsAccess:
    """``CONSOLE_METRICS_TOKEN`` (or ``CONSOLE_METRICS_TOKEN_FILE``) and ``CONSOLE_METRICS_ALLOW`` (addresses
    or networks, comma-separated; the client address as CONSOLE_TRUSTED_PROXIES leaves it). Unset, the allow
    list is loopback in development and empty in production, where /metrics is refused until one is set."""
    problems: list[str] = []
    token = read_secret(environ, "CONSOLE_METRICS_TOKEN", problems)
    if token and len(token) < 16:
        problems.append(
            f"CONSOLE_METRICS_TOKEN is {len(token)} characters long: give it 16 or more, e.g. {NEW_SECRET}."
        )
    text = environ.get("CONSOLE_METRICS_ALLOW")
    if text is None:
        text = DEVELOPMENT_METRICS_ALLOW if development else ""
    allow: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    for entry in text.split(","):
        entry = entry.strip()
        if not entry:
            continue
        try:
            allow.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            problems.append(
                "CONSOLE_METRICS_ALLOW must list IP addresses or networks, comma-separated "
                f"(e.g. 10.0.0.5 or 10.0.0.0/8); {entry[:40]!r} is neither."
            )
    if problems:
        raise DeploymentConfigError(
            "/metrics cannot be served as configured:\n"
            + "\n".join(f"  - {problem}" for problem in problems)
            + '\nEach is described in docs/operations.md, "Metrics".'
        )
    return MetricsAccess(token=token, allow=tuple(allow))


# The console's pages load only their own scripts, styles and images, and open sockets only to
# themselves: no inline script or style anywhere (docs/operations.md, "Content-Security-Policy").
# Django 6.0's SECURE_CSP shape (directive -> sources), so its own middleware can take over later.
CONTENT_SECURITY_POLICY = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "connect-src": ["'self'"],
    "img-src": ["'self'", "data:"],
    "frame-ancestors": ["'none'"],
    "base-uri": ["'none'"],
    "object-src": ["'none'"],
    "form-action": ["'self'"],
}
_DIRECTIVE = re.compile(r"[a-z]+(?:-[a-z]+)*")


def content_security_policy(extra: str | None) -> dict[str, list[str]]:
    """The console's policy plus ``CONSOLE_CSP_EXTRA``: ``"script-src https://a.example; img-src https:"``.

    Each source is added to its directive; a directive the policy does not name starts from
    default-src's sources, as the browser would have fallen back to them.
    """
    policy = {directive: list(sources) for directive, sources in CONTENT_SECURITY_POLICY.items()}
    for item in (extra or "").split(";"):
        if not item.strip():
            continue
        directive, *sources = item.split()
        if not _DIRECTIVE.fullmatch(directive) or not sources:
            raise DeploymentConfigError(
                f"CONSOLE_CSP_EXTRA: {item.strip()!r} is not a directive and its sources; write e.g. "
                '"script-src https://analytics.example.com; connect-src https://analytics.example.com".'
            )
        known = policy.setdefault(directive, list(policy["default-src"]))
        if known == ["'none'"]:
            known.clear()  # 'none' stands alone: an added source replaces it
        known.extend(source for source in sources if source not in known)
    return policy
