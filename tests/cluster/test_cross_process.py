"""Two console processes, one PostgreSQL, one Redis: work started on one is seen, answered,
cancelled and taken over from the other (issue 7).

Process A starts the runs (POST /api/v1/runs on A); a reviewer works on B, through B's
dashboard socket or B's API. The cluster tools (tests/cluster/cluster_tools.py) record every
execution with its pid, so "resumed on A, exactly once" is counted, not guessed.

The safety poll is set far beyond every wait here, so a run that wakes up on one process
for an answer given on the other heard of it through Redis.
"""

import hashlib
import re
import secrets
import time

import pytest

from tests.cluster.harness import CLUSTER_ENV, REVIEWER, REVIEWER_PASSWORD, eventually
from tests.support.live_console import ClientAt

HEARTBEAT_TIMEOUT = float(CLUSTER_ENV["CONSOLE_HEARTBEAT_TIMEOUT_SECONDS"])
# A dead process's runs are taken over within its heartbeat timeout and a couple of beats;
# the slack is for a loaded CI machine.
TAKEOVER_BOUND_SECONDS = HEARTBEAT_TIMEOUT + 3.0


@pytest.fixture(scope="module")
def cluster_options():
    return {"env": {"CONSOLE_SAFETY_POLL_SECONDS": "60", "CONSOLE_TOKEN_RECHECK_SECONDS": str(TOKEN_RECHECK_SECONDS)}}


# Each process trusts a token it verified this long (docs/team.md, "API tokens"); the slack is for a loaded machine.
TOKEN_RECHECK_SECONDS = 1.0


def approval_run(member, label):
    return member.start_run({"tool": "cluster_approve", "args": {"label": label}})


async def approval_waiting(member, dashboard, label):
    """Start an approval run on ``member``; once ``dashboard`` shows its request, (run id, request id)."""
    run_id = approval_run(member, label)
    return run_id, (await dashboard.event("request.opened", run_id=run_id))["request_id"]


def executed(records):
    """(pid, answered?) of each execution, in order."""
    return [(r["pid"], r["answer"] is not None) for r in records]


def assert_asked_on_then_resumed_once_on(cluster, label, finished, first, then):
    """The run asked in ``first``'s process and went on, exactly once, in ``then``'s."""
    assert finished["run"]["result"] == {"output": f"{label} approved in pid {then.pid}", "is_error": False}
    assert executed(cluster.executions(label)) == [(first.pid, False), (then.pid, True)]


async def test_a_request_opened_by_a_run_on_a_shows_on_a_dashboard_connected_to_b(cluster, label):
    a, b = cluster.members
    async with b.dashboard() as dashboard:
        run_id = approval_run(a, label)
        opened = await dashboard.event("request.opened", run_id=run_id)
        assert opened["request"]["prompt"] == f"Go ahead with {label}?"
        assert (opened["request"]["tool"], opened["request"]["status"]) == ("cluster_approve", "open")
        assert opened["run"]["status"] == "waiting"
        assert dashboard.out_of_order == []
    async with b.dashboard() as later:  # and a dashboard that connects afterwards has it in its snapshot
        assert opened["request_id"] in [r["id"] for r in later.snapshot["requests"]]
    assert cluster.owner_of(run_id) == a.process_id
    assert a.call("POST", f"/api/v1/runs/{run_id}/cancel", token=a.host_token)[0] == 202  # its starter's token


@pytest.mark.parametrize("answered_through", ["socket", "api"])
async def test_an_answer_given_on_b_resumes_the_run_on_a_exactly_once(cluster, label, answered_through):
    a, b = cluster.members
    async with b.dashboard() as dashboard:
        run_id, request_id = await approval_waiting(a, dashboard, label)
        if answered_through == "socket":
            reply = await dashboard.answer(request_id, ok=True)
            assert reply["type"] == "answered", reply
        else:
            status, body = b.answer(request_id, ok=True)
            assert status == 200, body
        finished = await dashboard.event("run.finished", run_id=run_id)
    assert finished["run"]["status"] == "succeeded"
    assert_asked_on_then_resumed_once_on(cluster, label, finished, a, a)
    assert cluster.sql(f"SELECT resumed_by FROM approvals_request WHERE id = '{request_id}'") == [a.process_id]


@pytest.mark.parametrize("tool", ["cluster_hold", "cluster_hold_sync"])
async def test_cancel_run_on_b_trips_the_token_of_the_tool_executing_on_a(cluster, label, tool):
    a, b = cluster.members
    run_id = a.start_run({"tool": tool, "args": {"label": label}})
    assert cluster.wait_for_execution(label, "started")["pid"] == a.pid
    async with b.dashboard() as dashboard:
        reply = await dashboard.cancel_run(run_id)
        assert reply == {"type": "cancel_requested", "ref": reply["ref"], "run": run_id}
        finished = await dashboard.event("run.finished", run_id=run_id)
    assert finished["run"]["status"] == "cancelled"
    assert finished["run"]["result"] == {"output": f"{label} stopped (cancelled) in pid {a.pid}", "is_error": True}
    stopped = cluster.executions(label)[-1]
    assert (stopped["event"], stopped["reason"], stopped["pid"]) == ("stopped", "cancelled", a.pid)


