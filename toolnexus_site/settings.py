"""Settings for toolnexus console.

The embedded default needs no set-up: SQLite in WAL mode and the in-memory channel
layer, one process. Everything a deployment changes comes from the environment.
"""

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from toolnexus_site.deployment import console_environment

BASE_DIR = Path(__file__).resolve().parent.parent


def _env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


# CONSOLE_ENV: development (the default: `make run` over http) or production, which refuses to start
# without its own secrets and hosts, naming each one to set (docs/operations.md, "Production settings").
_environment = console_environment(os.environ)
CONSOLE_ENV = _environment.name
# DJANGO_SECRET_KEY or DJANGO_SECRET_KEY_FILE; the previous keys in DJANGO_SECRET_KEY_FALLBACKS while
# sessions and reset links signed with them run out.
SECRET_KEY = _environment.secret_key
SECRET_KEY_FALLBACKS = _environment.secret_key_fallbacks
# Off unless DJANGO_DEBUG=1 (refused in production): people see the console's own 404 and 500 pages.
DEBUG = _environment.debug
ALLOWED_HOSTS = _environment.allowed_hosts

# A reviewer signs in once a shift: CONSOLE_SESSION_HOURS (12) from the login, not renewed by use.
SESSION_COOKIE_AGE = _environment.session_seconds
# Production is served over https: cookies never travel over http, browsers are told to stay on https.
SESSION_COOKIE_SECURE = _environment.production
CSRF_COOKIE_SECURE = _environment.production
SECURE_HSTS_SECONDS = _environment.hsts_seconds
SECURE_HSTS_INCLUDE_SUBDOMAINS = _environment.hsts_include_subdomains
SECURE_HSTS_PRELOAD = _environment.hsts_preload
SECURE_SSL_REDIRECT = _environment.ssl_redirect
# Health probes come over plain http from inside the cluster (another layer answers them before Django).
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
# Trusted only when the operator says a proxy terminates TLS (CONSOLE_PROXY_TLS=1) and sets this header
# itself: otherwise any client could claim https.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if _environment.proxy_tls else None

# Full scheme://host:port origins a browser may open the console's WebSocket from.
# A host-only pattern would let any local port in, so the console checks these
# exact values (see approvals.web.security.OriginValidator). Empty means "the origin
# must match the Host header the socket was opened on".
CONSOLE_ALLOWED_ORIGINS = _env_list("CONSOLE_ALLOWED_ORIGINS")
CSRF_TRUSTED_ORIGINS = CONSOLE_ALLOWED_ORIGINS
# The Content-Security-Policy header on every response (approvals.web.security.content_security_policy),
# as Django 6.0's setting of this name: the console's own sources plus CONSOLE_CSP_EXTRA
# ("script-src https://analytics.example.com; connect-src https://analytics.example.com").
from toolnexus_site.deployment import content_security_policy  # noqa: E402

SECURE_CSP = content_security_policy(os.environ.get("CONSOLE_CSP_EXTRA"))
# A CSRF refusal under /api/ is JSON (elsewhere Django's view with templates/403_csrf.html).
CSRF_FAILURE_VIEW = "approvals.web.security.csrf_failure"

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    # Login and API-token lockout (approvals/team/lockout.py): failed attempts in its tables, admin included.
    "axes",
    "approvals",
]

# Django's own middleware, as approvals.hotpath.loop_middleware's subclasses: each hook is called on the
# event loop instead of in a thread hop of its own, unless it would do database work.
MIDDLEWARE = [
    # Outermost, so every response gets the Content-Security-Policy header (SECURE_CSP), refusals included.
    "approvals.web.security.content_security_policy",
    # An API call with a Host the console does not serve is refused in JSON, not Django's HTML page.
    "approvals.web.security.api_bad_host_is_json",
    "approvals.hotpath.loop_middleware.Security",
    "approvals.hotpath.loop_middleware.Session",
    "approvals.hotpath.loop_middleware.Common",
    # Before the CSRF check: an API call with Authorization: Bearer cannot be forged cross-site.
    "approvals.web.security.bearer_calls_skip_csrf",
    "approvals.hotpath.loop_middleware.Csrf",
    "approvals.hotpath.loop_middleware.Authentication",
    "approvals.hotpath.loop_middleware.Messages",
    "approvals.hotpath.loop_middleware.XFrameOptions",
    # On SQLite an API call's database work queues on the one thread runs and sockets share.
    "approvals.hotpath.database_thread.api_calls_share_the_database_thread",
    # Last, as axes asks: turns a login its backend refused for a lockout into the lockout page.
    # Async-capable: it leaves the loop only for a locked-out response.
    "axes.middleware.AxesMiddleware",
]

