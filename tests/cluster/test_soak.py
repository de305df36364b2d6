"""A short soak (issue 27): hosts, runs, two reviewers and a dashboard on each of two consoles while one
console is killed (SIGKILL) and started again every 30 s; nothing accepted is lost or done twice.

The driver is tests/cluster/soak.py; ``make bench`` runs the longer one (bench/soak.py) and
docs/operations.md ("Soak") has its figures.
"""

import json

import pytest

from tests.cluster.harness import ARTIFACTS
from tests.cluster.soak import Soak, SoakPlan, summary

PLAN = SoakPlan(
    duration=62.0,
    kill_every=30.0,  # a at 30 s, b at 60 s
    requests_per_second=2.0,
    runs_per_second=1.0,
    settle_seconds=20.0,
    converge_seconds=12.0,
)


@pytest.fixture(scope="module")
def cluster_options():
    # A killed console is seen by its pid at the other's next beat; the timeout is for one that is only slow,
    # which a loaded 2-core machine must not be taken for.
    return {"env": {"CONSOLE_HEARTBEAT_SECONDS": "0.5", "CONSOLE_HEARTBEAT_TIMEOUT_SECONDS": "5"}}


async def test_two_consoles_killed_in_turn_lose_and_repeat_nothing(cluster, redis_url, label):
    result = await Soak(cluster, PLAN, label, redis_url).run()
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "soak.json").write_text(json.dumps(result, indent=2))
    print(summary(result))

    figures = result["figures"]
    assert figures["kills"] == 2, figures["kill_log"]
    assert figures["answers_resumed"] > 40, figures  # the work did happen
    assert result["checks"] == dict.fromkeys(result["checks"], 0), (summary(result), result["details"])
