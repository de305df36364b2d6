"""Upgrades: a database made by an old commit's own code migrates to the head, and the console carries on.

Each snapshot in fixtures/ (built by tests/upgrade/build_fixture.py at the commit it is named after,
described by its JSON manifest) is copied to a temporary directory, migrated by today's
``manage.py migrate`` and served by today's console under daphne; everything is checked from
outside, through ``manage.py``, the HTTP API and the pages, with the tokens and password the old
code issued. Nothing is mocked.
"""

import json
import shutil
from pathlib import Path

import pytest

from tests.support.live_console import (
    ClientAt,
    LiveConsole,
    console_env,
    manage,
    poll,
    running_daphne,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SNAPSHOTS = sorted(path.stem for path in FIXTURES.glob("*.json"))
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


class Upgraded:
    """One snapshot, copied and migrated by today's code; ``serve()`` starts today's console on it."""

    def __init__(self, snapshot, workdir):
        self.manifest = json.loads((FIXTURES / f"{snapshot}.json").read_text())
        self.db_path = Path(workdir) / "upgraded.sqlite3"
        shutil.copy(FIXTURES / f"{snapshot}.sqlite3", self.db_path)
        self.env = console_env(self.db_path)
        # The settings the snapshot was made under (unset: the development defaults).
        for name, value in self.manifest["settings"].items():
            if name.isupper():
                if value is None:
                    self.env.pop(name, None)
                else:
                    self.env[name] = value
        for name in ("DATABASE_URL", "REDIS_URL"):
            self.env.pop(name, None)
        self.migrate_output = manage(self.env, "migrate", "--noinput")
        try:  # checked by its own test, before the console writes anything
            self.verified_after_migrate = manage(self.env, "verify_audit", "--head", self.manifest["audit"]["head"])
        except RuntimeError as failure:
            self.verified_after_migrate = str(failure)
        self.log_path = ARTIFACTS / f"upgrade-{snapshot}-daphne.log"
        ARTIFACTS.mkdir(exist_ok=True)

    def serve(self):
        return running_daphne(self.env, self.log_path)

    def console(self, port):
        users = self.manifest["users"]
        return LiveConsole(
            base_url=f"http://127.0.0.1:{port}",
            port=port,
            db_path=self.db_path,
            log_path=self.log_path,
            env=self.env,
            tokens={name: user["token"] for name, user in users.items()},
        )

    def reviewer_browser(self, console):
        browser = ClientAt(console, "127.0.0.1")
        status, _, _ = browser.log_in("reviewer", self.manifest["users"]["reviewer"]["password"])
        assert status == 302, "the reviewer's password from the old database no longer logs in"
        return browser


@pytest.fixture(scope="module", params=SNAPSHOTS)
def upgraded(request, tmp_path_factory):
    return Upgraded(request.param, tmp_path_factory.mktemp(f"upgrade-{request.param}"))


@pytest.fixture(scope="module")
def live(upgraded):
    """Today's console serving the upgraded database (one per snapshot: starting it adopts the waiting run)."""
    with upgraded.serve() as port:
        yield upgraded.console(port)


def audit_export(browser, query):
    status, _, text = browser.request("GET", f"/audit/export.jsonl?{query}")
    assert status == 200, text
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def as_old_saw_it(value, old):
    """``value`` cut to the keys ``old`` had, in every nested object: what was there reads back unchanged,
    and a later version may add to it (the export's ``decision`` gained ``changes``)."""
    if isinstance(value, dict) and isinstance(old, dict):
        return {key: as_old_saw_it(value.get(key), old[key]) for key in old}
    return value


def test_migrate_applies_the_migrations_made_after_the_snapshot(upgraded):
    applied = manage(upgraded.env, "showmigrations", "approvals", "--plan")
    today = [line.split("approvals.", 1)[1] for line in applied.splitlines() if "approvals." in line]
    old = upgraded.manifest["approvals_migrations"]
    assert today[: len(old)] == old, "a migration the snapshot applied was renamed or reordered"
    assert all(line.startswith("[X]") for line in applied.splitlines() if line.strip()), applied
    if len(today) > len(old):
        assert "Applying approvals." + today[len(old)] in upgraded.migrate_output


def test_the_sealed_trail_verifies_after_migrate_with_the_old_head(upgraded):
    old_count = upgraded.manifest["audit"]["verify_audit"][0]
    assert old_count in upgraded.verified_after_migrate
    assert upgraded.manifest["audit"]["head"] in upgraded.verified_after_migrate


def test_a_run_waiting_on_a_dead_console_is_adopted_and_finishes_approved(upgraded, live):
    waiting = upgraded.manifest["runs"]["waiting"]
    browser = upgraded.reviewer_browser(live)
    # The first call starts the supervisor, which declares the old process dead and adopts its run.
    adopted = poll(
        live,
        f"/api/v1/runs/{waiting['id']}",
        lambda run: any(
            event["action"] == "run.adopted" and event["run"] == waiting["id"]
            for event in audit_export(browser, f"run={waiting['id']}")
        ),
        what="the waiting run's adoption",
    )
    assert adopted["status"] == "waiting"

    status, answer = live.call("POST", f"/api/v1/requests/{waiting['request']}/answer", {"ok": True})
    assert status == 200, answer
    done = poll(live, f"/api/v1/runs/{waiting['id']}", lambda run: run["status"] == "succeeded", what="the adopted run")
    assert done["result"] == {"output": "refunded 40.0 EUR on order UP-1004", "is_error": False}


def test_an_open_host_request_is_answerable_and_long_polls_with_the_old_keys(upgraded, live):
    host_requests = upgraded.manifest["host_requests"]
    opened = host_requests["open"]
    path = f"/api/v1/requests/{opened['id']}/answer"

    status, still_open = live.call("GET", path + "?wait=0", token=live.host_token)
    assert (status, sorted(still_open)) == (opened["long_poll"]["status"], opened["long_poll"]["keys"])

    # The host posts its request again after the upgrade (RemoteWaitFor retries a lost POST): the same request.
    status, stored = live.call("POST", "/api/v1/requests", opened["body"], token=live.host_token)
    assert status == 200, stored
    assert set(opened["stored_keys"]) <= set(stored)
    assert (stored["status"], stored["host"], stored["tool"]) == ("open", "ci.example", "release")

    status, answer = live.call("POST", path, {"ok": True, "data": {"build": "4711"}})
    assert status == 200, answer
    status, polled = live.call("GET", path + "?wait=5", token=live.host_token)
    answered = host_requests["answered"]["long_poll"]
    assert (status, sorted(polled)) == (answered["status"], answered["keys"])
    assert polled == {"id": opened["id"], "ok": True, "data": {"build": "4711"}}

    before = host_requests["answered"]
    status, polled = live.call("GET", f"/api/v1/requests/{before['id']}/answer?wait=0", token=live.host_token)
    assert (status, polled) == (before["long_poll"]["status"], before["long_poll"]["body"])


def test_finished_runs_and_their_audit_events_read_back(upgraded, live):
    browser = upgraded.reviewer_browser(live)
    for name in ("approved", "declined", "cancelled"):
        old = upgraded.manifest["runs"][name]
        status, run = live.call("GET", f"/api/v1/runs/{old['id']}")
        assert status == 200, run
        assert run["status"] == old["status"], name
        if "result" in old:
            assert run["result"] == old["result"], name
        status, _, page = browser.request("GET", f"/runs/{old['id']}/")
        assert status == 200, f"the {name} run's page: {status}"

    now = {event["seq"]: event for event in audit_export(browser, upgraded.manifest["audit"]["export_query"])}
    for event in upgraded.manifest["audit"]["export"]:
        assert as_old_saw_it(now[event["seq"]], event) == event


def test_the_trail_goes_on_from_the_old_head(upgraded, live):
    """A new event is chained after the snapshot's, and the chain still passes through its head."""
    status, run = live.call("POST", "/api/v1/runs", {"tool": "refund", "args": {"amount": 1}}, token=live.host_token)
    assert status == 201, run
    poll(live, f"/api/v1/runs/{run['id']}", lambda r: r["status"] == "waiting", what="the new run waiting")
    verified = manage(upgraded.env, "verify_audit", "--head", upgraded.manifest["audit"]["head"])
    old_count = int(upgraded.manifest["audit"]["verify_audit"][0].split()[0])
    assert int(verified.split()[0]) > old_count
    assert "sealed with key version 1" in verified