# Django's checks look for its security, clickjacking and CSRF middleware by dotted path, and the console
# installs subclasses of them (above): approvals.checks runs the checks again seeing those, and reports a
# middleware really missing as approvals.W101-W103 (docs/operations.md, "Production settings").
SILENCED_SYSTEM_CHECKS = ["security.W001", "security.W002", "security.W003"]

ROOT_URLCONF = "toolnexus_site.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "approvals.web.password_reset.context",
            ],
        },
    },
]

WSGI_APPLICATION = None
ASGI_APPLICATION = "toolnexus_site.asgi.application"

SQLITE_PATH = os.environ.get("CONSOLE_SQLITE_PATH", str(BASE_DIR / "var" / "db.sqlite3"))
(BASE_DIR / "var").mkdir(exist_ok=True)  # the embedded default needs no set-up
# Pages (4 KiB) the WAL may hold before a commit checkpoints it (40 MB).
SQLITE_WAL_CEILING_PAGES = 10_000

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": SQLITE_PATH,
        # Runs, dashboards and the expiry timer write concurrently: WAL lets readers
        # go on during a write, IMMEDIATE takes the write lock up front (no
        # upgrade deadlocks), and the timeout waits out a busy database.
        # wal_autocheckpoint: a thread checkpoints the WAL twice a second (sqlite_wal.py), so no
        # commit should pay for a checkpoint itself (docs/performance.md); the ceiling is for a
        # process without that thread.
        "OPTIONS": {
            "init_command": (
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                f"PRAGMA wal_autocheckpoint={SQLITE_WAL_CEILING_PAGES};"
            ),
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        },
        # Each thread keeps its connection: opening one (file, pragmas, Django's SQL
        # functions) cost more than the query it served on a run's path.
        "CONN_MAX_AGE": None,
        # Tests touch the database from worker threads; a file (not shared-cache
        # memory) gives them the same WAL locking as production. One per test process,
        # so two test runs in one checkout never share it; Django deletes it afterwards.
        "TEST": {
            "NAME": os.environ.get("CONSOLE_TEST_SQLITE_PATH", str(BASE_DIR / "var" / f"test-db-{os.getpid()}.sqlite3"))
        },
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The deployment profile: DATABASE_URL and REDIS_URL move the console from the embedded
# default to PostgreSQL and Redis; nothing else changes (docs/scaling.md).
from toolnexus_site.deployment import channel_layers, postgres_database  # noqa: E402

if os.environ.get("DATABASE_URL"):
    DATABASES["default"] = postgres_database(os.environ["DATABASE_URL"])

# Messages a channel may hold before the layer drops new ones. Dropped messages cost
# latency, never answers: listeners catch up from the database.
CHANNEL_CAPACITY = int(os.environ.get("CONSOLE_CHANNEL_CAPACITY", "100"))
CHANNEL_LAYERS = channel_layers(os.environ.get("REDIS_URL"), CHANNEL_CAPACITY)

# The audit chain's HMAC keys, kept out of the database so rewriting the trail needs them:
# "1:<secret>,2:<secret>" (CONSOLE_AUDIT_KEYS or CONSOLE_AUDIT_KEYS_FILE), the highest version sealing
# new events (docs/team.md, "The audit trail").
CONSOLE_AUDIT_KEYS = _environment.audit_keys
# The Ed25519 key the console signs each Answer with (approvals/signing/keys.py, docs/signing.md): a PKCS#8 PEM file.
# Unset in development, the checkout's own is made once at var/signing-key.pem; production requires it.
CONSOLE_SIGNING_KEY_FILE = _environment.signing_key_file
# How long the audit sealer gathers committed events before it chains them in one batch (approvals/audit/sealer.py);
# an event is protected only by its own MAC until then. "off": no sealer in this process.
_seal_seconds = os.environ.get("CONSOLE_AUDIT_SEAL_SECONDS", "0.5")
CONSOLE_AUDIT_SEAL_SECONDS = None if _seal_seconds == "off" else float(_seal_seconds)
# How often each running sealer also looks for events no commit here woke it for (another process's, one left by
# a failed sealing) and chains them: the longest an event stays unchained while any console seals.
# At least 0.1 s: 0 would have every sealer query the table in a tight loop.
CONSOLE_AUDIT_SEAL_POLL_SECONDS = max(0.1, float(os.environ.get("CONSOLE_AUDIT_SEAL_POLL_SECONDS", "5")))

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# axes' backend first: a locked-out account or address is refused before its password is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

