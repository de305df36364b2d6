"""toolnexus_site/settings.py as the processes see it: development by default with DEBUG off, production
https-only and passing ``check --deploy``, and a development trail moved to real keys before the switch
(docs/operations.md, "Production settings"). Each runs ``manage.py`` in its own process, as deployed."""

import json
import subprocess

import pytest

from tests.support.live_console import REPO, console_env, manage, venv_bin
from tests.support.signing_keys import production_signing_key_file

SECRET_KEY = "k7Hq-2vNw9xZ_pL4mR8tY1cB6dF3gJ0sA5eU-iO7kW2qX9zV4nM1"
OLD_SECRET_KEY = "Zt3-pQ8wLx1_vN6mK4rB9cY2hJ7dF0sG5aE-uI3oW8qT1zV6nM4"
AUDIT_KEYS = "2:audit-secret-for-production-00000001"
PRODUCTION = {
    "CONSOLE_ENV": "production",
    "DJANGO_SECRET_KEY": SECRET_KEY,
    "DJANGO_ALLOWED_HOSTS": "console.example.com",
    "CONSOLE_AUDIT_KEYS": AUDIT_KEYS,
    "CONSOLE_SIGNING_KEY_FILE": production_signing_key_file(),
}
# What a process's own environment may hold, so each test says exactly what it sets.
UNSET = dict.fromkeys(
    [
        "CONSOLE_ENV",
        "DJANGO_DEBUG",
        "DJANGO_SECRET_KEY",
        "DJANGO_SECRET_KEY_FILE",
        "DJANGO_SECRET_KEY_FALLBACKS",
        "DJANGO_ALLOWED_HOSTS",
        "CONSOLE_AUDIT_KEYS",
        "CONSOLE_AUDIT_KEYS_FILE",
        "CONSOLE_SIGNING_KEY_FILE",
        "CONSOLE_PROXY_TLS",
        "CONSOLE_HSTS_SECONDS",
        "CONSOLE_SSL_REDIRECT",
    ],
    "",
)
SHOW_SETTINGS = """
import json
from django.conf import settings
print(json.dumps({name: getattr(settings, name) for name in (
    "CONSOLE_ENV", "DEBUG", "ALLOWED_HOSTS", "SESSION_COOKIE_SECURE", "SESSION_COOKIE_HTTPONLY", "SESSION_COOKIE_AGE",
    "CSRF_COOKIE_SECURE", "SECURE_HSTS_SECONDS", "SECURE_HSTS_INCLUDE_SUBDOMAINS", "SECURE_HSTS_PRELOAD",
    "SECURE_SSL_REDIRECT", "SECURE_REDIRECT_EXEMPT", "SECURE_PROXY_SSL_HEADER", "SECRET_KEY_FALLBACKS",
    "CONSOLE_SIGNING_KEY_FILE",
)}))
"""


def env_of(tmp_path, **settings):
    environ = console_env(tmp_path / "console.sqlite3", **{**UNSET, **settings})
    return {name: value for name, value in environ.items() if value != ""}


