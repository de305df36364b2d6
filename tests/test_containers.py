"""What the Dockerfile, compose.yaml and .dockerignore must keep saying (no container engine runs here).

Read as files, for the properties that make the deployment safe; the entry point itself runs in
tests/test_entrypoint.py, and deploy/nginx.conf in front of two consoles in tests/cluster/test_behind_the_proxy.py.
"""

import re

import yaml

from tests.support.live_console import REPO


def instructions(path):
    """A Dockerfile's instructions as (KEYWORD, arguments), continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", path.read_text())
    lines = (line.strip() for line in text.splitlines())
    return [tuple(line.split(None, 1)) for line in lines if line and not line.startswith("#")]


def compose():
    return yaml.safe_load((REPO / "compose.yaml").read_text())


def test_the_image_is_slim_and_runs_as_a_user_that_is_not_root():
    steps = instructions(REPO / "Dockerfile")
    assert re.fullmatch(r"python:3\.\d+-slim-\w+", steps[0][1])
    users = [args for keyword, args in steps if keyword == "USER"]
    assert users and users[-1] not in {"root", "0"}
    assert ("USER", users[-1]) in steps[: steps.index(("ENTRYPOINT", '["/app/deploy/entrypoint.sh"]'))]


def test_static_files_are_collected_at_build_before_production_settings_apply():
    steps = instructions(REPO / "Dockerfile")
    collect = next(i for i, (keyword, args) in enumerate(steps) if "manage.py collectstatic --noinput" in args)
    assert steps[collect][0] == "RUN"
    assert collect < steps.index(("ENV", "CONSOLE_ENV=production"))


def test_the_healthcheck_probes_healthz_through_the_entrypoint():
    [healthcheck] = [args for keyword, args in instructions(REPO / "Dockerfile") if keyword == "HEALTHCHECK"]
    assert healthcheck.endswith('CMD ["/app/deploy/entrypoint.sh", "healthcheck"]')
    assert "/healthz" in (REPO / "deploy" / "entrypoint.sh").read_text()


def test_migrations_run_once_and_both_consoles_wait_for_them():
    services = compose()["services"]
    assert services["migrate"]["command"] == ["migrate"] and services["migrate"]["restart"] == "no"
    consoles = [name for name, service in services.items() if service.get("command") == ["serve"]]
    assert consoles == ["console-a", "console-b"]
    for name in consoles:
        assert services[name]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}


def test_the_consoles_believe_forwarded_headers_from_the_proxys_address_alone():
    services = compose()["services"]
    proxy_address = services["proxy"]["networks"]["console"]["ipv4_address"]
    for name in ("console-a", "console-b"):
        assert services[name]["environment"]["CONSOLE_TRUSTED_PROXIES"] == proxy_address
    # daphne's own --proxy-headers would believe any client (approvals/web/proxy_headers.py).
    [daphne] = re.findall(r"^\s*exec daphne .*$", (REPO / "deploy" / "entrypoint.sh").read_text(), re.MULTILINE)
    assert "--proxy-headers" not in daphne
    # The proxy serves deploy/nginx.conf, which proxies to these two consoles on the port they serve.
    assert "COPY deploy/nginx.conf /etc/nginx/nginx.conf" in (REPO / "deploy" / "proxy.Dockerfile").read_text()
    upstreams = re.findall(r"^\s*server ([\w.-]+:\d+);$", (REPO / "deploy" / "nginx.conf").read_text(), re.MULTILINE)
    assert upstreams == ["console-a:8000", "console-b:8000"]


def test_secrets_come_from_files_and_never_go_into_the_image():
    services = compose()["services"]
    environment = services["console-a"]["environment"]
    assert environment["CONSOLE_ENV"] == "production"
    assert environment["DJANGO_SECRET_KEY_FILE"].startswith("/run/secrets/")
    assert not {"DJANGO_SECRET_KEY", "CONSOLE_AUDIT_KEYS", "DATABASE_URL"} & set(environment)
    assert environment["CONSOLE_SIGNING_KEY_FILE"] == "/run/secrets/console_signing_key"
    assert all(secret["file"].startswith("./secrets/") for secret in compose()["secrets"].values())
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {"secrets", ".git", ".venv", "var"} <= set(ignored)


def test_every_console_signs_with_the_one_key_file_given_as_a_secret():
    services = compose()["services"]
    for name in ("migrate", "console-a", "console-b"):
        assert services[name]["environment"]["CONSOLE_SIGNING_KEY_FILE"] == "/run/secrets/console_signing_key"
        assert "console_signing_key" in services[name]["secrets"]
    assert compose()["secrets"]["console_signing_key"] == {"file": "./secrets/console_signing_key"}