# Lockout (django-axes, approvals/team/lockout.py). CONSOLE_LOCKOUT_FAILURES failed logins for one account,
# or failed logins and refused API tokens from one client address, each within
# CONSOLE_LOCKOUT_MINUTES of the one before, lock that account or address for CONSOLE_LOCKOUT_MINUTES
# from the last of them. Attempts while locked are refused unchecked and do not extend the lock.
AXES_FAILURE_LIMIT = int(os.environ.get("CONSOLE_LOCKOUT_FAILURES", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=float(os.environ.get("CONSOLE_LOCKOUT_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = "approvals.team.lockout.lockout_parameters"
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "approvals.web.views.login_lockout_response"
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"
# The client address is REMOTE_ADDR: the connecting peer's, or behind a proxy listed below, the client's.
AXES_SENSITIVE_PARAMETERS = ["username", "ip_address", "token"]

# Reverse proxies whose X-Forwarded-For and X-Forwarded-Proto the console believes: addresses or networks,
# comma-separated, none by default (approvals/web/proxy_headers.py). Serve with daphne's --proxy-headers off.
from toolnexus_site.deployment import DeploymentConfigError, trusted_proxies  # noqa: E402

CONSOLE_TRUSTED_PROXIES = trusted_proxies(os.environ.get("CONSOLE_TRUSTED_PROXIES"))
if _environment.proxy_tls and not CONSOLE_TRUSTED_PROXIES:
    # X-Forwarded-Proto reaches Django only from a trusted proxy (approvals/web/proxy_headers.py removes it from
    # everyone else), so without one every request would look like http: a redirect loop, refused sign-ins.
    raise DeploymentConfigError(
        "CONSOLE_PROXY_TLS=1 needs CONSOLE_TRUSTED_PROXIES: the console believes X-Forwarded-Proto only from "
        'the proxies listed there (docs/operations.md, "Containers and a proxy").'
    )

# Who may read /metrics (approvals/web/metrics.py): a bearer token (CONSOLE_METRICS_TOKEN or _FILE) and client
# addresses or networks (CONSOLE_METRICS_ALLOW; loopback in development when unset, no one in production).
from toolnexus_site.deployment import metrics_access  # noqa: E402

CONSOLE_METRICS = metrics_access(os.environ, development=not _environment.production)

# Password reset by email is offered only when CONSOLE_EMAIL_HOST names an SMTP server
# (approvals/web/password_reset.py); without one the pages say to ask an administrator.
EMAIL_HOST = os.environ.get("CONSOLE_EMAIL_HOST", "")
EMAIL_PORT = int(os.environ.get("CONSOLE_EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("CONSOLE_EMAIL_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("CONSOLE_EMAIL_PASSWORD", "")
EMAIL_USE_TLS = os.environ.get("CONSOLE_EMAIL_SECURITY", "") == "starttls"
EMAIL_USE_SSL = os.environ.get("CONSOLE_EMAIL_SECURITY", "") == "ssl"
EMAIL_TIMEOUT = 10
DEFAULT_FROM_EMAIL = os.environ.get("CONSOLE_EMAIL_FROM", "toolnexus-console@localhost")
PASSWORD_RESET_BY_EMAIL = bool(EMAIL_HOST)

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# Static files (docs/operations.md, "Static files"): `manage.py collectstatic` copies them to STATIC_ROOT
# under content-hashed names (imports inside the ES modules rewritten to match) with gzip and brotli
# copies beside them; approvals.hotpath.static_files serves them on the event loop, a hashed name with
# a year-long immutable Cache-Control. With DEBUG on, pages link the unhashed names, read from static/.
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("CONSOLE_STATIC_ROOT") or BASE_DIR / "var" / "static")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "toolnexus_site.storage.HashedModulesStorage"},
}

# One format for every logger (approvals/telemetry/logs.py; docs/operations.md, "Logs"): CONSOLE_LOG_FORMAT=json
# writes one JSON object per line, anything else readable text; CONSOLE_LOG_LEVEL (INFO) is the least level
# written. Everything goes through the root logger's one handler, which writes to stderr from a thread of its
# own: daphne's logging.basicConfig handler is replaced, and Django's own handlers emptied, so no line is
# written twice. Django's configuration runs first; these loggers replace what it set on "django".
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "console": {"()": "approvals.telemetry.logs.formatter_for", "name": os.environ.get("CONSOLE_LOG_FORMAT")}
    },
    "handlers": {"console": {"()": "approvals.telemetry.logs.BackgroundHandler", "formatter": "console"}},
    "root": {"handlers": ["console"], "level": os.environ.get("CONSOLE_LOG_LEVEL", "INFO").upper()},
    "loggers": {
        "django": {"handlers": [], "level": "INFO", "propagate": True},
        "django.server": {"handlers": [], "level": "INFO", "propagate": True},
        # django-axes says each failed login at INFO twice; a lockout, at WARNING, is what counts (and is audited).
        "axes": {"level": "WARNING"},
    },
}


def _env_seconds_by_kind(name: str) -> dict[str, float]:
    """ "approval=3600,input=600" -> {"approval": 3600.0, "input": 600.0}."""
    result = {}
    for item in _env_list(name):
        kind, _, seconds = item.partition("=")
        result[kind.strip()] = float(seconds)
    return result


def _env_json(name: str, default: Any) -> Any:
    """A JSON value from the environment (TOOLNEXUS_MODELS='{"gpt": {...}}'); a bad one stops start-up."""
    import json

    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"{name} is not valid JSON: {exc}") from None


