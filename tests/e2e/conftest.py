"""End-to-end fixtures: a real daphne process on its own SQLite file, driven by Debian's chromium.

Nothing here is mocked. The server is started the way ``make run`` starts it
(``daphne toolnexus_site.asgi:application``), on a free loopback port, with a fresh
database migrated by ``manage.py``. The browser is Playwright's sync API.

These tests are plain sync functions: pytest-asyncio runs in auto mode in this
project, and Playwright's sync API refuses to run inside a running event loop. They
use no pytest-django database fixture either; the daphne subprocess owns its own
database file, and everything is observed through HTTP, the socket and the page.
"""

import contextlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.support.console_page import EVENT_TIMEOUT_MS, Tab, api_post, host_row, request_in
from tests.support.live_console import console_env, free_port, manage, running_daphne  # noqa: F401 (free_port: for tests)

# Page loads and logins on a loaded CI machine; live-update assertions pass their own, shorter timeout.
expect.set_options(timeout=10_000)

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = os.environ.get("E2E_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PASSWORD = "e2e-Reviewer-pass-7731"
USERS = ("alice", "bob")
VIEWPORT = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1440, "height": 900}
CREATE_USERS = f"""
import os
from django.contrib.auth import get_user_model
for name in {USERS!r}:
    get_user_model().objects.create_superuser(name, f"{{name}}@example.com", os.environ["DJANGO_SUPERUSER_PASSWORD"])
"""


@dataclass
class ConsoleServer:
    base_url: str
    host: str
    port: int
    users: tuple
    password: str
    db_path: Path
    log_path: Path


@contextlib.contextmanager
def serve_console(workdir, name, setup, users, password, **env_extra):
    """A real daphne on a fresh database in ``workdir``, migrated, then set up by the ``manage.py shell`` script
    ``setup``; it logs to test-artifacts/{name}-daphne.log."""
    db_path = workdir / f"{name}.sqlite3"
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = ARTIFACTS / f"{name}-daphne.log"
    env = console_env(db_path, **env_extra)
    manage(env, "migrate", "--noinput")
    # One interpreter for all the set-up (each manage.py start costs a couple of seconds on CI).
    manage(env, "shell", "-c", setup, "--no-imports")
    with running_daphne(env, log_path) as port:
        yield ConsoleServer(
            base_url=f"http://127.0.0.1:{port}",
            host="127.0.0.1",
            port=port,
            users=users,
            password=password,
            db_path=db_path,
            log_path=log_path,
        )


@contextlib.contextmanager
def console_with_policies(tmp_path_factory, name, policies, **env_extra):
    """A module's own console: the shared one's two reviewers, plus ``policies`` (CONSOLE_POLICIES)."""
    with serve_console(
        tmp_path_factory.mktemp(name),
        name,
        CREATE_USERS,
        USERS,
        PASSWORD,
        DJANGO_SUPERUSER_PASSWORD=PASSWORD,
        CONSOLE_POLICIES=json.dumps(policies),
        **env_extra,
    ) as server:
        yield server


@pytest.fixture(scope="session")
def console_server(tmp_path_factory):
    """A real daphne serving the console on a free port with a fresh, migrated database and two reviewers."""
    # No policies: one reviewer starts runs and answers their own, as the demo login does.
    with serve_console(
        tmp_path_factory.mktemp("e2e-console"), "e2e", CREATE_USERS, USERS, PASSWORD, DJANGO_SUPERUSER_PASSWORD=PASSWORD
    ) as server:
        yield server


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium, headless, under Playwright's sync API.

    Module-scoped rather than session-scoped so Playwright's private event loop is
    gone before any pytest-asyncio test of another module runs.
    """
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def login(page, server, username):
    """Log in through the real login form and land on the dashboard."""
    page.goto(f"{server.base_url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", server.password)
    page.click("form[action='/accounts/login/'] button[type=submit]")
    expect(page).to_have_url(f"{server.base_url}/")


@pytest.fixture(scope="module")
def login_states(browser, console_server, tmp_path_factory):
    """Each reviewer's cookies after one real login, so later tests start already signed in."""
    states = {}
    folder = tmp_path_factory.mktemp("e2e-states")
    for username in console_server.users:
        context = browser.new_context(viewport=VIEWPORT)
        try:
            login(context.new_page(), console_server, username)
            states[username] = str(folder / f"{username}.json")
            context.storage_state(path=states[username])
        finally:
            context.close()
    return states


