"""Two consoles on one PostgreSQL append audit events at once: each event is one INSERT with its own MAC, no
table lock, and the sealers of both processes chain them after their commits into ONE order (issue 34).

Runs are started on both members and each is answered on the other, many at a time. Afterwards every event
is chained, the positions are 1..N with no gap and no repeat, each run's events stand in the order they
happened, and ``manage.py verify_audit`` passes, with the head it prints still there after more runs.
"""

from concurrent.futures import ThreadPoolExecutor

from tests.cluster.harness import eventually
from tests.support.live_console import manage

RUNS = 24
AT_ONCE = 8
IN_ORDER = ["run.started", "request.opened", "request.answered", "run.finished"]


def approve_on_the_other(starter, answerer, label):
    """Start a run on ``starter``, answer its request on ``answerer``; the run id once it has finished."""
    run_id = starter.start_run({"tool": "cluster_approve", "args": {"label": label}})
    request = answerer.wait_for_request(run_id)
    status, body = answerer.answer(request["id"], ok=True)
    assert status == 200, body
    starter.wait_for_run(run_id, lambda run: run["status"] == "succeeded")
    return run_id


def many_runs_answered_on_both(cluster, label, count):
    a, b = cluster.members
    with ThreadPoolExecutor(AT_ONCE) as pool:
        jobs = [pool.submit(approve_on_the_other, *((a, b) if n % 2 else (b, a)), f"{label}-{n}") for n in range(count)]
        return [job.result() for job in jobs]


def all_chained(cluster):
    return cluster.sql("SELECT count(*) FROM approvals_auditevent WHERE position IS NULL") == ["0"]


def verify_audit(cluster, *args):
    return manage(cluster.members[0].env, "verify_audit", *args).splitlines()


def test_two_consoles_appending_at_once_keep_one_verifiable_order(cluster, label):
    run_ids = many_runs_answered_on_both(cluster, label, RUNS)

    eventually(lambda: all_chained(cluster), "every audit event chained by the sealers")
    [summary] = cluster.sql(
        "SELECT count(*), count(DISTINCT position), min(position), max(position) FROM approvals_auditevent"
    )
    count, distinct, first, last = map(int, summary.split("|"))
    assert (distinct, first, last) == (count, 1, count), summary  # one total order: 1..N, no gap, no repeat
    for run_id in run_ids:
        actions = cluster.sql(f"SELECT action FROM approvals_auditevent WHERE run_id = {int(run_id)} ORDER BY position")
        assert [a for a in actions if a in IN_ORDER] == IN_ORDER, (run_id, actions)

    report = verify_audit(cluster)
    assert report[0] == f"{count} events verified.", report
    head = report[-1].removeprefix("Head: ")
    assert head.startswith(f"#{count}:"), report

    many_runs_answered_on_both(cluster, f"{label}-more", 4)  # the chain goes on from the head kept outside
    eventually(lambda: all_chained(cluster), "the later events chained")
    assert verify_audit(cluster, "--head", head)[0].endswith("events verified."), head
