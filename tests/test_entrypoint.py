"""The image's entry point, deploy/entrypoint.sh, run as the container runs it (no container engine here).

Each mode runs for real from the repository, with the venv's python and daphne first on PATH as the
image has them: ``migrate`` migrates a fresh SQLite file, ``serve`` is daphne itself (exec'd, so the
container's SIGTERM reaches it), ``healthcheck`` reads /healthz, an unknown mode is refused.
"""

import http.server
import os
import signal
import sqlite3
import subprocess
import threading
import urllib.request

import pytest

from tests.support.live_console import REPO, VENV_BIN, console_env, free_port, manage, wait_for_port

ENTRYPOINT = REPO / "deploy" / "entrypoint.sh"


def image_env(tmp_path, **extra):
    """The environment of the image, but for the database: a SQLite file of the test's own."""
    env = console_env(tmp_path / "console.sqlite3", **extra)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env['PATH']}"
    return env


def entrypoint(env, *args, timeout=120):
    return subprocess.run([ENTRYPOINT, *args], env=env, capture_output=True, text=True, timeout=timeout)


def test_migrate_applies_the_migrations_and_exits(tmp_path):
    done = entrypoint(image_env(tmp_path), "migrate")
    assert done.returncode == 0, done.stderr
    assert "Applying approvals.0001_initial... OK" in done.stdout
    with sqlite3.connect(tmp_path / "console.sqlite3") as db:
        assert db.execute("SELECT count(*) FROM django_migrations WHERE app = 'approvals'").fetchone()[0] > 0


def test_serve_execs_daphne_which_answers_and_stops_on_sigterm(tmp_path):
    env = image_env(tmp_path, CONSOLE_BIND="127.0.0.1", CONSOLE_PORT=str(free_port()))
    manage(env, "migrate", "--noinput")
    log = tmp_path / "serve.log"
    with open(log, "w") as output:
        serving = subprocess.Popen([ENTRYPOINT, "serve"], env=env, stdout=output, stderr=subprocess.STDOUT)
    try:
        port = int(env["CONSOLE_PORT"])
        wait_for_port(serving, port, log)
        # The shell is gone: the process the container engine signals is daphne.
        assert b"daphne" in (open(f"/proc/{serving.pid}/cmdline", "rb").read())
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"http://127.0.0.1:{port}/api/v1/openapi.json", timeout=30) as response:
            assert response.status == 200
        # The image's HEALTHCHECK against the real console (/healthz answers whatever the Host).
        checked = entrypoint(env, "healthcheck")
        assert checked.returncode == 0, checked.stderr
        serving.send_signal(signal.SIGTERM)
        assert serving.wait(timeout=20) == 0
    finally:
        if serving.poll() is None:
            serving.kill()
            serving.wait()


def test_an_unknown_mode_is_refused_naming_the_modes(tmp_path):
    for args in (["runserver"], []):
        done = entrypoint(image_env(tmp_path), *args)
        assert done.returncode == 64
        assert "Use serve, migrate, manage <command> or healthcheck." in done.stderr


def test_secrets_are_read_from_files_and_not_given_twice(tmp_path):
    keys = tmp_path / "audit_keys"
    keys.write_text("1:" + "k" * 40 + "\n")
    env = image_env(tmp_path, CONSOLE_AUDIT_KEYS_FILE=str(keys))
    env.pop("CONSOLE_AUDIT_KEYS", None)
    show = "from django.conf import settings; import os; print(settings.CONSOLE_AUDIT_KEYS[1].decode(), 'CONSOLE_AUDIT_KEYS_FILE' in os.environ)"
    done = entrypoint(env, "manage", "shell", "--no-imports", "-c", show)
    assert (done.returncode, done.stdout.split()) == (0, ["k" * 40, "False"]), done.stderr

    done = entrypoint({**env, "CONSOLE_AUDIT_KEYS": "1:" + "j" * 40}, "migrate")
    assert done.returncode == 64
    assert "both CONSOLE_AUDIT_KEYS and CONSOLE_AUDIT_KEYS_FILE are set; keep one." in done.stderr


@pytest.mark.parametrize(("status", "healthy"), [(200, True), (503, False)])
def test_healthcheck_passes_only_while_healthz_answers_200(tmp_path, status, healthy):
    class Healthz(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(status if self.path == "/healthz" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Healthz)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        done = entrypoint(image_env(tmp_path, CONSOLE_PORT=str(server.server_port)), "healthcheck")
    finally:
        server.shutdown()
        server.server_close()
    assert (done.returncode == 0) is healthy, done.stderr


def test_healthcheck_fails_when_nothing_listens(tmp_path):
    done = entrypoint(image_env(tmp_path, CONSOLE_PORT=str(free_port())), "healthcheck")
    assert done.returncode == 1
    assert "/healthz" in done.stderr and "Connection refused" in done.stderr