def manage_py(env, *args):
    return subprocess.run(
        [venv_bin("python"), "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )


def settings_of(env):
    return json.loads(manage(env, "shell", "--no-imports", "-c", SHOW_SETTINGS))


def test_development_serves_http_with_debug_off_unless_asked_for(tmp_path):
    seen = settings_of(env_of(tmp_path))
    assert seen["CONSOLE_ENV"] == "development"
    assert seen["DEBUG"] is False
    assert (seen["SESSION_COOKIE_SECURE"], seen["CSRF_COOKIE_SECURE"], seen["SECURE_SSL_REDIRECT"]) == (
        False,
        False,
        False,
    )
    assert seen["SECURE_HSTS_SECONDS"] == 0
    assert seen["SESSION_COOKIE_AGE"] == 12 * 3600
    assert seen["CONSOLE_SIGNING_KEY_FILE"] == ""  # the checkout's own, var/signing-key.pem, made on first use


def test_production_settings_are_https_only_with_a_shift_long_session(tmp_path):
    seen = settings_of(env_of(tmp_path, **PRODUCTION, DJANGO_SECRET_KEY_FALLBACKS=OLD_SECRET_KEY))
    assert seen == {
        "CONSOLE_ENV": "production",
        "DEBUG": False,
        "ALLOWED_HOSTS": ["console.example.com"],
        "SESSION_COOKIE_SECURE": True,
        "SESSION_COOKIE_HTTPONLY": True,
        "SESSION_COOKIE_AGE": 12 * 3600,
        "CSRF_COOKIE_SECURE": True,
        "SECURE_HSTS_SECONDS": 31_536_000,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
        "SECURE_HSTS_PRELOAD": True,
        "SECURE_SSL_REDIRECT": True,
        "SECURE_REDIRECT_EXEMPT": ["^healthz$", "^readyz$"],
        "SECURE_PROXY_SSL_HEADER": None,  # no proxy said to terminate TLS: X-Forwarded-Proto is not believed
        "SECRET_KEY_FALLBACKS": [OLD_SECRET_KEY],
        "CONSOLE_SIGNING_KEY_FILE": production_signing_key_file(),
    }
    behind_a_proxy = settings_of(
        env_of(tmp_path, **PRODUCTION, CONSOLE_PROXY_TLS="1", CONSOLE_TRUSTED_PROXIES="172.30.0.10")
    )
    assert behind_a_proxy["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]


def test_production_without_its_settings_does_not_start_and_names_each_one(tmp_path):
    done = manage_py(env_of(tmp_path, CONSOLE_ENV="production", DJANGO_DEBUG="1"), "check")
    assert done.returncode != 0
    assert "The console will not start in production until these settings are changed:" in done.stderr
    for name in (
        "DJANGO_SECRET_KEY",
        "DJANGO_DEBUG",
        "DJANGO_ALLOWED_HOSTS",
        "CONSOLE_AUDIT_KEYS",
        "CONSOLE_SIGNING_KEY_FILE",
    ):
        assert f"\n  - {name}" in done.stderr


def test_check_deploy_passes_under_production_settings(tmp_path):
    done = manage_py(env_of(tmp_path, **PRODUCTION), "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stderr
    # Only the three that look for Django's middleware by name, which the console installs as subclasses.
    assert done.stdout.strip() == "System check identified no issues (3 silenced)."


def test_check_deploy_sees_hsts_and_the_redirect_through_the_consoles_middleware(tmp_path):
    # Django's own checks skip both when they miss its SecurityMiddleware by name; approvals.checks does not.
    env = env_of(tmp_path, **PRODUCTION, CONSOLE_HSTS_SECONDS="0", CONSOLE_SSL_REDIRECT="0")
    done = manage_py(env, "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 1
    assert "(security.W004)" in done.stderr and "(security.W008)" in done.stderr


@pytest.fixture
def development_trail(tmp_path):
    """A database whose audit trail was sealed in development (key version 1, derived from the default key)."""
    env = env_of(tmp_path)
    manage(env, "migrate", "--noinput")
    manage(
        env,
        "shell",
        "--no-imports",
        "-c",
        "from django.db import transaction\n"
        "from approvals import events\n"
        "for number in range(3):\n"
        "    with transaction.atomic():\n"
        "        events.record('run.started', actor='alice', payload={'n': number})\n",
    )
    # No console ran to chain them: --seal chains them as a console's sealer would at its start.
    assert manage(env, "verify_audit", "--seal").splitlines()[:2] == [
        "3 events verified.",
        "#1–#3 sealed with key version 1.",
    ]
    return tmp_path


def test_a_development_trail_moves_to_production_keys_with_reseal_audit_before_the_switch(development_trail):
    production = env_of(development_trail, **PRODUCTION)
    skipped = manage_py(production, "verify_audit")
    # Switched without resealing: production holds no key derived from the secret key, so it says which is missing.
    assert skipped.returncode == 1
    assert "Event #1 was sealed with key version 1, which CONSOLE_AUDIT_KEYS does not hold" in skipped.stderr

    # The procedure: still on the development key, add the new audit key and reseal with it.
    resealed = manage(env_of(development_trail, CONSOLE_AUDIT_KEYS=AUDIT_KEYS), "reseal_audit")
    assert resealed.strip() == "3 events re-sealed with key version 2."

    assert manage(production, "verify_audit").splitlines()[:2] == [
        "3 events verified.",
        "#1–#3 sealed with key version 2.",
    ]
    old_key_alone = manage_py(env_of(development_trail), "verify_audit")
    assert old_key_alone.returncode == 1
    assert "sealed with key version 2, which CONSOLE_AUDIT_KEYS does not hold" in old_key_alone.stderr


def test_a_proxy_said_to_terminate_tls_must_be_a_trusted_one(tmp_path):
    done = manage_py(env_of(tmp_path, **PRODUCTION, CONSOLE_PROXY_TLS="1"), "check")
    assert done.returncode != 0
    assert "CONSOLE_PROXY_TLS=1 needs CONSOLE_TRUSTED_PROXIES" in done.stderr
