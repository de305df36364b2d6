"""Build the upgrade fixtures: console databases made by an old commit's own code (tests/upgrade/).

    /work/main/.venv/bin/python tests/upgrade/build_fixture.py              # every step, in order
    /work/main/.venv/bin/python tests/upgrade/build_fixture.py --from 0f77d3f   # that step and the later ones
    /work/main/.venv/bin/python tests/upgrade/build_fixture.py --out /tmp/fixtures  # elsewhere, to compare

Each entry of ``STEPS`` names a commit and the function that adds its rows. For each, this script
checks the commit out in a temporary worktree (``git worktree add --detach``, removed afterwards)
and runs the function in a child process whose imports resolve to that tree, not to the editable
install of the main checkout: cwd and PYTHONPATH are the old tree, and the child prints
``approvals.__file__`` to show it. The function drives that commit's own console (daphne, started
as its ``tests/support/live_console.py`` starts it) through HTTP, as a reviewer and a remote host
would, and writes ``fixtures/<commit>.sqlite3`` and ``fixtures/<commit>.json`` (the manifest: ids,
passwords, raw API tokens, and what the old code answered, for the test to compare).

The first step, ``0f77d3f`` (issue 30), starts from an empty file. A later issue that adds rows
appends a step: its function gets the previous step's database and manifest, migrates the
database with its own ``manage.py``, adds its rows and writes its own snapshot and manifest
(the previous manifest's entries kept, its own added). Every snapshot stays in fixtures/ and
``tests/upgrade/test_upgrade.py`` migrates each to the head, so a database made at 0f77d3f keeps
being tested however many steps follow. A step that starts a console adopts the waiting run the
0f77d3f step left (its process is dead): kill that console with SIGKILL too, so the run is left
waiting on a dead process again. A step's function may only use what exists at its commit.
"""

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
REPO = HERE.parents[1]

REVIEWER_PASSWORD = "live-Reviewer-pass-5521"  # CREATE_USERS in tests/support/live_console.py at 0f77d3f
REVIEWER_TOKEN_NAME = "upgrade-reviewer"
HOST_TOKEN_NAME = "upgrade-host"
HOST_NAME = "ci.example"


# -- the steps: each runs inside its commit's tree --------------------------------------------------