# toolnexus console settings. TOOLNEXUS_TOOL_MODULES (comma-separated dotted paths)
# adds to TOOL_MODULES; every toolnexus.Tool those modules expose is served.
TOOLNEXUS = {
    "TOOL_MODULES": ["approvals.demo_tools"] if os.environ.get("CONSOLE_DEMO_TOOLS", "1") == "1" else [],
    "MCP_CONFIG": os.environ.get("TOOLNEXUS_MCP_CONFIG") or None,
    "SKILLS_DIR": os.environ.get("TOOLNEXUS_SKILLS_DIR") or None,
    # toolnexus' builtins include bash, read and write: a web console serves only
    # the human-facing one unless a deployment opts into more.
    "BUILTINS": _env_list("TOOLNEXUS_BUILTINS", "question"),
    # A waiting run re-reads the database this often, so a lost notification
    # delays a resume by at most this long, never forever.
    "SAFETY_POLL_SECONDS": float(os.environ.get("CONSOLE_SAFETY_POLL_SECONDS", "1.0")),
    # A verified API token is trusted this long in one process before its row is read again: another
    # process's revocation (or its user's deactivation) is honoured within it; this process's at once.
    "TOKEN_RECHECK_SECONDS": float(os.environ.get("CONSOLE_TOKEN_RECHECK_SECONDS", "5.0")),
    # After its deadline or a cancel, a tool gets this long to return on its own
    # before the console stops waiting for it.
    "STOP_GRACE_SECONDS": float(os.environ.get("CONSOLE_STOP_GRACE_SECONDS", "1.0")),
    # Per-kind default lifetime, in seconds, for a request that arrives without
    # expiresAt, e.g. {"approval": 3600}. At the deadline the server itself
    # resolves it with ok=false, reason="expired".
    "DEFAULT_EXPIRY_SECONDS": _env_seconds_by_kind("CONSOLE_DEFAULT_EXPIRY"),
    # Whoever may answer a request may move its deadline later (approvals/review/deadlines.py): by this many
    # minutes a press, at most EXTEND_MAX_MINUTES in all per request.
    "EXTEND_STEP_MINUTES": int(os.environ.get("CONSOLE_EXTEND_STEP_MINUTES", "60")),
    "EXTEND_MAX_MINUTES": int(os.environ.get("CONSOLE_EXTEND_MAX_MINUTES", "1440")),
    # A policy's on_timeout "apply_defaults" approves a request only once it was open this many minutes (people
    # had the time to look); earlier, its passed deadline declines it (review/decisions.expire_request).
    "DEFAULTS_AFTER_MINUTES": float(os.environ.get("CONSOLE_DEFAULTS_AFTER_MINUTES", "5")),
    # Largest WebSocket frame a dashboard may send, in bytes.
    "MAX_FRAME_BYTES": int(os.environ.get("CONSOLE_MAX_FRAME_BYTES", "65536")),
    # Largest JSON body an API call may send, in bytes; more is refused with 413.
    "MAX_BODY_BYTES": int(os.environ.get("CONSOLE_MAX_BODY_BYTES", str(256 * 1024))),
    # Models an agent run may use, besides the built-in "scripted" one: name ->
    # {"style": "openai"|"anthropic", "base_url", "model", "api_key_env": "ENV_NAME"}.
    # The key itself stays in that environment variable; it is never stored or shown.
    "MODELS": _env_json("TOOLNEXUS_MODELS", {}),
    # An agent run stops (failed, "incomplete") after this many model turns.
    "AGENT_MAX_TURNS": int(os.environ.get("CONSOLE_AGENT_MAX_TURNS", "10")),
    # Prepended to every agent run's system prompt (the skills catalog follows it).
    "AGENT_SYSTEM_PROMPT": os.environ.get("CONSOLE_AGENT_SYSTEM_PROMPT", ""),
    # Who may answer what (approvals/team/policies.py), used when no Policy in the admin matches:
    # dicts with tool (fnmatch pattern), kind, users, groups, quorum, starter_may_answer,
    # assignees ("alice", "group:ops"), webhook_url and remind_minutes_before. First match wins. With none,
    # anyone logged in may answer, the run's starter included; "starter_may_answer": false
    # is four-eyes (someone else must approve).
    "POLICIES": _env_json("CONSOLE_POLICIES", []),
    # Policy webhooks: per-attempt timeout, attempts, first retry delay (doubled after each).
    "WEBHOOK_TIMEOUT_SECONDS": float(os.environ.get("CONSOLE_WEBHOOK_TIMEOUT_SECONDS", "5")),
    "WEBHOOK_ATTEMPTS": int(os.environ.get("CONSOLE_WEBHOOK_ATTEMPTS", "3")),
    "WEBHOOK_BACKOFF_SECONDS": float(os.environ.get("CONSOLE_WEBHOOK_BACKOFF_SECONDS", "0.5")),
    # The console's public address, for links in webhook messages (e.g. https://console.example.com).
    "PUBLIC_URL": os.environ.get("CONSOLE_PUBLIC_URL", ""),
    # "also here: bob" lasts this long after bob's dashboard last said it shows the request.
    "PRESENCE_TTL_SECONDS": float(os.environ.get("CONSOLE_PRESENCE_TTL_SECONDS", "30")),
    # Every console process writes a heartbeat this often; a process silent for
    # HEARTBEAT_TIMEOUT_SECONDS is dead, and a live one takes over its runs.
    "HEARTBEAT_SECONDS": float(os.environ.get("CONSOLE_HEARTBEAT_SECONDS", "2")),
    "HEARTBEAT_TIMEOUT_SECONDS": float(os.environ.get("CONSOLE_HEARTBEAT_TIMEOUT_SECONDS", "10")),
    # On SIGTERM (docs/operations.md, "Stopping a console"): /readyz answers 503 and the process keeps
    # serving at least DRAIN seconds; tools executing get up to GRACE seconds from the signal to finish
    # or suspend before their tokens are tripped. Keep DRAIN and GRACE, plus STOP_GRACE_SECONDS and a
    # second, under the orchestrator's kill timeout (compose's stop_grace_period: 10 s by default).
    "SHUTDOWN_DRAIN_SECONDS": float(os.environ.get("CONSOLE_SHUTDOWN_DRAIN_SECONDS", "2")),
    "SHUTDOWN_GRACE_SECONDS": float(os.environ.get("CONSOLE_SHUTDOWN_GRACE_SECONDS", "7")),
    # /readyz waits at most this long for each check (the database, the channel layer) and reports it failing.
    "READINESS_TIMEOUT_SECONDS": float(os.environ.get("CONSOLE_READINESS_TIMEOUT_SECONDS", "0.5")),
    # Without any notification an open socket (dashboard or host) still re-reads the newest
    # event about this often: each wait is drawn from 0.75x to 1.25x of it, so sockets opened
    # together do not all query at the same moment.
    "SAFETY_TICK_SECONDS": float(os.environ.get("CONSOLE_SAFETY_TICK_SECONDS", "5")),
}
