"""The points at which a console can die during a run, and what must follow (docs/operations.md,
"When a console dies"): one run brought to each point on the console about to die, then checked on
the one that carries on, a restart on SQLite (tests/runs/test_restart.py) or a takeover on
PostgreSQL (tests/cluster/test_kill_points.py).

The runs use the cluster tools (tests/cluster/cluster_tools.py, served with
``TOOLNEXUS_TOOL_MODULES=tests.cluster.cluster_tools``), which append every execution with its pid
and answer to ``CLUSTER_EXECUTIONS_LOG``: "ran once more, in the new process, with the answer" is counted.
"""

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.live_console import POLL_DEADLINE_SECONDS, open_requests_of, poll, start

# Each point, and what the console that carries on does with the run.
OUTCOMES = {
    "before_request": "interrupted",  # the tool's first call was executing
    "after_request": "adopted",  # waiting on its open suspension: resumed when answered
    "after_answer": "resumed",  # answered, nobody resumed it yet: resumed with the stored answer
    "during_retry": "interrupted",  # the retry with ctx.answer was executing: never run twice
    "model_call": "interrupted",  # an agent's model was thinking
}
ACTIVE = ("queued", "running", "waiting")
TOOL_FOR = {"before_request": "cluster_hold", "after_request": "cluster_approve", "after_answer": "cluster_approve"}


def finished(run):
    return run["status"] not in ACTIVE


@dataclass
class KillPoints:
    """One run per point, on one console; ``answer_left_for`` is the run the test answers as the console dies."""

    label: str
    executions_log: Path
    runs: dict = field(default_factory=dict)  # point -> run id
    requests: dict = field(default_factory=dict)  # point -> its request's id

    def name(self, point):
        return f"{self.label}-{point}"

    def executions(self, point):
        """(pid, answered?) of each execution of the point's tool, in order."""
        lines = self.executions_log.read_text().splitlines()
        records = [r for r in map(json.loads, lines) if r["label"] == self.name(point)]
        return [(r["pid"], r["answer"] is not None) for r in records]

    def set_up(self, console):
        """Start the runs on ``console`` and bring each to its point; "after_answer" is left waiting on its
        request (``requests["after_answer"]``), for the test to answer once the console can no longer act."""
        for point, tool in TOOL_FOR.items():
            self.runs[point] = start(console, {"tool": tool, "args": {"label": self.name(point)}})
        retry = {"label": self.name("during_retry"), "hold_on_retry": True}
        self.runs["during_retry"] = start(console, {"tool": "cluster_approve", "args": retry})
        self.runs["model_call"] = start(console, {"agent": {"prompt": "think 30"}})
        for point in ("after_request", "after_answer", "during_retry"):
            poll(console, f"/api/v1/runs/{self.runs[point]}", lambda r: r["status"] == "waiting", what=point)
            [request] = open_requests_of(console, self.runs[point])
            self.requests[point] = request["id"]
        status, body = console.call("POST", f"/api/v1/requests/{self.requests['during_retry']}/answer", {"ok": True})
        assert status == 200, body
        # What only the tools' log shows: a poll with a deadline.
        self.eventually(lambda: len(self.executions("during_retry")) == 2, "the retry executing")
        self.eventually(lambda: self.executions("before_request"), "the holding tool executing")
        poll(
            console,
            f"/api/v1/runs/{self.runs['model_call']}/transcript",
            lambda t: any(e["kind"] == "thinking" for e in t["entries"]),
            what="the model thinking",
        )
        return self

    def check(self, survivor, died, carried_on):
        """What ``survivor`` shows once it took over: each run's documented outcome. ``died`` and ``carried_on``
        are the pids of the console that died and of the one that carries on."""
        for point in ("before_request", "during_retry", "model_call"):
            run = poll(survivor, f"/api/v1/runs/{self.runs[point]}", lambda r: r["status"] != "running", what=point)
            assert run["status"] == "interrupted", (point, run)
        assert self.executions("during_retry") == [(died, False), (died, True)]  # the retry never ran again

        resumed = poll(survivor, f"/api/v1/runs/{self.runs['after_answer']}", finished, what="the resume")
        assert resumed["status"] == "succeeded", resumed
        assert resumed["result"]["output"] == f"{self.name('after_answer')} approved in pid {carried_on}"
        assert self.executions("after_answer") == [(died, False), (carried_on, True)]

        adopted = survivor.call("GET", f"/api/v1/runs/{self.runs['after_request']}")[1]
        assert (adopted["status"], adopted["request"]["status"]) == ("waiting", "open"), adopted
        status, body = survivor.call("POST", f"/api/v1/requests/{self.requests['after_request']}/answer", {"ok": True})
        assert status == 200, body
        done = poll(survivor, f"/api/v1/runs/{self.runs['after_request']}", finished, what="answer")
        assert done["status"] == "succeeded", done
        assert self.executions("after_request") == [(died, False), (carried_on, True)]

    @staticmethod
    def eventually(check, what):
        deadline = time.monotonic() + POLL_DEADLINE_SECONDS
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} did not happen within {POLL_DEADLINE_SECONDS:g}s")
            time.sleep(0.05)
