"""Human-aware time (issue 35): a run's timeout counts the tool's and the model's own time, not the time a
request waits for a person; the old wall clock on request; ctx.timeout on the retry; the default deadline;
the own time a restarted console starts from.

No sleeps: a wall-clock run started beside a human-aware one times out first, which is the event that says
the human-aware run's timeout has passed in wall time too.
"""

import asyncio
import re
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.utils import timezone
from toolnexus import Answer, define_tool, pending

from approvals.models import AuditEvent, Request, RequestStatus, Run, RunStatus, TranscriptEntry
from approvals.review import decisions
from approvals.runs import runner
from approvals.runs.clock import RunClock, own_seconds_used
from tests.support.api_client import post_json

pytestmark = pytest.mark.django_db(transaction=True)
TIMEOUT = 1.0


@pytest.fixture(autouse=True)
def _stop_leftover_runs(stop_leftover_runs):
    """Every test here cancels what it left running (the fixture is in tests/conftest.py)."""


@pytest.fixture
def an_hour_to_decide(settings):
    """Requests of these kinds get an hour, so only the run's timeout could end their wait early."""
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "DEFAULT_EXPIRY_SECONDS": {"confirmation": 3600, "approval": 3600}}


def timing_tool(name="ask", kind="confirmation"):
    """Suspends on its first call; on the retry reports the answer. Records each call's ctx.timeout."""
    calls = []

    async def execute(hint: str = "", ctx=None):
        answer = getattr(ctx, "answer", None)
        calls.append({"hint": hint, "timeout": ctx.timeout, "answer": answer})
        if answer is not None:
            return f"{hint} -> {answer.data}"
        return pending(kind=kind, prompt=f"Decide on {hint or 'this'}")

    return define_tool(execute, name=name), calls


async def finished(run_id, timeout=15):
    await asyncio.wait_for(runner.wait_for_run(run_id), timeout)
    return await Run.objects.aget(pk=run_id)


async def test_a_tool_run_answered_after_its_timeout_passed_still_succeeds_unless_it_counts_waiting(
    extra_tools, console_events, an_hour_to_decide
):
    tool, calls = timing_tool()
    extra_tools(tool)
    human = await runner.start_run(tool="ask", args={"hint": "h"}, timeout=TIMEOUT)
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=human.pk)
    wall = await runner.start_run(tool="ask", args={"hint": "w"}, timeout=TIMEOUT, timeout_counts_waiting=True)
    walled = await finished(wall.pk)  # started after the human-aware run: its timeout has passed too
    assert (walled.status, walled.timeout_counts_waiting) == (RunStatus.TIMED_OUT, True)
    # The §10 prefix, then what happened (issue 35's wording of an expiry).
    assert re.fullmatch(
        r"declined/expired: Decide on w \(expired at \d\d:\d\d UTC, nobody answered\)", walled.result_output
    )

    assert (await Run.objects.aget(pk=human.pk)).status == RunStatus.WAITING
    await decisions.aresolve_request(opened["request_id"], ok=True, data={"pick": "red"})
    done = await finished(human.pk)
    assert (done.status, done.result_output) == (RunStatus.SUCCEEDED, "h -> {'pick': 'red'}")
    assert done.timeout_counts_waiting is False

    # ctx.timeout on the retry is the tool's remaining own time: the wait (over a second) took nothing from it.
    first, retry = [c for c in calls if c["hint"] == "h"]
    assert retry["answer"] is not None and retry["answer"].id == opened["request_id"]
    assert 0 < retry["timeout"] <= first["timeout"] <= TIMEOUT
    assert first["timeout"] - retry["timeout"] < TIMEOUT / 2


