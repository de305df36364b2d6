"""System checks (``manage.py check``, and every ``migrate`` that ``make run`` does): settings read lazily are
checked when the console starts, not when the first request needs them."""

import sqlite3
from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.core.checks.security import base, csrf
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from approvals.team import policies


@register(Tags.security)
def policy_settings(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[CheckMessage]:
    """``TOOLNEXUS["POLICIES"]`` must parse; an approvals policy that does not say whether its starter may
    answer is named, since four-eyes became opt-in (a starter may now approve their own)."""
    try:
        policies.settings_rules()
    except ImproperlyConfigured as error:
        return [Error(str(error), id="approvals.E001")]
    found: list[CheckMessage] = []
    for index, entry in enumerate(settings.TOOLNEXUS.get("POLICIES") or []):
        if entry.get("kind", "") in ("", "approval") and "starter_may_answer" not in entry:
            name = entry.get("name") or f"settings #{index + 1}"
            found.append(
                Warning(
                    f'Policy "{name}" (TOOLNEXUS["POLICIES"][{index}]) applies to approvals and does not set '
                    "starter_may_answer: a run's starter may approve their own under it.",
                    hint='Set "starter_may_answer": false to keep four-eyes, or true to say you mean it.',
                    id="approvals.W001",
                )
            )
    return found


# The oldest SQLite the console writes to (Django 5.2 itself runs on 3.31): every write takes INSERT and UPDATE
# ... RETURNING (3.35: approvals/hotpath/rows.py, returning.py) and the sealer's UPDATE ... FROM (3.33).
MIN_SQLITE_VERSION = (3, 35, 0)


@register(Tags.compatibility)
def sqlite_is_new_enough(
    app_configs: Sequence[AppConfig] | None, *, sqlite_version: tuple[int, ...] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """A database on SQLite needs MIN_SQLITE_VERSION of the library Python's sqlite3 module is linked with
    (``sqlite_version``: that library's version, ``sqlite3.sqlite_version_info`` unless given)."""
    version = sqlite_version or sqlite3.sqlite_version_info
    if version >= MIN_SQLITE_VERSION:
        return []
    needed, found = ".".join(map(str, MIN_SQLITE_VERSION)), ".".join(map(str, version))
    return [
        Error(
            f"The database {alias!r} is on SQLite {found}; the console needs SQLite {needed} or newer "
            "(its writes use INSERT ... RETURNING and UPDATE ... FROM).",
            hint="Run the console with a Python whose sqlite3 module links a newer SQLite (Debian 12 and Ubuntu "
            "22.04 have one, Debian 11 and Ubuntu 20.04 do not; the console's image does), or on PostgreSQL: set "
            "DATABASE_URL.",
            id="approvals.E002",
        )
        for alias, database in settings.DATABASES.items()
        if import_string(f"{database['ENGINE']}.base.DatabaseWrapper").vendor == "sqlite"
    ]


# Django's middleware its security checks look for by dotted path. The console installs subclasses of them
# (approvals.hotpath.loop_middleware), so those checks would say they are missing (security.W001-W003,
# silenced in settings for that reason) and pass, unlooked at, every check that depends on them.
DJANGO_SECURITY_MIDDLEWARE = (
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
)
# Django's deploy checks that read MIDDLEWARE by name (the session cookie's do too, but say the same either way).
MIDDLEWARE_DEPENDENT_CHECKS = (
    base.check_security_middleware,
    base.check_xframe_options_middleware,
    base.check_sts,
    base.check_sts_include_subdomains,
    base.check_sts_preload,
    base.check_content_type_nosniff,
    base.check_ssl_redirect,
    base.check_xframe_deny,
    base.check_referrer_policy,
    base.check_cross_origin_opener_policy,
    csrf.check_csrf_middleware,
    csrf.check_csrf_cookie_secure,
)
# The silenced ids, when a middleware really is missing: the same message under an id of the console's own.
MISSING_MIDDLEWARE_IDS = {
    "security.W001": "approvals.W101",
    "security.W002": "approvals.W102",
    "security.W003": "approvals.W103",
}


def middleware_as_django_names(paths: Sequence[str]) -> list[str]:
    """``MIDDLEWARE`` with each subclass of a middleware Django's checks look for spelled as that class."""
    spelled = []
    for path in paths:
        middleware = import_string(path)  # a class, or a function (approvals.web.security's)
        extends = [
            name
            for name in DJANGO_SECURITY_MIDDLEWARE
            if isinstance(middleware, type) and issubclass(middleware, import_string(name))
        ]
        spelled.append(extends[0] if extends else path)
    return spelled


@register(Tags.security, deploy=True)
def security_checks_see_the_console_middleware(
    app_configs: Sequence[AppConfig] | None, **kwargs: Any
) -> list[CheckMessage]:
    """Django's own deploy checks run again as if each loop middleware were the Django class it extends:
    what they find then and did not find before (HSTS off, no redirect to https, …) is reported."""
    from django.test.utils import override_settings  # only `check --deploy` pays for importing django.test

    def run() -> list[CheckMessage]:
        return [message for check in MIDDLEWARE_DEPENDENT_CHECKS for message in check(app_configs)]

    as_found = run()
    with override_settings(MIDDLEWARE=middleware_as_django_names(settings.MIDDLEWARE)):
        as_spelled = run()
    return [
        CheckMessage(message.level, message.msg, message.hint, message.obj, MISSING_MIDDLEWARE_IDS[message.id])
        if message.id in MISSING_MIDDLEWARE_IDS
        else message
        for message in as_spelled
        if message not in as_found or message.id in MISSING_MIDDLEWARE_IDS
    ]
