"""Upgrades: a database made by an old commit's own code migrates to the head, and the console carries on.

Each snapshot in fixtures/ (built by tests/upgrade/build_fixture.py at the commit it is named after,
described by its JSON manifest) is copied, migrated by today's ``manage.py migrate`` on SQLite and on
PostgreSQL (conftest.py) and served by today's console under daphne; everything is checked from
outside, through ``manage.py``, the HTTP API and the pages, with the tokens and password the old
code issued. Nothing is mocked.
"""

import json
import re
from datetime import datetime, timedelta

import pytest

from tests.support.live_console import manage, poll
from tests.support.signatures import verified


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
    # The keys the old console answered with, and the console's signature beside them.
    assert (status, sorted(verified(polled))) == (answered["status"], answered["keys"])
    assert verified(polled) == {"id": opened["id"], "ok": True, "data": {"build": "4711"}}

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
        # Runs from before human-aware time keep the wall clock they started under (issue 35).
        assert run["timeout_counts_waiting"] is True, name
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


def test_requests_decided_before_the_upgrade_say_who_decided_and_were_never_escalated(upgraded, live):
    """Issue 35: rows decided before ``decided_by`` was kept read it from their status and answerer."""
    for name in ("approved", "declined", "cancelled"):
        old = upgraded.manifest["runs"][name]
        status, view = live.call("GET", f"/api/v1/requests/{old['request']}")
        assert status == 200, view
        assert (view["decided_by"], view["decision"]["decided_by"]) == ("person", "person"), name
        assert (view["escalations"], view["kept_open"], view["deadline_note"]) == (0, False, None), name


# -- requests opened with a deadline just before issue 35 (the 146e890 step) -----------------------------------------

# "Expired at 14:51 UTC, nobody answered", with the day (and year) in front when it was another day.
EXPIRED_TEXT = re.compile(r"Expired at (\d{1,2} [A-Z][a-z]{2}( \d{4})? )?\d\d:\d\d UTC, nobody answered")


def deadlines_of(upgraded):
    if "deadlines" not in upgraded.manifest:
        pytest.skip(f"the {upgraded.snapshot} snapshot has no request with a deadline (the 146e890 step adds them)")
    return upgraded.manifest["deadlines"]


def moment(wire):
    return datetime.fromisoformat(wire.replace("Z", "+00:00"))


def test_the_old_policy_declines_on_expiry_after_migrate(upgraded):
    deadlines_of(upgraded)
    read = manage(
        upgraded.env,
        "shell",
        "--no-imports",
        "-c",
        "from approvals.models import Policy\n"
        f"policy = Policy.objects.get(name={upgraded.manifest['policy']['name']!r})\n"
        "print(policy.on_timeout, policy.tool_pattern)",
    )
    assert read.split() == ["decline", upgraded.manifest["policy"]["tool_pattern"]]


def test_a_host_request_whose_deadline_passed_before_the_upgrade_expires_as_before(upgraded, live):
    passed = deadlines_of(upgraded)["passed"]
    path = f"/api/v1/requests/{passed['id']}"
    # Today's expiry timer finds it past due when the console starts.
    view = poll(live, path, lambda r: r["status"] != "open", what="the passed deadline's expiry")
    assert (view["status"], view["decided_by"], view["answered_by"], view["expiresAt"]) == (
        "expired",
        "timeout",
        None,
        passed["expiresAt"],
    )
    assert view["policy"]["name"] == upgraded.manifest["policy"]["name"]
    decision = view["decision"]
    assert (decision["outcome"], decision["decided_by"], decision["by"]) == ("expired", "timeout", None)
    assert EXPIRED_TEXT.fullmatch(decision["text"]), decision["text"]
    assert moment(decision["at"]) >= moment(passed["expiresAt"])
    assert (view["escalations"], view["kept_open"], view["deadline_note"]) == (0, False, None)

    # The host reads the answer it always read: a refusal with reason "expired", nothing else.
    status, polled = live.call("GET", path + "/answer?wait=0", token=live.host_token)
    assert (status, verified(polled)) == (200, {"id": passed["id"], "ok": False, "reason": "expired"})
    status, refused = live.call("POST", path + "/answer", {"ok": True})
    assert status == 409, refused

    browser = upgraded.reviewer_browser(live)
    [expired] = [e for e in audit_export(browser, f"request={passed['id']}") if e["action"] == "request.expired"]
    assert (expired["actor"], expired["decision"]["decided_by"]) == ("system", "timeout"), expired
    assert expired["decision"]["outcome"] == "expired"


def test_a_run_whose_request_passed_its_deadline_before_the_upgrade_returns_the_expiry(upgraded, live):
    deadlines_of(upgraded)
    old = upgraded.manifest["runs"]["expiring"]
    run = poll(live, f"/api/v1/runs/{old['id']}", lambda r: r["status"] not in ("running", "waiting"), what="the run")
    # §10: the exact prefix, then what happened in words; never a person's refusal.
    output = run["result"]["output"]
    assert output.startswith(f"declined/expired: {old['prompt']} (expired at "), output
    assert output.endswith(", nobody answered)"), output
    assert run["result"]["is_error"] is True
    assert run["timeout_counts_waiting"] is True
    status, view = live.call("GET", f"/api/v1/requests/{old['request']}")
    assert status == 200, view
    assert (view["status"], view["decided_by"], view["expiresAt"]) == ("expired", "timeout", old["expiresAt"])


def test_a_far_deadline_from_before_the_upgrade_stays_open_extendable_and_answerable(upgraded, live):
    far = deadlines_of(upgraded)["far"]
    path = f"/api/v1/requests/{far['id']}"
    status, view = live.call("GET", path)
    assert status == 200, view
    # Its own deadline, as the host sent it: nothing of the upgrade gave it another.
    assert (view["status"], view["decided_by"], view["expiresAt"]) == ("open", None, far["expiresAt"])
    assert (view["escalations"], view["kept_open"], view["deadline_note"]) == (0, False, None)
    assert view["deadline"]["extended_minutes"] == 0 and view["deadline"]["room_minutes"] > 0, view["deadline"]

    # The host posts it again after the upgrade (a lost POST's retry): the same request, the same deadline.
    status, again = live.call("POST", "/api/v1/requests", far["body"], token=live.host_token)
    assert status == 200, again
    assert (again["status"], again["expiresAt"]) == ("open", far["expiresAt"])

    status, extended = live.call("POST", path + "/extend", {"minutes": 30})
    assert status == 200, extended
    assert moment(extended["expiresAt"]) == moment(far["expiresAt"]) + timedelta(minutes=30)
    assert (extended["status"], extended["deadline"]["extended_minutes"]) == ("open", 30)
    status, polled = live.call("GET", path + "/answer?wait=0", token=live.host_token)
    assert status == 202, polled

    status, answer = live.call("POST", path + "/answer", {"ok": True, "comment": "after the upgrade"})
    assert status == 200, answer
    status, polled = live.call("GET", path + "/answer?wait=5", token=live.host_token)
    # As the old console answered a host: the reviewer's comment in data (the 0f77d3f step recorded it so).
    assert (status, verified(polled)) == (200, {"id": far["id"], "ok": True, "data": {"comment": "after the upgrade"}})
    status, view = live.call("GET", path)
    assert (view["status"], view["decided_by"], view["answered_by"]) == ("answered", "person", "reviewer")