async def test_an_agent_run_answered_after_its_timeout_passed_still_succeeds_unless_it_counts_waiting(
    extra_tools, console_events, an_hour_to_decide
):
    tool, calls = timing_tool(kind="approval")
    extra_tools(tool)
    human = await runner.start_agent_run(agent={"prompt": 'call ask with {"hint": "h"}'}, timeout=TIMEOUT)
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=human.pk)
    wall = await runner.start_agent_run(
        agent={"prompt": 'call ask with {"hint": "w"}'}, timeout=TIMEOUT, timeout_counts_waiting=True
    )
    walled = await finished(wall.pk)
    assert walled.status == RunStatus.TIMED_OUT
    assert walled.result_output == f"timed out after {TIMEOUT:g}s while waiting for a reviewer to answer ask"

    assert (await Run.objects.aget(pk=human.pk)).status == RunStatus.WAITING
    await decisions.aresolve_request(opened["request_id"], ok=True)
    done = await finished(human.pk)
    assert done.status == RunStatus.SUCCEEDED
    assert done.result_output.startswith("Done. 1 tool call:\n- ask: h -> ")
    retry = [c for c in calls if c["answer"] is not None and c["answer"].id == opened["request_id"]]
    assert len(retry) == 1 and 0 < retry[0]["timeout"] <= TIMEOUT
    stopped = TranscriptEntry.objects.filter(run_id=human.pk, kind=TranscriptEntry.Kind.STOPPED)
    assert not await stopped.aexists()


async def test_a_question_asked_from_inside_a_running_tool_does_not_count_against_its_timeout(
    extra_tools, console_events, an_hour_to_decide
):
    """A tool that asks through console_wait_for while it runs (as an MCP server's elicitation does)."""
    from toolnexus import Request as WireRequest

    from approvals.runs.waiting import console_wait_for

    async def go_on(label: str = "", ctx=None):
        answer = await console_wait_for(
            WireRequest(id=f"inside-{label}", kind="confirmation", prompt=f"Go on, {label}?")
        )
        return f"{label}: {'yes' if answer.ok else answer.reason}"

    extra_tools(define_tool(go_on, name="go_on"))
    human = await runner.start_run(tool="go_on", args={"label": "h"}, timeout=TIMEOUT)
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=human.pk)
    wall = await runner.start_run(tool="go_on", args={"label": "w"}, timeout=TIMEOUT, timeout_counts_waiting=True)
    walled = await finished(wall.pk)
    assert walled.status == RunStatus.TIMED_OUT

    assert (await Run.objects.aget(pk=human.pk)).status == RunStatus.WAITING
    await decisions.aresolve_request(opened["request_id"], ok=True)
    done = await finished(human.pk)
    assert (done.status, done.result_output) == (RunStatus.SUCCEEDED, "h: yes")


async def test_a_request_with_no_deadline_gets_the_kinds_default_or_else_the_runs_timeout(
    extra_tools, console_events, settings
):
    tool, _calls = timing_tool()
    extra_tools(tool)

    async def deadline_of(**run):
        started = await runner.start_run(tool="ask", args={}, **run)
        opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=started.pk)
        request = await Request.objects.aget(pk=opened["request_id"])
        await runner.cancel_run(started.pk)
        return None if request.expires_at is None else (request.expires_at - request.created_at).total_seconds()

    assert await deadline_of(timeout=90) == pytest.approx(90, abs=5)  # no default for the kind: the run's timeout
    assert await deadline_of() is None  # no timeout either: as before, it waits until answered
    assert await deadline_of(timeout=90, timeout_counts_waiting=True) is None  # the run's deadline ends the wait
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "DEFAULT_EXPIRY_SECONDS": {"confirmation": 600}}
    assert await deadline_of(timeout=90) == pytest.approx(600, abs=5)


async def test_the_api_takes_the_wall_clock_flag_and_shows_it(api, extra_tools, an_hour_to_decide):
    tool, _calls = timing_tool()
    extra_tools(tool)
    made = await post_json(api, "/api/v1/runs", {"tool": "ask", "timeout": 5, "timeout_counts_waiting": True})
    assert made.status_code == 201, made.content
    assert made.json()["timeout_counts_waiting"] is True
    assert (await Run.objects.aget(pk=made.json()["id"])).timeout_counts_waiting is True
    plain = await post_json(api, "/api/v1/runs", {"tool": "ask", "timeout": 5})
    assert plain.json()["timeout_counts_waiting"] is False
    bad = await post_json(api, "/api/v1/runs", {"tool": "ask", "timeout_counts_waiting": "yes"})
    assert bad.status_code == 400
    assert "'timeout_counts_waiting' must be true or false" in bad.json()["message"]
    # The run page says which clock the timeout runs on, beside it.
    page = (await api.get(f"/runs/{made.json()['id']}/")).content.decode()
    assert 'data-counts-waiting="true"' in page and "wall clock: waiting for a person counts" in page
    page = (await api.get(f"/runs/{plain.json()['id']}/")).content.decode()
    assert 'data-counts-waiting="false"' in page and "own time: waiting for a person does not count" in page
    for run_id in (made.json()["id"], plain.json()["id"]):
        await runner.cancel_run(run_id)