class Watched:
    """A page plus every dialog and uncaught script error it produced."""

    def __init__(self, page):
        self.page = page
        self.dialogs = []
        self.errors = []
        page.on("dialog", self._on_dialog)
        page.on("pageerror", lambda error: self.errors.append(str(error)))

    def _on_dialog(self, dialog):
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()


@pytest.fixture
def open_dashboard(browser, console_server, login_states):
    """``open_dashboard("alice")``: a fresh context signed in as that reviewer, on a live dashboard."""

    contexts = []
    watched = []

    def open_as(username="alice"):
        context = browser.new_context(viewport=VIEWPORT, storage_state=login_states[username])
        contexts.append(context)
        page = context.new_page()
        tab = Watched(page)
        watched.append(tab)
        page.goto(f"{console_server.base_url}/")
        expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
        return page, tab

    yield open_as
    for context in contexts:
        context.close()
    errors = [error for tab in watched for error in tab.errors]
    assert not errors, f"uncaught script errors on the dashboard: {errors}"


def copy_artifact(source, target):
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)


@pytest.fixture
def reviewer(browser, console_server, login_states):
    """``reviewer("alice", before_goto=..., init_script=...)``: a fresh signed-in context on a live dashboard."""
    contexts, tabs = [], []

    def open_as(username="alice", before_goto=None, init_script=None):
        context = browser.new_context(viewport=VIEWPORT, storage_state=login_states[username])
        contexts.append(context)
        if init_script:
            context.add_init_script(init_script)
        page = context.new_page()
        tab = Tab(page)
        tabs.append(tab)
        if before_goto:
            before_goto(page)
        page.goto(f"{console_server.base_url}/")
        expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
        return tab

    yield open_as
    for context in contexts:
        context.close()
    errors = [error for tab in tabs for error in tab.errors]
    assert not errors, f"uncaught script errors on the dashboard: {errors}"


@pytest.fixture
def host_requests(console_server):
    """``host_requests(tab, ids, **fields)``: open approvals through ``POST /api/v1/requests`` as a host would.

    Waits until each one's row is on the tab, and returns the rows; cancels every one still open when the test ends.
    """
    opened = []

    def open_on(tab, ids, prompt="Approve {id}?", **fields):
        for request_id in ids:
            body = {"id": request_id, "kind": "approval", "prompt": prompt.format(id=request_id), **fields}
            response = api_post(tab.page.context, console_server, "requests", body)
            assert response.status == 201, response.text()
            opened.append((tab.page.context, request_id))
        rows = [host_row(tab.page, request_id) for request_id in ids]
        for row in rows:
            expect(row).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
        return rows

    yield open_on
    for context, request_id in opened:
        if request_in(context, console_server, request_id, "open"):
            withdrawn = api_post(context, console_server, f"requests/{request_id}/cancel", {})
            assert withdrawn.status in (200, 409), withdrawn.text()


@pytest.fixture
def phone(browser, console_server, login_states):
    """A signed-in 390x844 touch screen on the dashboard."""
    context = browser.new_context(
        viewport=PHONE, storage_state=login_states["alice"], is_mobile=True, has_touch=True, device_scale_factor=2
    )
    page = context.new_page()
    tab = Tab(page)
    page.goto(f"{console_server.base_url}/")
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    yield tab
    context.close()
    assert tab.errors == []


@pytest.fixture(params=[LAPTOP, PHONE], ids=["laptop", "phone"])
def alice_at(request, browser, console_server, login_states):
    """alice's live dashboard at 1440x900 or 390x844 (asked for before host_requests: closed after its clean-up)."""
    context = browser.new_context(viewport=request.param, storage_state=login_states["alice"])
    tab = Tab(context.new_page())
    tab.page.goto(f"{console_server.base_url}/")
    expect(tab.page.locator("#conn-status")).to_have_attribute("data-state", "live")
    yield tab, request.param
    context.close()
    assert tab.errors == []


def signed_in_page(browser, login_states, viewport, username="alice"):
    """A new browser context signed in as ``username`` at ``viewport`` (with touch at the phone's), its page, and
    the list the page's uncaught errors go into."""
    touch = viewport == PHONE
    context = browser.new_context(
        viewport=viewport, is_mobile=touch, has_touch=touch, storage_state=login_states[username]
    )
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    return context, page, errors
