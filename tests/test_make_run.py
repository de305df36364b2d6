"""``make run`` and ``make test`` on a fresh clone: what each installs, and what ``make run`` prints last.

The Makefile's recipes are read with ``make -n`` (a dry run: it prints the commands and runs
none), against a virtualenv path of the test's own, so the stamp files say what is installed.
The demo-login line is then run for real, the way ``make run`` runs it, on a fresh database.
"""

import os
import shlex
import subprocess
import sys
from pathlib import Path

from tests.support.live_console import REPO, console_env, manage

VENV = Path(sys.executable).parent.parent  # the virtualenv running these tests, as `make` would use it
TEST_EXTRAS_INSTALL = "pip install --quiet -e '.[test]'"
RUNTIME_INSTALL = "pip install --quiet -e ."


def make_dry_run(*args):
    """The commands ``make`` would run for ``args``, one per line (nothing is executed)."""
    # Under `make test` this is a sub-make: without its parent's variables it prints no "Entering directory".
    env = {key: value for key, value in os.environ.items() if key not in {"MAKELEVEL", "MAKEFLAGS", "MFLAGS"}}
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def installs(commands):
    return [line.split("/bin/python -m ", 1)[1] for line in commands if "pip install" in line and "-e" in line]


def test_make_run_installs_the_runtime_only(tmp_path):
    commands = make_dry_run("run", f"VENV={tmp_path / 'venv'}")
    assert installs(commands) == [RUNTIME_INSTALL]
    assert not any("[test]" in line for line in commands)


def test_make_test_on_a_fresh_clone_installs_the_runtime_then_the_test_extras(tmp_path):
    commands = make_dry_run("test", f"VENV={tmp_path / 'venv'}")
    assert installs(commands) == [RUNTIME_INSTALL, TEST_EXTRAS_INSTALL]
    assert "-m pytest" in commands[-1]


def test_make_test_after_make_run_adds_only_the_test_extras(tmp_path):
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / ".installed").touch()  # what `make run` leaves behind, newer than pyproject.toml
    commands = make_dry_run("test", f"VENV={venv}")
    assert installs(commands) == [TEST_EXTRAS_INSTALL]
    assert not any("-m venv" in line for line in commands)

    (venv / ".installed-test").touch()
    assert installs(make_dry_run("test", f"VENV={venv}")) == []


def test_make_run_collects_the_static_files_before_serving(tmp_path):
    commands = make_dry_run("run", f"VENV={VENV}")
    collect = [i for i, line in enumerate(commands) if "manage.py collectstatic --noinput" in line]
    serve = [i for i, line in enumerate(commands) if line.lstrip("@").split()[0].endswith("/daphne")]
    assert len(collect) == 1 and serve and collect[0] < serve[0]


def test_make_run_prints_the_url_and_the_demo_login_last_before_serving(tmp_path):
    commands = make_dry_run("run", f"VENV={VENV}", "HOST=127.0.0.1", "PORT=8765")
    assert commands[-1].lstrip("@").split()[0].endswith("/daphne")
    login_line = commands[-2].lstrip("@")
    assert "ensure_demo_user" in login_line

    env = console_env(tmp_path / "db.sqlite3", CONSOLE_DEMO_LOGIN_FILE=str(tmp_path / "demo-login.txt"))
    manage(env, "migrate", "--noinput")

    def run_login_line():
        done = subprocess.run(shlex.split(login_line), cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()

    first = run_login_line()
    assert first[-2] == "Open http://127.0.0.1:8765/ and log in:"
    username, password = (tmp_path / "demo-login.txt").read_text().split()
    assert first[-1] == f"  username {username}   password {password}"
    assert oct((tmp_path / "demo-login.txt").stat().st_mode & 0o777) == "0o600"
    checked = manage(
        env,
        "shell",
        "--no-imports",
        "-c",
        (
            # The password itself, not a login: the lockout's backend authenticates only a real request.
            "from django.contrib.auth import get_user_model; "
            f"print(get_user_model().objects.get(username={username!r}).check_password({password!r}))"
        ),
    )
    assert checked.strip() == "True"

    assert run_login_line()[-2:] == first[-2:]  # every later start prints the same login


def test_without_a_demo_login_it_says_how_to_make_one(tmp_path):
    env = console_env(tmp_path / "db.sqlite3", CONSOLE_DEMO_LOGIN_FILE=str(tmp_path / "demo-login.txt"))
    manage(env, "migrate", "--noinput")
    manage(
        env,
        "shell",
        "-c",
        "from django.contrib.auth import get_user_model; get_user_model().objects.create_user('someone')",
    )
    printed = manage(env, "ensure_demo_user", "--url", "http://127.0.0.1:8765/").strip().splitlines()
    assert printed[-2] == "Open http://127.0.0.1:8765/ and log in:"
    assert "manage.py add_reviewer" in printed[-1]
    assert not os.path.exists(tmp_path / "demo-login.txt")