class SilentModel(BaseHTTPRequestHandler):
    """An OpenAI-style model that thinks until the test lets it go."""

    release = threading.Event()

    def do_POST(self):  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.release.wait(30)
        self.send_response(503)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def silent_model(settings, monkeypatch):
    SilentModel.release.clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), SilentModel)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    models = {"silent": {"style": "openai", "base_url": url, "model": "s-1", "api_key_env": "SILENT_MODEL_KEY"}}
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "MODELS": models}
    monkeypatch.setenv("SILENT_MODEL_KEY", "sk-silent")
    yield "silent"
    SilentModel.release.set()
    server.shutdown()
    server.server_close()


async def test_the_models_own_time_still_times_an_agent_run_out_without_the_clients_timeout_ms(silent_model):
    """The client gets no timeout_ms any more: the run's clock trips the token, the client's cancel."""
    run = await runner.start_agent_run(agent={"prompt": "think", "model": silent_model}, timeout=0.5)
    done = await finished(run.pk)
    assert done.status == RunStatus.TIMED_OUT
    assert done.result_output == "timed out after 0.5s while the model was thinking (turn 1)"


# -- the clock itself ------------------------------------------------------------------------------


def test_overlapping_waits_count_once_and_an_open_wait_counts_until_now():
    at = datetime(2026, 12, 5, 14, 0, tzinfo=UTC)
    minutes = lambda m: at + timedelta(minutes=m)  # noqa: E731
    waits = [(minutes(1), minutes(5)), (minutes(3), minutes(7)), (minutes(10), None)]
    # 12 minutes of wall time; waits 1-7 and 10-12 (still open): 8 minutes of waiting, 4 of its own.
    assert own_seconds_used(at, minutes(12), waits) == 4 * 60
    assert own_seconds_used(at, minutes(12), []) == 12 * 60


async def test_the_clock_stops_while_any_wait_goes_on():
    clock = RunClock(60.0)
    clock.start_waiting()
    clock.start_waiting()
    frozen = clock.remaining()
    clock.stop_waiting()
    assert clock.paused and clock.remaining() == frozen
    clock.stop_waiting()
    assert not clock.paused and clock.wait_deadline() is None
    assert RunClock(60.0, counts_waiting=True).wait_deadline() is not None


# -- a restart -----------------------------------------------------------------------------------------


async def test_a_run_resumed_after_a_restart_starts_from_its_own_time_not_its_wall_time(
    monkeypatch, extra_tools, console_events, an_hour_to_decide
):
    """Before: the adopting process took the time since the run was created as used, waits and all."""
    from approvals.runs import waiting
    from approvals.runs.supervisor import supervisors_by_loop

    tool, calls = timing_tool()
    extra_tools(tool)
    run = await runner.start_run(tool="ask", args={"hint": "r"}, timeout=60)
    opened = await console_events.next(AuditEvent.Action.REQUEST_OPENED, run_id=run.pk)

    async def withdraw_nothing(request_id, reason):  # its tasks vanish and withdraw nothing
        return Answer(id=request_id, ok=False, reason=reason)

    sup = runner.supervisor()  # the old console process goes away, its rows as they are
    with monkeypatch.context() as patch:
        patch.setattr(waiting, "_withdraw", withdraw_nothing)
        tasks = [sup.tasks[run.pk], *sup.background_tasks()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    supervisors_by_loop.pop(asyncio.get_running_loop())
    # An hour ago the run started; 2 s later its tool asked, and the request has waited since.
    now = timezone.now()
    await Run.objects.filter(pk=run.pk).aupdate(owner="a-console-that-stopped", created_at=now - timedelta(hours=1))
    await Request.objects.filter(pk=opened["request_id"]).aupdate(created_at=now - timedelta(hours=1, seconds=-2))

    await runner.ensure_started()  # the next process adopts the run
    await decisions.aresolve_request(opened["request_id"], ok=True, data={"pick": "blue"})
    done = await finished(run.pk)
    assert (done.status, done.result_output) == (RunStatus.SUCCEEDED, "r -> {'pick': 'blue'}")
    assert 55 < calls[-1]["timeout"] <= 58  # 60 s less the 2 s it ran before asking
    request = await Request.objects.aget(pk=opened["request_id"])
    assert request.status == RequestStatus.ANSWERED
