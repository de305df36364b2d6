"""A real console in its own process: daphne on a free loopback port with its own SQLite file.

Shared by the end-to-end tests (tests/e2e/conftest.py), the remote-host tests and
the OpenAPI fuzzing, and by bench/longpoll.py. The server is started the way
``make run`` starts it (``daphne toolnexus_site.asgi:application``) on a database
freshly migrated by ``manage.py``; nothing is mocked.
"""

import contextlib
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
START_DEADLINE_SECONDS = 20.0
STOP_GRACE_SECONDS = 5.0
POLL_DEADLINE_SECONDS = 20.0
CSRF_FIELD = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def free_port():
    """A port nothing listens on right now: bind to port 0 and let the kernel choose."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def venv_bin(name):
    path = VENV_BIN / name
    return str(path) if path.exists() else str(REPO / ".venv" / "bin" / name)


def console_env(db_path, **extra):
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "toolnexus_site.settings",
        "CONSOLE_SQLITE_PATH": str(db_path),
        "PYTHONUNBUFFERED": "1",
        # Loopback only: a proxy from the environment must not see these calls.
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        # Nothing polls a test console's readiness: it stops as soon as its runs are handed over.
        "CONSOLE_SHUTDOWN_DRAIN_SECONDS": "0",
        **extra,
    }


def manage(env, *args):
    """Run ``manage.py`` in the repository; returns its stdout, or raises with its output."""
    done = subprocess.run(
        [venv_bin("python"), "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout


_collected_static_roots = set()


def collect_static(env):
    """``manage.py collectstatic`` into the STATIC_ROOT ``env`` names, once per process (``make run`` does it
    at each start): a console with DEBUG off links the hashed names its manifest lists, and fails without them."""
    root = env.get("CONSOLE_STATIC_ROOT") or str(REPO / "var" / "static")
    if root not in _collected_static_roots:
        manage(env, "collectstatic", "--noinput", "--verbosity", "0")
        _collected_static_roots.add(root)


def wait_for_port(proc, port, log_path):
    """Poll until daphne accepts connections; fail with its log if it exits or the deadline passes."""
    deadline = time.monotonic() + START_DEADLINE_SECONDS
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"daphne exited with {proc.returncode} before listening:\n{Path(log_path).read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"daphne did not accept connections on port {port} within {START_DEADLINE_SECONDS:g}s:\n"
                    f"{Path(log_path).read_text()}"
                ) from None
            # Waiting for a socket to open, not for an app event: a short bounded poll.
            time.sleep(0.1)


@contextlib.contextmanager
def running_daphne(env, log_path):
    """Serve the console under daphne with ``env`` until the block ends; yields the port."""
    with daphne_process(env, log_path) as proc:
        yield proc.port


@contextlib.contextmanager
def daphne_process(env, log_path, port=None):
    """Like ``running_daphne``, but yields the ``Popen`` (with ``.port``), for tests that signal it.

    ``port`` reuses a port (a console coming back where it was); by default a free one is chosen.
    """
    port = port or free_port()
    collect_static(env)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [venv_bin("daphne"), "-b", "127.0.0.1", "-p", str(port), "toolnexus_site.asgi:application"],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        proc.port = port
        try:
            wait_for_port(proc, port, log_path)
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_GRACE_SECONDS)


CREATE_USERS = """
from django.contrib.auth import get_user_model
User = get_user_model()
User.objects.create_superuser("reviewer", "reviewer@example.com", "live-Reviewer-pass-5521")
User.objects.create_user("host-svc")  # a service account: a user with no password, used through its token
"""


@dataclass
class LiveConsole:
    """A console in another process, a reviewer and a host service account, each with an API token."""

    base_url: str
    port: int
    db_path: Path
    log_path: Path
    env: dict
    tokens: dict = field(default_factory=dict)  # username -> secret

    @property
    def host_token(self):
        return self.tokens["host-svc"]

    @property
    def reviewer_token(self):
        return self.tokens["reviewer"]

    def call(self, method, path, body=None, *, token=None, timeout=30):
        """One JSON call to the live console; returns ``(status, body)`` (4xx/5xx included, not raised)."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {token or self.reviewer_token}"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.base_url + path, data=data, headers=headers, method=method)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=timeout) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                return exc.code, json.loads(raw)
            except ValueError:
                return exc.code, raw.decode(errors="replace")


@contextlib.contextmanager
def live_console(workdir, log_path, **env_extra):
    """Migrate a fresh database in ``workdir``, create the users and tokens, and serve it under daphne."""
    db_path = Path(workdir) / "live.sqlite3"
    env = console_env(db_path, **env_extra)
    manage(env, "migrate", "--noinput")
    manage(env, "shell", "-c", CREATE_USERS, "--no-imports")
    tokens = {
        username: manage(env, "issue_token", username, "--name", f"{username}-tests").strip()
        for username in ("reviewer", "host-svc")
    }
    with running_daphne(env, log_path) as port:
        yield LiveConsole(
            base_url=f"http://127.0.0.1:{port}",
            port=port,
            db_path=db_path,
            log_path=Path(log_path),
            env=env,
            tokens=tokens,
        )


# -- driving a live console over HTTP ------------------------------------------------------------


def poll(console, path, until, *, token=None, what="the condition"):
    """GET ``path`` until ``until(body)`` holds; a bounded wait on an HTTP status, not a sleep on an event."""
    deadline = time.monotonic() + POLL_DEADLINE_SECONDS
    while True:
        status, body = console.call("GET", path, token=token)
        if status == 200 and until(body):
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {POLL_DEADLINE_SECONDS:g}s; last: {status} {body}")
        time.sleep(0.05)


def start(console, body):
    status, run = console.call("POST", "/api/v1/runs", body, token=console.host_token)
    assert status == 201, run
    return run["id"]


def open_requests_of(console, run_id):
    status, body = console.call("GET", "/api/v1/requests?status=open")
    assert status == 200, body
    return [r for r in body["requests"] if r["run"] == run_id]


class ClientAt:
    """HTTP from one loopback address (what the console counts an address's failures by), keeping cookies."""

    def __init__(self, console, address):
        self.console, self.address, self.cookies = console, address, {}

    def request(self, method, path, *, form=None, headers=None):
        connection = http.client.HTTPConnection(
            "127.0.0.1", self.console.port, timeout=30, source_address=(self.address, 0)
        )
        headers = dict(headers or {})
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{name}={value}" for name, value in self.cookies.items())
        body = None
        if form is not None:
            body = urllib.parse.urlencode(form)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            text = response.read().decode()
        finally:
            connection.close()
        for cookie in response.headers.get_all("Set-Cookie") or []:
            name, _, rest = cookie.partition("=")
            self.cookies[name] = rest.split(";", 1)[0]
        return response.status, response.headers, text

    def log_in(self, username, password):
        """The login form as a browser posts it: its CSRF token first, then the POST."""
        _, _, page = self.request("GET", "/accounts/login/")
        csrf = CSRF_FIELD.search(page).group(1)
        return self.request(
            "POST",
            "/accounts/login/",
            form={"username": username, "password": password, "next": "/", "csrfmiddlewaretoken": csrf},
        )

    def api(self, path, token):
        status, headers, text = self.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        return status, headers, json.loads(text)
