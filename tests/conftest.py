"""Shared fixtures. A module whose tests touch the database marks them once, at its top (tests/test_layout.py
refuses any other form): async tests reach it from worker threads, so they use
``django_db(transaction=True)`` on a file-backed SQLite (WAL, as in production)."""

import pytest

from tests.support.api_client import logged_in

pytest_plugins = ["tests.support.users"]


@pytest.fixture(scope="session", autouse=True)
def collected_static():
    """The static files collected once (hashed names, a manifest): pages rendered here link them, and a name
    missing from the manifest fails the page (manifest_strict)."""
    import os

    from django.contrib.staticfiles.storage import staticfiles_storage

    from tests.support.live_console import collect_static

    collect_static(os.environ)
    # The manifest as collected, even if the storage read an older one before this session's collect.
    staticfiles_storage.hashed_files, staticfiles_storage.manifest_hash = staticfiles_storage.load_manifest()


@pytest.fixture(autouse=True)
def fresh_console(settings):
    """Each test gets its own in-memory channel layer and Toolkit, and short grace periods."""
    from channels.layers import channel_layers

    from approvals.runs import toolkit

    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "STOP_GRACE_SECONDS": 0.3, "SAFETY_POLL_SECONDS": 0.5}
    # Tests chain audit events themselves (AuditEvent.objects.seal_pending): a sealer thread outliving its test
    # would chain the next test's events behind its back. Live consoles (e2e, cluster, bench) run theirs.
    settings.CONSOLE_AUDIT_SEAL_SECONDS = None
    channel_layers.backends.clear()
    toolkit.reset_toolkit()
    _forget_team_state()
    yield
    channel_layers.backends.clear()
    toolkit.reset_toolkit()
    _forget_team_state()


def _forget_team_state():
    """Cached policies and presence are process-local; a rolled-back test must not leave them behind."""
    from approvals.team import policies, presence

    policies.forget_cached_policies()
    presence.board.clear()


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # speed only


@pytest.fixture
async def stop_leftover_runs():
    """A run a failing test left waiting is cancelled and awaited before the database is flushed."""
    import asyncio

    from approvals.runs import runner

    yield
    sup = runner.supervisor()
    tasks = list(sup.tasks.values())
    for token in list(sup.tokens.values()):
        token.trip("cancelled")
    if tasks:
        _, pending = await asyncio.wait(tasks, timeout=5)
        for task in pending:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@pytest.fixture
def model_inputs(monkeypatch):
    """Every message list the scripted model is sent, as it was sent (the real model answers): what an agent
    run's model reads next, exactly."""
    import copy

    from approvals.runs import agent_models
    from approvals.runs.scripted_model import scripted_generate

    sent = []

    def recording_generate(request):
        sent.append(copy.deepcopy(request.get("messages") or []))
        return scripted_generate(request)

    monkeypatch.setattr(agent_models, "scripted_generate", recording_generate)
    return sent


@pytest.fixture
def extra_tools(settings):
    """Serve extra toolnexus tools beside the demo ones: ``extra_tools(tool, ...)``."""
    from approvals.runs import toolkit

    def add(*tools):
        toolkit.reset_toolkit()
        toolkit._loaded_tools = toolkit.load_tool_modules() + list(tools)

    return add


class ConsoleEvents:
    """Listens to the console group the way a dashboard does, so tests await events instead of sleeping."""

    def __init__(self):
        self.layer = None
        self.channel = None

    async def start(self):
        from channels.layers import get_channel_layer

        from approvals.events import CONSOLE_GROUP

        self.layer = get_channel_layer()
        self.channel = await self.layer.new_channel()
        await self.layer.group_add(CONSOLE_GROUP, self.channel)
        return self

    async def next(self, action=None, timeout=5.0, **match):
        """The next event frame with this action (and matching top-level fields, e.g. run_id=3)."""
        import asyncio

        async def receive():
            while True:
                message = await self.layer.receive(self.channel)
                frame = message.get("frame") or {}
                if action is not None and frame.get("action") != action:
                    continue
                if any(frame.get(key) != value for key, value in match.items()):
                    continue
                return frame

        return await asyncio.wait_for(receive(), timeout)


@pytest.fixture
async def api(alice):
    """A Django test client signed in as alice, for the JSON API."""
    return await logged_in(alice)


@pytest.fixture
async def console_events():
    return await ConsoleEvents().start()


@pytest.fixture(scope="session")
def live(tmp_path_factory):
    """A real console in another process (daphne + its own SQLite), with a reviewer and a host service account."""
    from pathlib import Path

    from tests.support.live_console import live_console

    artifacts = Path(__file__).resolve().parents[1] / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    # schemathesis follows every accepted call with the same call under a made-up token (its ignored_auth
    # check), all from 127.0.0.1: at the default limit this console would lock the fuzzing out after five.
    # The lockout is tested on a console of its own (tests/team/test_lockout.py).
    with live_console(
        tmp_path_factory.mktemp("live-console"), artifacts / "live-daphne.log", CONSOLE_LOCKOUT_FAILURES="1000000"
    ) as console:
        yield console


def pytest_sessionfinish(session):
    """Close the supervisor's idle SQLite connection; a deleted test database leaves no -wal/-shm behind."""
    import os

    from approvals.hotpath import sqlite_wal

    for name in sqlite_wal.release_all():
        if not os.path.exists(name):
            for leftover in (name + "-wal", name + "-shm"):
                if os.path.exists(leftover):
                    os.remove(leftover)


@pytest.fixture
def rotate_signing_key(settings, tmp_path):
    """``rotate_signing_key()`` -> the new KeyPair this process signs with from then on, from a fresh
    ``CONSOLE_SIGNING_KEY_FILE`` (as an operator's rotation and restart would); the cached key is forgotten again
    after the test."""
    from approvals.signing import keys

    made = []

    def rotate():
        path = tmp_path / f"signing-key-{len(made)}.pem"
        keys.write_new_key(path)
        settings.CONSOLE_SIGNING_KEY_FILE = str(path)
        keys.current_key.cache_clear()
        made.append(path)
        return keys.current_key()

    yield rotate
    keys.current_key.cache_clear()
