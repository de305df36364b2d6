"""Every recipe in the README and docs/*.md, run as written (only the port and the virtualenv's path change).

Each fenced block in sh, bash, console, python, curl or go says on the line above it how it is run:

``<!-- recipe: run against a live console -->``
    A page's shell blocks run in order in one bash script (``-euo pipefail``), in the repository, against
    one live console shared by the tests (its ``manage.py`` calls reach that console's database through
    the environment); a python block runs with ``CONSOLE_URL`` and ``CONSOLE_TOKEN`` naming that console.
``<!-- recipe: run in a temp dir -->``
    In a fresh directory holding ``manage.py`` and ``.venv`` and a freshly migrated SQLite database of its
    own: a shell block in bash, a python block saved under the name its first line gives (``# mytools.py``)
    and run.
``<!-- recipe: built with go build, run against a live console -->``
    Saved as ``main.go`` beside a ``go.mod``, built with Debian's Go (standard library only), and run.
``<!-- recipe: run by tests/<module>.py, <how> -->``
    Run as written by that test module, which needs what the shared console has not (a PostgreSQL of its
    own, say); the module must exist and find the block by this very marker.
``<!-- recipe: not run: <why> -->``
    The few that cannot run here (a server until Ctrl-C, Docker, hosts that do not exist); each says why.

A reviewer thread answers the requests the remote-host recipes open, as a person on the dashboard would.
"""

import base64
import json
import re
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.live_console import REPO, console_env, live_console, manage, poll
from tests.support.signatures import verified

LANGUAGES = {"sh", "bash", "console", "python", "curl", "go"}
LIVE = "run against a live console"
TEMP_DIR = "run in a temp dir"
GO = "built with go build, run against a live console"
NOT_RUN = "not run: "
RUN_BY = re.compile(r"run by (tests/[\w/]+\.py), .{10,}")
MOST_NOT_RUN = 8  # keep it small: a recipe that can run here, does
DOC_URL = "http://127.0.0.1:8000"
VENV_BIN = str(Path(sys.executable).parent) + "/"
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
MARKER = re.compile(r"^\s*<!-- recipe: (.+?) -->\s*$")
CREATE_DEMO_USER = (
    "from django.contrib.auth import get_user_model; "
    "get_user_model().objects.filter(username='demo').exists() or "
    "get_user_model().objects.create_superuser('demo', '', 'demo-Pass-for-recipes-9981')"
)
# The ids the remote-host recipes open; the reviewer thread approves each with the comment "go".
HOST_REQUEST_IDS = {"deploy-web-42", "py-deploy-1", "go-deploy-1"}


@dataclass
class Recipe:
    page: Path
    line: int
    language: str
    how: str | None
    code: str

    def __str__(self):
        return f"{self.page.relative_to(REPO)}:{self.line} ({self.language})"


def recipes(page):
    """Every fenced block of a recipe language in ``page``, with the marker on the line above it (or None)."""
    lines = page.read_text().splitlines()
    found, at = [], 0
    while at < len(lines):
        fence = FENCE.match(lines[at])
        if not fence:
            at += 1
            continue
        indent, language = fence.groups()
        end = next(i for i in range(at + 1, len(lines)) if lines[i].strip() == "```")
        if language in LANGUAGES:
            above = next((lines[i] for i in range(at - 1, -1, -1) if lines[i].strip()), "")
            marker = MARKER.match(above)
            code = "\n".join(line[len(indent) :] for line in lines[at + 1 : end]) + "\n"
            found.append(Recipe(page, at + 1, language, marker.group(1) if marker else None, code))
        at = end + 1
    return found


ALL = [recipe for page in PAGES for recipe in recipes(page)]


def as_here(code, base_url=DOC_URL):
    """The recipe with this machine's virtualenv and the live console's address."""
    return code.replace(".venv/bin/", VENV_BIN).replace(DOC_URL, base_url)


def pages_with(how):
    return sorted({recipe.page for recipe in ALL if recipe.how == how}, key=str)


def test_every_recipe_says_how_it_is_run():
    unmarked = [str(recipe) for recipe in ALL if recipe.how is None]
    assert not unmarked, f"a recipe with no <!-- recipe: ... --> marker above it: {unmarked}"
    unknown = [
        str(r)
        for r in ALL
        if r.how not in (LIVE, TEMP_DIR, GO) and not r.how.startswith(NOT_RUN) and not RUN_BY.fullmatch(r.how)
    ]
    assert not unknown, f"a marker that says no known way to run its recipe: {unknown}"
    for recipe in ALL:
        if by := RUN_BY.fullmatch(recipe.how):
            runner = REPO / by.group(1)
            assert runner.is_file() and f"<!-- recipe: {recipe.how} -->" in runner.read_text(), (
                f"{recipe}: {by.group(1)} must exist and find the block by its marker"
            )
    not_run = [f"{recipe}: {recipe.how}" for recipe in ALL if recipe.how.startswith(NOT_RUN)]
    assert all(len(line.split(NOT_RUN, 1)[1]) > 10 for line in not_run), "a recipe not run must say why"
    assert len(not_run) <= MOST_NOT_RUN, "more recipes are not run than before:\n" + "\n".join(not_run)
    assert [r for r in ALL if r.how == GO and r.language == "go"], "the Go example lost its marker"