async def test_when_a_is_killed_b_interrupts_its_executing_run_and_adopts_its_waiting_run(cluster, label):
    a, b = cluster.members
    busy = a.start_run({"tool": "cluster_hold", "args": {"label": f"{label}-busy"}})
    cluster.wait_for_execution(f"{label}-busy", "started")
    async with b.dashboard() as dashboard:
        waiting, request_id = await approval_waiting(a, dashboard, label)

        a.kill()
        killed_at = time.monotonic()
        interrupted = await dashboard.event("run.interrupted", run_id=busy)
        adopted = await dashboard.event("run.adopted", run_id=waiting)
        assert time.monotonic() - killed_at < TAKEOVER_BOUND_SECONDS
        assert interrupted["payload"] == {"previous_owner": a.process_id, "previous_status": "running"}
        assert adopted["payload"] == {"previous_owner": a.process_id, "requests": [request_id]}

        # Seen from B's API: the executing run is over, the waiting one still waits on its open request.
        assert b.run(busy)["status"] == "interrupted"
        still_waiting = b.run(waiting)
        assert (still_waiting["status"], still_waiting["request"]["status"]) == ("waiting", "open")
        assert cluster.owner_of(waiting) == b.process_id

        status, _ = b.answer(request_id, ok=True)
        assert status == 200
        finished = await dashboard.event("run.finished", run_id=waiting)
    assert_asked_on_then_resumed_once_on(cluster, label, finished, a, b)
    assert [r["event"] for r in cluster.executions(f"{label}-busy")] == ["started"]  # it never heard a thing


@pytest.mark.parametrize("answered", ["as_a_thaws", "after_a_lets_go"])
async def test_when_a_is_frozen_past_the_heartbeat_timeout_b_takes_over_and_one_answer_resumes_once(
    cluster, label, answered
):
    a, b = cluster.members
    async with b.dashboard() as dashboard:
        run_id, request_id = await approval_waiting(a, dashboard, label)

        a.freeze()
        frozen_at = time.monotonic()
        # A busy A may have beaten last a while before it froze: its silence counts from that beat.
        silent_already = float(
            cluster.sql(
                f"SELECT extract(epoch FROM now() - last_beat) FROM approvals_consoleprocess WHERE id = '{a.process_id}'"
            )[0]
        )
        adopted = await dashboard.event("run.adopted", run_id=run_id)
        # Its pid is still there, so only the silence gives it away: not before the timeout.
        silence = silent_already + time.monotonic() - frozen_at
        assert HEARTBEAT_TIMEOUT - 0.5 < silence < TAKEOVER_BOUND_SECONDS + silent_already, silence
        assert adopted["payload"]["previous_owner"] == a.process_id
        assert cluster.owner_of(run_id) == b.process_id

        a.thaw()
        if answered == "as_a_thaws":
            # A's wait wakes for this answer too, perhaps before its heartbeat hears it lost the run:
            # the resume claim lets one process go on.
            status, _ = b.answer(request_id, ok=True)
        else:
            a.logged(f"run {run_id} was taken over by another console process")
            status, _ = a.answer(request_id, ok=True)  # A is serving again; the run is B's
        assert status == 200
        finished = await dashboard.event("run.finished", run_id=run_id)
    assert_asked_on_then_resumed_once_on(cluster, label, finished, a, b)
    # A let the run go (its heartbeat saw the new owner, or its resume claim lost), and beats again.
    let_go = (
        f"run {run_id} was taken over by another console process",
        f"run {run_id} goes on in another console process",
    )
    a.logged(*let_go)
    eventually(
        lambda: cluster.sql(f"SELECT 1 FROM approvals_consoleprocess WHERE id = '{a.process_id}'"), "A beating again"
    )


def test_a_token_revoked_on_one_process_is_refused_by_the_other_within_the_bound(cluster):
    a, b = cluster.members
    secret = "tnx_" + secrets.token_urlsafe(32)  # a token of the reviewer's own, so the others stay usable
    digest = hashlib.sha256(secret.encode()).hexdigest()
    cluster.sql(
        "INSERT INTO approvals_apitoken (user_id, name, prefix, digest, created_at) "
        f"SELECT id, 'revoked-in-a', '{secret[:12]}', '{digest}', now() FROM auth_user WHERE username = '{REVIEWER}'"
    )
    token_id = int(cluster.sql(f"SELECT id FROM approvals_apitoken WHERE digest = '{digest}'")[0])
    for member in (a, b):  # both processes verify it, and keep it
        assert member.call("GET", "/api/v1/requests", token=secret)[0] == 200

    page = ClientAt(a, "127.0.0.1")
    page.log_in(REVIEWER, REVIEWER_PASSWORD)
    _, _, listing = page.request("GET", "/tokens/")
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', listing).group(1)
    status, _, _ = page.request("POST", f"/tokens/{token_id}/revoke", form={"csrfmiddlewaretoken": csrf})
    revoked = time.monotonic()
    assert status == 302
    assert a.call("GET", "/api/v1/requests", token=secret)[0] == 401  # the revoking process: at once

    def refused_by_b():
        return b.call("GET", "/api/v1/requests", token=secret)[0] == 401

    eventually(refused_by_b, "b refusing the token revoked on a", deadline=TOKEN_RECHECK_SECONDS + 2.0)
    assert time.monotonic() - revoked < TOKEN_RECHECK_SECONDS + 2.0
    assert b.call("GET", "/api/v1/requests", token=secret)[0] == 401
