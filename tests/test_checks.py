"""approvals/checks.py's security checks: Django's deploy checks run again seeing the console's middleware,
which subclasses Django's (approvals.hotpath.loop_middleware), as the Django classes they are."""

import pytest
from django.core.checks import registry

from approvals import checks

SECURITY = "approvals.hotpath.loop_middleware.Security"
CSRF = "approvals.hotpath.loop_middleware.Csrf"
XFRAME = "approvals.hotpath.loop_middleware.XFrameOptions"


def ids(messages):
    return sorted(message.id for message in messages)


def test_the_consoles_middleware_is_spelled_as_the_django_classes_it_extends(settings):
    spelled = checks.middleware_as_django_names(settings.MIDDLEWARE)
    assert spelled[settings.MIDDLEWARE.index(SECURITY)] == "django.middleware.security.SecurityMiddleware"
    assert spelled[settings.MIDDLEWARE.index(CSRF)] == "django.middleware.csrf.CsrfViewMiddleware"
    assert spelled[settings.MIDDLEWARE.index(XFRAME)] == "django.middleware.clickjacking.XFrameOptionsMiddleware"
    # A function middleware, or one that extends none of them, keeps its name.
    for function in ("approvals.web.security.content_security_policy", "approvals.web.security.api_bad_host_is_json"):
        assert spelled[settings.MIDDLEWARE.index(function)] == function


def test_what_django_skips_for_want_of_its_middleware_by_name_is_reported(settings):
    settings.SECURE_HSTS_SECONDS = 0
    settings.SECURE_SSL_REDIRECT = False
    settings.CSRF_COOKIE_SECURE = False
    settings.X_FRAME_OPTIONS = "SAMEORIGIN"
    found = checks.security_checks_see_the_console_middleware(None)
    assert ids(found) == ["security.W004", "security.W008", "security.W016", "security.W019"]


def test_a_middleware_really_missing_is_reported_under_the_consoles_own_id(settings):
    settings.SECURE_HSTS_SECONDS = 3600
    settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = settings.SECURE_HSTS_PRELOAD = settings.SECURE_SSL_REDIRECT = True
    settings.CSRF_COOKIE_SECURE = True
    assert checks.security_checks_see_the_console_middleware(None) == []
    settings.MIDDLEWARE = [path for path in settings.MIDDLEWARE if path not in (SECURITY, CSRF, XFRAME)]
    found = checks.security_checks_see_the_console_middleware(None)
    assert ids(found) == ["approvals.W101", "approvals.W102", "approvals.W103"]
    assert "SecurityMiddleware" in found[0].msg
    # Django's own ids for these three are silenced, as they cannot see subclasses: nothing else is.
    assert settings.SILENCED_SYSTEM_CHECKS == ["security.W001", "security.W002", "security.W003"]


def test_sqlite_older_than_the_consoles_writes_need_is_refused_with_what_to_do():
    found = checks.sqlite_is_new_enough(None, sqlite_version=(3, 34, 1))  # Debian 11's: UPDATE ... FROM, no RETURNING
    assert ids(found) == ["approvals.E002"]
    assert "SQLite 3.34.1" in found[0].msg and "3.35.0 or newer" in found[0].msg
    assert "DATABASE_URL" in found[0].hint


def test_sqlite_with_returning_passes_and_the_check_runs_with_every_check():
    assert checks.sqlite_is_new_enough(None, sqlite_version=(3, 35, 0)) == []
    assert checks.sqlite_is_new_enough(None) == []  # the library this test runs with
    assert checks.sqlite_is_new_enough in registry.registry.get_checks()


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")  # the check reads only the engine's name
def test_postgresql_is_not_held_to_sqlites_version(settings):
    settings.DATABASES = {"default": {**settings.DATABASES["default"], "ENGINE": "django.db.backends.postgresql"}}
    assert checks.sqlite_is_new_enough(None, sqlite_version=(3, 31, 1)) == []