def build_0f77d3f(workdir, previous):
    """Issue 30's rows: finished runs, a run waiting on a dead process, host requests, a sealed trail."""
    from toolnexus import Request

    from console_remote import RemoteWaitFor
    from tests.support.live_console import (
        CREATE_USERS,
        ClientAt,
        LiveConsole,
        console_env,
        daphne_process,
        manage,
        open_requests_of,
        poll,
        start,
    )

    assert previous is None, "0f77d3f is the first step: it starts from an empty database"
    db_path = Path(workdir) / "console.sqlite3"
    # No DJANGO_SECRET_KEY and no CONSOLE_AUDIT_KEYS: the trail is sealed with key version 1 derived from the
    # development SECRET_KEY, as every `make run` database of that commit is.
    env = console_env(db_path)
    for name in ("DJANGO_SECRET_KEY", "CONSOLE_AUDIT_KEYS", "DATABASE_URL", "REDIS_URL"):
        env.pop(name, None)
    manage(env, "migrate", "--noinput")
    manage(env, "shell", "-c", CREATE_USERS, "--no-imports")
    tokens = {
        "reviewer": manage(env, "issue_token", "reviewer", "--name", REVIEWER_TOKEN_NAME).strip(),
        "host-svc": manage(env, "issue_token", "host-svc", "--name", HOST_TOKEN_NAME).strip(),
    }
    manifest = {"users": {}, "runs": {}, "host_requests": {}}
    log_path = Path(workdir) / "daphne.log"
    with daphne_process(env, log_path) as proc:
        console = LiveConsole(
            base_url=f"http://127.0.0.1:{proc.port}",
            port=proc.port,
            db_path=db_path,
            log_path=log_path,
            env=env,
            tokens=tokens,
        )
        browser = ClientAt(console, "127.0.0.1")
        status, _, _ = browser.log_in("reviewer", REVIEWER_PASSWORD)
        assert status == 302, status

        def waiting_request(run_id):
            poll(console, f"/api/v1/runs/{run_id}", lambda r: r["status"] == "waiting", what=f"run {run_id} waiting")
            [request] = open_requests_of(console, run_id)
            return request["id"]

        def finished(run_id):
            return poll(
                console,
                f"/api/v1/runs/{run_id}",
                lambda r: r["status"] not in ("running", "waiting"),
                what=f"run {run_id} finishing",
            )

        def answer(request_id, body):
            status, answered = console.call("POST", f"/api/v1/requests/{request_id}/answer", body)
            assert status == 200, answered
            return answered

        # Finished runs: approved, declined, cancelled while it waited.
        for name, args, body in (
            ("approved", {"order": "UP-1001", "amount": 12.5}, {"ok": True, "comment": "fine by me"}),
            ("declined", {"order": "UP-1002", "amount": 999.0}, {"ok": False, "comment": "too much"}),
        ):
            run_id = start(console, {"tool": "refund", "args": args})
            request_id = waiting_request(run_id)
            answer(request_id, body)
            run = finished(run_id)
            manifest["runs"][name] = {
                "id": run_id,
                "request": request_id,
                "status": run["status"],
                "result": run["result"],
            }
        run_id = start(console, {"tool": "deploy", "args": {"service": "billing"}})
        request_id = waiting_request(run_id)
        status, cancelled = console.call("POST", f"/api/v1/runs/{run_id}/cancel", {}, token=console.host_token)
        assert status == 202 and cancelled["cancel_requested"], (status, cancelled)
        run = finished(run_id)
        manifest["runs"]["cancelled"] = {"id": run_id, "request": request_id, "status": run["status"]}

        # A remote host's requests, opened as RemoteWaitFor opens them: one answered, one left open.
        host = RemoteWaitFor(console.base_url, console.host_token, host=HOST_NAME)
        for name, wire, tool, args in (
            (
                "answered",
                Request(id="upgrade-host-answered", kind="approval", prompt="Restart the cache on ci-7?"),
                "restart",
                {"node": "ci-7"},
            ),
            (
                "open",
                Request(
                    id="upgrade-host-open",
                    kind="input",
                    prompt="Which build goes to production?",
                    data={"schema": {"type": "object", "properties": {"build": {"type": "string"}}}},
                ),
                "release",
                {"channel": "stable", "dry_run": False},
            ),
        ):
            body = host._body(wire, tool, args)
            stored = host._call_blocking("POST", "/api/v1/requests", body, 10, "open the request")
            manifest["host_requests"][name] = {"id": wire.id, "body": body, "stored_keys": sorted(stored)}
        answered = manifest["host_requests"]["answered"]
        answer(answered["id"], {"ok": True, "comment": "go"})
        for entry in manifest["host_requests"].values():
            status, polled = console.call(
                "GET", f"/api/v1/requests/{entry['id']}/answer?wait=0", token=console.host_token
            )
            entry["long_poll"] = {"status": status, "keys": sorted(polled), "body": polled}
        assert manifest["host_requests"]["open"]["long_poll"]["status"] == 202

        # The run left waiting: its console dies (SIGKILL) while its request is open.
        run_id = start(console, {"tool": "refund", "args": {"order": "UP-1004", "amount": 40.0}})
        request_id = waiting_request(run_id)
        manifest["runs"]["waiting"] = {"id": run_id, "request": request_id, "tool": "refund", "pid": proc.pid}

        status, _, export = browser.request("GET", "/audit/export.jsonl?transcript=1")
        assert status == 200, status
        proc.kill()
        proc.wait()

    owner = manage(
        env,
        "shell",
        "--no-imports",
        "-c",
        "from approvals.models import Run, ConsoleProcess\n"
        f"run = Run.objects.get(pk={run_id})\n"
        "print(run.status, run.owner, ConsoleProcess.objects.filter(pk=run.owner).exists())",
    ).split()
    assert owner[0] == "waiting" and owner[2] == "True", owner
    manifest["runs"]["waiting"]["owner"] = owner[1]
    verified = manage(env, "verify_audit")
    manifest["audit"] = {
        "verify_audit": verified.strip().splitlines(),
        "head": next(line.split(" ", 1)[1] for line in verified.splitlines() if line.startswith("Head: ")),
        "export_query": "transcript=1",
        "export": [json.loads(line) for line in export.splitlines() if line.strip()],
    }
    manifest["users"] = {
        "reviewer": {"password": REVIEWER_PASSWORD, "token": tokens["reviewer"], "staff": True},
        "host-svc": {"password": None, "token": tokens["host-svc"], "staff": False},
    }
    manifest["settings"] = {
        "DJANGO_SECRET_KEY": None,
        "CONSOLE_AUDIT_KEYS": None,
        "note": "unset: the trail is sealed with key version 1 derived from the development SECRET_KEY",
    }
    return db_path, manifest


