"""approvals/checks.py's security checks: Django's deploy checks run again seeing the console's middleware,
which subclasses Django's (approvals.hotpath.loop_middleware), as the Django classes they are."""

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