def test_the_readme_is_at_most_12_kb():
    assert (REPO / "README.md").stat().st_size <= 12 * 1024


class Reviewer(threading.Thread):
    """Approves, with the comment "go", each request the recipes open under ``ids``, as soon as it is open."""

    def __init__(self, console, ids):
        super().__init__(daemon=True)
        self.console, self.ids, self.stop, self.answered = console, set(ids), threading.Event(), set()

    def run(self):
        while not self.stop.is_set():
            status, body = self.console.call("GET", "/api/v1/requests?status=open&limit=500")
            for request in body.get("requests", []) if status == 200 else []:
                if request["id"] in self.ids - self.answered:
                    answer = {"ok": True, "comment": "go"}
                    if self.console.call("POST", f"/api/v1/requests/{request['id']}/answer", answer)[0] == 200:
                        self.answered.add(request["id"])
            self.stop.wait(0.05)  # a reviewer's glance at the inbox, not a wait for an event

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.join(timeout=5)


@pytest.fixture(scope="module")
def console(live):
    manage(live.env, "shell", "--no-imports", "-c", CREATE_DEMO_USER)  # the user `make run` prints
    return live


def run_live_shell(console, page):
    """The page's live shell blocks, in order, in one bash script; returns each block's output."""
    blocks = [r for r in recipes(page) if r.how == LIVE and r.language in {"sh", "bash", "console", "curl"}]
    separator = "@@recipe-block@@"
    script = f"\necho; echo {separator}\n".join(as_here(block.code, console.base_url) for block in blocks)
    with Reviewer(console, HOST_REQUEST_IDS):
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=REPO,
            env=console.env,
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert done.returncode == 0, f"{page.name}'s recipes failed:\n{done.stdout}\n{done.stderr}"
    outputs = [output.strip() for output in done.stdout.split(separator)]
    assert len(outputs) == len(blocks)
    return outputs


def check_a_run_started_by_demo(console, outputs):
    run = json.loads(outputs[-1].splitlines()[-1])
    assert (run["tool"], run["started_by"]) == ("deploy", "demo"), run
    status, stored = console.call("GET", f"/api/v1/runs/{run['id']}")
    assert status == 200 and stored["tool"] == "deploy"
    demos_token = manage(console.env, "issue_token", "demo").strip()  # a token cancels only its own user's runs
    assert console.call("POST", f"/api/v1/runs/{run['id']}/cancel", token=demos_token)[0] == 202  # nothing left open


def json_documents(output):
    """The JSON documents curl printed one after another, with nothing between them."""
    decoder, documents, at = json.JSONDecoder(), [], 0
    while at < len(output):
        document, at = decoder.raw_decode(output, at)
        documents.append(document)
        while at < len(output) and output[at].isspace():
            at += 1
    return documents


def check_a_run_and_a_declines_reasons(console, outputs):
    """api.md: a run started by demo, then two host requests, one declined with a reject option, one answered by
    a reply instead (issue 36)."""
    check_a_run_started_by_demo(console, outputs[:1])
    opened_a7, opened_a8, declined, replied = json_documents(outputs[1])
    assert (opened_a7["id"], opened_a8["id"]) == ("refund-a7", "refund-a8")
    option = {"key": "too_large", "label": "Too large", "text": "Refunds above 100 EUR need a manager."}
    assert verified(declined) == {
        "id": "refund-a7",
        "ok": False,
        "data": {"comment": "split it in two", "option": option},
        "reason": "declined",
    }
    message = "Refund 50 EUR; the rest goes on a voucher."
    assert verified(replied) == {
        "id": "refund-a8",
        "ok": False,
        "data": {"response": "respond", "message": message},
        "reason": "declined",
    }


def check_a_host_request_answered(console, outputs):
    _token, opened, answer, withdrawn, reported = outputs
    assert json.loads(opened)["id"] == "deploy-web-42", opened
    assert verified(json.loads(answer)) == {"id": "deploy-web-42", "ok": True, "data": {"comment": "go"}}, answer
    assert json.loads(withdrawn)["error"] == "not_open", withdrawn  # answered already: it cannot be withdrawn
    execution = json.loads(reported)["execution"]  # the host says how its tool ended (issue 36)
    assert (execution["state"], execution["message"]) == ("succeeded", "deployed web in 41 s"), reported


def check_the_signing_keys_listed(console, outputs):
    listed = outputs[-1].splitlines()[-1].split()  # the last line: what the shell also printed comes before
    status, body = console.call("GET", "/api/v1/signing-keys")
    assert status == 200 and listed == [key["public_key"] for key in body["keys"]], (listed, body)
    assert len(base64.urlsafe_b64decode(listed[0] + "=")) == 32  # a raw Ed25519 public key, as RemoteWaitFor pins it