# How long after it is opened the "passed" deadline of the 146e890 step falls: long enough for its console to be
# killed first (else that commit's own timer expires it), short enough to have passed whenever the test runs.
PASSING_SECONDS = 30
FAR_DAYS = 3650


def build_146e890(workdir, previous):
    """Issue 35's: requests with deadlines opened just before it (expiry then always declined), under a policy.

    A remote host opens two approvals through the API under an admin policy of that commit (no on_timeout yet):
    one whose ``expiresAt`` passes ``PASSING_SECONDS`` after it is opened, one ``FAR_DAYS`` away; a run of the
    demo tool ``expiring`` asks with the same short deadline. The console is killed (SIGKILL) before the short
    deadline, so nothing expires them here: they are open in the snapshot, the short ones past due by the time
    today's console serves it, and the runs are left waiting on a dead process.
    """
    import time
    from datetime import timedelta

    from toolnexus import Request

    from console_remote import RemoteWaitFor
    from tests.support.live_console import (
        CSRF_FIELD,
        ClientAt,
        LiveConsole,
        console_env,
        daphne_process,
        manage,
        open_requests_of,
        poll,
        start,
    )

    assert previous is not None, "146e890 starts from the 0f77d3f snapshot"
    db_path = Path(workdir) / "console.sqlite3"
    env = console_env(db_path)
    for name in ("DJANGO_SECRET_KEY", "CONSOLE_AUDIT_KEYS", "DATABASE_URL", "REDIS_URL"):
        env.pop(name, None)
    manage(env, "migrate", "--noinput")
    tokens = {name: user["token"] for name, user in previous["users"].items()}
    old_waiting = previous["runs"]["waiting"]
    manifest = {"runs": dict(previous["runs"]), "host_requests": dict(previous["host_requests"]), "deadlines": {}}
    log_path = Path(workdir) / "daphne.log"
    with daphne_process(env, log_path) as proc:
        console = LiveConsole(
            base_url=f"http://127.0.0.1:{proc.port}",
            port=proc.port,
            db_path=db_path,
            log_path=log_path,
            env=env,
            tokens=tokens,
        )
        browser = ClientAt(console, "127.0.0.1")
        status, _, _ = browser.log_in("reviewer", REVIEWER_PASSWORD)
        assert status == 302, status

        # This console adopts the run the 0f77d3f step left waiting; let it settle into waiting again first.
        def adopted(run):
            status, _, text = browser.request("GET", f"/audit/export.jsonl?run={old_waiting['id']}")
            return run["status"] == "waiting" and sum('"run.adopted"' in line for line in text.splitlines()) >= 1

        poll(console, f"/api/v1/runs/{old_waiting['id']}", adopted, what="the old waiting run adopted")

        # A policy made in that commit's admin: on_timeout did not exist, so after the upgrade it must decline.
        _, _, page = browser.request("GET", "/admin/approvals/policy/add/")
        form = {
            "csrfmiddlewaretoken": CSRF_FIELD.search(page).group(1),
            "name": "upgrade windows",
            "enabled": "on",
            "priority": "50",
            "tool_pattern": "window-*",
            "kind": "approval",
            "quorum": "1",
            "starter_may_answer": "on",
            "webhook_url": "",
            "_save": "Save",
        }
        status, _, text = browser.request("POST", "/admin/approvals/policy/add/", form=form)
        assert status == 302, f"the admin refused the policy ({status}):\n{text[:3000]}"
        manifest["policy"] = {"name": form["name"], "tool_pattern": form["tool_pattern"], "kind": form["kind"]}

        host = RemoteWaitFor(console.base_url, console.host_token, host=HOST_NAME)
        now = datetime.now(UTC)
        for name, tool, expires in (
            ("far", "window-open", now + timedelta(days=FAR_DAYS)),
            ("passed", "window-close", now + timedelta(seconds=PASSING_SECONDS)),
        ):
            wire = Request(
                id=f"upgrade-deadline-{name}",
                kind="approval",
                prompt=f"Open the {name} maintenance window?",
                expiresAt=expires.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            )
            body = host._body(wire, tool, {"window": name})
            stored = host._call_blocking("POST", "/api/v1/requests", body, 10, "open the request")
            assert stored["status"] == "open" and stored["expiresAt"] == wire.expiresAt, stored
            manifest["deadlines"][name] = {"id": wire.id, "body": body, "expiresAt": wire.expiresAt, "tool": tool}

        run_id = start(console, {"tool": "expiring", "args": {"seconds": PASSING_SECONDS}})
        poll(console, f"/api/v1/runs/{run_id}", lambda r: r["status"] == "waiting", what=f"run {run_id} waiting")
        [request] = open_requests_of(console, run_id)
        manifest["runs"]["expiring"] = {
            "id": run_id,
            "request": request["id"],
            "prompt": request["prompt"],
            "expiresAt": request["expiresAt"],
        }
        # The sealer chains events a moment after they are written: export once it has, so the snapshot's
        # export reads back as it is (a SIGKILL before that would leave the last events unchained).
        give_up = time.monotonic() + 20
        while True:
            status, _, export = browser.request("GET", "/audit/export.jsonl?transcript=1")
            assert status == 200, status
            lines = [json.loads(line) for line in export.splitlines() if line.strip()]
            if all(event["hash"] for event in lines):
                break
            assert time.monotonic() < give_up, "the trail was not chained within 20 s"
            time.sleep(0.05)
        proc.kill()
        proc.wait()
        killed_at = datetime.now(UTC)
    soonest = min(
        datetime.fromisoformat(manifest["deadlines"]["passed"]["expiresAt"].replace("Z", "+00:00")),
        datetime.fromisoformat(manifest["runs"]["expiring"]["expiresAt"].replace("Z", "+00:00")),
    )
    assert killed_at < soonest, f"the console died at {killed_at}, after the short deadline {soonest}: build again"
    opened = manage(
        env,
        "shell",
        "--no-imports",
        "-c",
        "from approvals.models import Request\n"
        "print(sorted(Request.objects.filter(status='open', expires_at__isnull=False).values_list('id', flat=True)))",
    )
    for request_id in (
        *(entry["id"] for entry in manifest["deadlines"].values()),
        manifest["runs"]["expiring"]["request"],
    ):
        assert repr(request_id) in opened, f"{request_id} is not open with its deadline in the snapshot: {opened}"
    owners = manage(
        env,
        "shell",
        "--no-imports",
        "-c",
        "from approvals.models import Run, ConsoleProcess\n"
        f"for run in Run.objects.filter(pk__in=[{old_waiting['id']}, {run_id}]).order_by('pk'):\n"
        "    print(run.pk, run.status, run.owner, ConsoleProcess.objects.filter(pk=run.owner).exists())",
    ).split("\n")
    owner_of = {int(line.split()[0]): line.split()[1:] for line in owners if line.strip()}
    for entry in (old_waiting, manifest["runs"]["expiring"]):
        status, owner, registered = owner_of[entry["id"]]
        assert (status, registered) == ("waiting", "True"), (entry, owner_of)
    manifest["runs"]["waiting"] = {**old_waiting, "pid": proc.pid, "owner": owner_of[old_waiting["id"]][1]}
    manifest["runs"]["expiring"]["owner"] = owner_of[run_id][1]
    verified = manage(env, "verify_audit")
    manifest["audit"] = {
        "verify_audit": verified.strip().splitlines(),
        "head": next(line.split(" ", 1)[1] for line in verified.splitlines() if line.startswith("Head: ")),
        "export_query": "transcript=1",
        "export": [json.loads(line) for line in export.splitlines() if line.strip()],
    }
    return db_path, manifest