CHECKS = {
    "README.md": check_a_run_started_by_demo,
    "api.md": check_a_run_and_a_declines_reasons,
    "remote-hosts.md": check_a_host_request_answered,
    "signing.md": check_the_signing_keys_listed,
}


@pytest.mark.parametrize("page", pages_with(LIVE), ids=lambda page: page.name)
def test_live_recipes_work_as_written(console, page):
    if any(r.how == LIVE and r.language in {"sh", "bash", "console", "curl"} for r in recipes(page)):
        outputs = run_live_shell(console, page)
        CHECKS[page.name](console, outputs)
    for recipe in [r for r in recipes(page) if r.how == LIVE and r.language == "python"]:
        env = {
            **console.env,
            "CONSOLE_URL": console.base_url,
            "CONSOLE_TOKEN": console.host_token,
            "PYTHONPATH": str(REPO),
        }
        with Reviewer(console, HOST_REQUEST_IDS):
            done = subprocess.run(
                [sys.executable, "-c", recipe.code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
            )
        assert done.returncode == 0, f"{recipe} failed:\n{done.stdout}\n{done.stderr}"
        assert "ok=True" in done.stdout, done.stdout


@pytest.fixture(scope="module")
def migrated_database(tmp_path_factory):
    """A freshly migrated SQLite file, migrated once and copied into each temp dir (a migrate takes seconds)."""
    path = tmp_path_factory.mktemp("recipes-db") / "recipes.sqlite3"
    manage(console_env(path), "migrate", "--noinput")
    return path


@pytest.mark.parametrize("page", pages_with(TEMP_DIR), ids=lambda page: page.name)
def test_temp_dir_recipes_work_as_written(page, tmp_path, migrated_database):
    (tmp_path / "manage.py").symlink_to(REPO / "manage.py")
    shutil.copy(migrated_database, tmp_path / "recipes.sqlite3")  # the migrate ran to its end: no WAL is left
    env = console_env(tmp_path / "recipes.sqlite3", CONSOLE_STATIC_ROOT=str(tmp_path / "static"), PYTHONPATH=str(REPO))
    for at, recipe in enumerate(r for r in recipes(page) if r.how == TEMP_DIR):
        if recipe.language == "python":
            named = re.match(r"# (\w+\.py)\n", recipe.code)
            script = tmp_path / (named.group(1) if named else f"recipe-{at}.py")
            script.write_text(recipe.code)
            command = [sys.executable, script.name]
        else:
            command = ["bash", "-euo", "pipefail", "-c", as_here(recipe.code)]
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{recipe} failed:\n{done.stdout}\n{done.stderr}"


def test_the_readmes_tool_module_is_served_and_its_run_asks_then_finishes(tmp_path):
    """``TOOLNEXUS_TOOL_MODULES=mytools make run`` with the README's mytools.py: daphne serves it, a run asks."""
    module = next(r for r in recipes(REPO / "README.md") if r.code.startswith("# mytools.py"))
    (tmp_path / "mytools.py").write_text(module.code)
    with live_console(
        tmp_path, tmp_path / "daphne.log", TOOLNEXUS_TOOL_MODULES="mytools", PYTHONPATH=str(tmp_path)
    ) as served:
        status, run = served.call("POST", "/api/v1/runs", {"tool": "transfer", "args": {"amount": 5}})
        assert status == 201, run
        waiting = poll(served, f"/api/v1/runs/{run['id']}", lambda body: body["request"] is not None)
        assert waiting["request"]["prompt"] == "Transfer 5?"
        answer = {"ok": True, "comment": "fine"}
        assert served.call("POST", f"/api/v1/requests/{waiting['request']['id']}/answer", answer)[0] == 200
        done = poll(served, f"/api/v1/runs/{run['id']}", lambda body: body["status"] == "succeeded")
        assert done["result"]["output"] == "transferred"


def test_the_go_example_builds_and_waits_for_a_reviewers_answer(console, tmp_path):
    go = shutil.which("go")
    assert go, "Debian's golang-go is needed to build the docs' Go example (.ci/run installs it)"
    (example,) = [r for r in ALL if r.how == GO]
    (tmp_path / "main.go").write_text(example.code)
    (tmp_path / "go.mod").write_text("module consolewait\n\ngo 1.19\n")
    env = {**console.env, "GOPROXY": "off", "GOFLAGS": "-mod=mod", "GOCACHE": str(tmp_path / "go-cache")}
    built = subprocess.run([go, "build", "-o", "waitfor", "."], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr

    env.update(CONSOLE_URL=console.base_url, CONSOLE_TOKEN=console.host_token)
    with Reviewer(console, HOST_REQUEST_IDS) as reviewer:
        done = subprocess.run(["./waitfor"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "go-deploy-1" in reviewer.answered
    assert done.stdout.strip() == "{ID:go-deploy-1 OK:true Data:map[comment:go] Reason:}", done.stdout