STEPS = [("0f77d3f", build_0f77d3f), ("146e890", build_146e890)]


# -- the driver: a temporary worktree per step, a child process inside it --------------------------


def run_step_inside(commit, tree, previous_db, previous_manifest, out_dir):
    """The child: prove the imports are the old tree's, run the step, snapshot its database."""
    import approvals

    where = Path(approvals.__file__).resolve()
    print(f"approvals.__file__ = {where}", flush=True)
    assert where.is_relative_to(Path(tree).resolve()), f"{where} is not under {tree}"
    step = dict(STEPS)[commit]
    previous = json.loads(Path(previous_manifest).read_text()) if previous_manifest else None
    with tempfile.TemporaryDirectory(prefix=f"fixture-{commit}-") as workdir:
        if previous_db:
            shutil.copy(previous_db, Path(workdir) / "console.sqlite3")
        db_path, manifest = step(workdir, previous)
        applied = sqlite3.connect(db_path).execute(
            "SELECT name FROM django_migrations WHERE app = 'approvals' ORDER BY id"
        )
        migrations = [name for (name,) in applied]
        full_commit = subprocess.run(
            ["git", "-C", tree, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        manifest = {
            **(previous or {}),
            **manifest,
            "commit": full_commit,
            "built_by": f"tests/upgrade/build_fixture.py, step {commit}",
            "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "approvals_migrations": migrations,
            "previous": previous.get("commit") if previous else None,
        }
        out_db = Path(out_dir) / f"{commit}.sqlite3"
        out_db.unlink(missing_ok=True)
        # VACUUM INTO: one self-contained file (the WAL folded in), pages packed; no row changes.
        connection = sqlite3.connect(db_path)
        connection.execute("VACUUM INTO ?", (str(out_db),))
        connection.close()
        (Path(out_dir) / f"{commit}.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        print(f"wrote {out_db} ({out_db.stat().st_size} bytes) and its manifest", flush=True)


def build(commit, previous_commit, out_dir):
    tree = Path(tempfile.gettempdir()) / f"old-{commit}"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), commit], check=True)
    try:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        env.pop("DJANGO_SETTINGS_MODULE", None)
        args = [sys.executable, str(Path(__file__).resolve()), "--inside", commit, str(tree), str(out_dir)]
        if previous_commit:
            found = out_dir if (out_dir / f"{previous_commit}.json").exists() else FIXTURES
            args += [str(found / f"{previous_commit}.sqlite3"), str(found / f"{previous_commit}.json")]
        subprocess.run(args, cwd=tree, env=env, check=True)
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from", dest="first", help="rebuild from this step on (default: every step)")
    parser.add_argument("--out", type=Path, default=FIXTURES, help=f"where to write (default: {FIXTURES})")
    parser.add_argument("--inside", nargs="+", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.inside:
        commit, tree, out_dir, *previous = options.inside
        run_step_inside(commit, tree, *(previous or [None, None]), out_dir)
        return
    commits = [commit for commit, _ in STEPS]
    first = commits.index(options.first) if options.first else 0
    options.out.mkdir(parents=True, exist_ok=True)
    for index in range(first, len(commits)):
        build(commits[index], commits[index - 1] if index else None, options.out.resolve())


if __name__ == "__main__":
    main()
