"""Agent runs: toolnexus' client loop driven by the scripted model over the console's tools.

Suspensions approved and declined, the run's token inside every tool call and as the
loop's cancel, the builtin ``question``, several suspensions in one turn answered out
of order, many runs at once, the API, the model settings (a real OpenAI-style HTTP
model on loopback), and the scripted model's own language.
"""

import asyncio
import json
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from asgiref.sync import sync_to_async
from django.templatetags.static import static
from django.test import AsyncClient
from toolnexus import ToolResult, define_tool, pending

from approvals.models import AuditEvent, Request, RequestStatus, Run, RunKind, RunStatus, TranscriptEntry
from approvals.review import decisions
from approvals.runs import agent_models, runner
from approvals.runs.agent_runner import (
    ResumeError,
    check_answer_matches,
    halted_turn,
    tool_result_messages,
)
from approvals.runs.cancel import CancelToken
from approvals.runs.runner import start_agent_run
from approvals.runs.scripted_model import ScriptError, parse_script, scripted_generate
from approvals.runs.services import RunInputError
from approvals.team.policies import Viewer
from tests.support.pages import json_script

pytestmark = pytest.mark.django_db(transaction=True)
Kind = TranscriptEntry.Kind


@pytest.fixture(autouse=True)
def _stop_leftover_runs(stop_leftover_runs):
    """Every test here cancels what it left running (the fixture is in tests/conftest.py)."""


class Frames:
    """Collects every event frame as it is published, so none is missed while a test is busy."""

    def __init__(self, console_events):
        self.events = console_events
        self.frames = []
        self.arrived = asyncio.Condition()
        self.task = asyncio.ensure_future(self._collect())

    async def _collect(self):
        while True:
            message = await self.events.layer.receive(self.events.channel)
            async with self.arrived:
                self.frames.append(message.get("frame") or {})
                self.arrived.notify_all()

    async def wait_for(self, count, action=AuditEvent.Action.REQUEST_OPENED, timeout=10, kind=None, **match):
        """The first ``count`` frames of ``action`` matching ``match`` (and a transcript entry's ``kind``)."""

        def matching():
            return [
                f
                for f in self.frames
                if f.get("action") == action
                and all(f.get(k) == v for k, v in match.items())
                and (kind is None or (f.get("payload") or {}).get("kind") == kind)
            ]

        async def enough():
            async with self.arrived:
                await self.arrived.wait_for(lambda: len(matching()) >= count)
            return matching()[:count]

        return await asyncio.wait_for(enough(), timeout)

    async def waiting(self, run, count=1):
        """Until the run's loop has blocked on a reviewer ``count`` times."""
        return await self.wait_for(count, AuditEvent.Action.RUN_TRANSCRIPT, run_id=run.pk, kind="waiting")

    def stop(self):
        self.task.cancel()


@pytest.fixture
async def opened(console_events):
    collector = Frames(console_events)
    yield collector
    collector.stop()


async def finished(run, timeout=15):
    await asyncio.wait_for(runner.wait_for_run(run.pk), timeout)
    return await Run.objects.aget(pk=run.pk)


async def entries(run):
    return [e async for e in TranscriptEntry.objects.filter(run_id=run.pk).order_by("seq")]


def recording_tool(name="ask", *, kind="approval"):
    """Suspends on its first call; on the retry reports the answer. Records every call's args and ctx."""
    calls = []

    async def execute(hint: str = "", ctx=None):
        calls.append({"hint": hint, "ctx": ctx})
        if ctx is not None and ctx.answer is not None:
            return f"{hint}: {json.dumps(ctx.answer.data, sort_keys=True)}"
        return pending(kind=kind, prompt=f"Decide on {hint or 'this'}", data={"hint": hint})

    return define_tool(execute, name=name), calls


# -- suspensions: approve and decline ---------------------------------------------------------------


async def test_scripted_model_drives_tool_calls_that_suspend_approve_and_decline(extra_tools, opened, make_user):
    tool, calls = recording_tool()
    extra_tools(tool)
    erin = await sync_to_async(make_user)("erin", password=None)
    rita = await sync_to_async(make_user)("rita", password=None)  # a reviewer other than the one who started it
    run = await start_agent_run(
        agent={"prompt": 'call ask with {"hint": "colour"} then call deploy with {"service": "api"}'}, user=erin
    )
    assert (run.kind, run.agent_model, run.tool) == (RunKind.AGENT, "scripted", "")

    [first] = await opened.wait_for(1, run_id=run.pk)
    assert first["request"]["prompt"] == "Decide on colour"
    [blocked] = await opened.waiting(run)
    assert blocked["run"]["status"] == RunStatus.WAITING
    await decisions.aresolve_request(first["request_id"], ok=True, data={"comment": "fine"}, user=rita)

    [_, second] = await opened.wait_for(2, run_id=run.pk)
    assert second["request"]["prompt"] == "Which environment should api be deployed to?"
    await opened.waiting(run, 2)
    await decisions.aresolve_request(second["request_id"], ok=False, reason="declined", user=rita)
    done = await finished(run)

    assert done.status == RunStatus.SUCCEEDED
    assert done.result_output == (
        "Done. 2 tool calls:\n"
        '- ask: colour: {"comment": "fine"}\n'
        "- deploy: declined/expired: Which environment should api be deployed to? (declined by rita) Do not make the same call again; ask the user how to go on."
    )
    # The run's token and remaining time reached the tool on the first call and on the §10 retry.
    assert len(calls) == 2
    assert all(isinstance(c["ctx"].signal, CancelToken) for c in calls)
    assert calls[0]["ctx"].signal is calls[1]["ctx"].signal
    assert calls[0]["ctx"].answer is None and calls[1]["ctx"].answer.id == first["request_id"]

    kinds = [(e.kind, e.tool or None) for e in await entries(run)]
    assert kinds == [
        (Kind.PROMPT, None),
        (Kind.THINKING, None),
        (Kind.ASSISTANT, None),
        (Kind.PENDING, "ask"),
        (Kind.WAITING, "ask"),
        (Kind.ANSWER, "ask"),
        (Kind.TOOL_RESULT, "ask"),
        (Kind.THINKING, None),
        (Kind.ASSISTANT, None),
        (Kind.PENDING, "deploy"),
        (Kind.WAITING, "deploy"),
        (Kind.ANSWER, "deploy"),
        (Kind.TOOL_RESULT, "deploy"),
        (Kind.THINKING, None),
        (Kind.ASSISTANT, None),
        (Kind.FINISHED, None),
    ]
    declined = [e for e in await entries(run) if e.kind == Kind.TOOL_RESULT][-1]
    assert (declined.is_error, declined.call_id) == (True, "call_2_1")
    # Suspensions the tool returned survive a restart; the requests say so.
    assert await Request.objects.filter(run_id=run.pk, resumable=True).acount() == 2


async def test_each_transcript_entry_is_announced_with_the_run(extra_tools, console_events):
    run = await start_agent_run(agent={"prompt": 'call crunch with {"steps": 1, "pause": 0}'})
    frame = await console_events.next(AuditEvent.Action.RUN_TRANSCRIPT, run_id=run.pk)
    assert frame["payload"]["kind"] == "prompt"
    assert frame["payload"]["seq"] == 1
    assert frame["run"]["kind"] == "agent" and frame["run"]["label"] == "agent (scripted)"
    thinking = await console_events.next(AuditEvent.Action.RUN_TRANSCRIPT, run_id=run.pk)
    assert thinking["payload"]["kind"] == "thinking" and thinking["payload"]["turn"] == 1
    done = await finished(run)
    assert done.result_output == "Done. 1 tool call:\n- crunch: crunched 1 of 1 steps"


async def test_a_tool_the_model_made_up_is_an_error_result_in_the_transcript(settings, monkeypatch, fake_openai):
    FakeOpenAI.tool_name = "no_such_tool"
    settings.TOOLNEXUS = {
        **settings.TOOLNEXUS,
        "MODELS": {
            "local": {"style": "openai", "base_url": fake_openai, "model": "fake-1", "api_key_env": "FAKE_MODEL_KEY"},
        },
    }
    monkeypatch.setenv("FAKE_MODEL_KEY", SECRET)
    run = await start_agent_run(agent={"prompt": "Refund order A-1001", "model": "local"})
    done = await finished(run)
    assert done.result_output == "The refund tool said: Unknown tool: no_such_tool"
    result = await TranscriptEntry.objects.aget(run=run, kind=Kind.TOOL_RESULT)
    assert (result.tool, result.text, result.is_error, result.call_id) == (
        "no_such_tool",
        "Unknown tool: no_such_tool",
        True,
        "call_x",
    )


# -- cancel -------------------------------------------------------------------------------------------


async def test_cancel_mid_tool_stops_the_tool_and_the_model_loop(extra_tools, console_events, make_user):
    started = asyncio.Event()
    seen = {}

    async def hold(ctx=None):
        seen["signal"] = ctx.signal
        started.set()
        await ctx.signal.wait()
        return ToolResult(output=f"stopped by the token ({ctx.signal.reason})", is_error=True)

    extra_tools(define_tool(hold, name="hold"))
    alice = await sync_to_async(make_user)("alice", password=None)
    run = await start_agent_run(agent={"prompt": "call hold then call crunch"}, user=alice)
    await asyncio.wait_for(started.wait(), 10)
    await runner.cancel_run(run.pk, user=alice)
    done = await finished(run)

    assert done.status == RunStatus.CANCELLED
    assert done.result_output == "cancelled while hold was running"
    assert seen["signal"].reason == "cancelled"
    steps = await entries(run)
    assert [e.kind for e in steps] == [
        Kind.PROMPT,
        Kind.THINKING,
        Kind.ASSISTANT,
        Kind.TOOL_RESULT,
        Kind.STOPPED,
    ]  # one model turn only: the loop did not ask the model again, crunch never ran
    assert steps[3].text == "stopped by the token (cancelled)"
    assert (steps[-1].text, steps[-1].data) == ("cancelled while hold was running", {"reason": "cancelled"})


async def test_cancel_while_the_loop_waits_withdraws_the_request_and_stops(extra_tools, opened):
    tool, calls = recording_tool()
    extra_tools(tool)
    run = await start_agent_run(agent={"prompt": "call ask then call ask"})
    [frame] = await opened.wait_for(1, run_id=run.pk)
    await runner.cancel_run(run.pk)
    done = await finished(run)

    assert done.status == RunStatus.CANCELLED
    assert done.result_output == "cancelled while waiting for a reviewer to answer ask"
    request = await Request.objects.aget(pk=frame["request_id"])
    assert (request.status, request.answer_reason) == (RequestStatus.CANCELLED, "cancelled")
    assert len(calls) == 1


async def test_a_tool_that_ignores_the_token_is_abandoned_and_the_loop_still_stops(extra_tools):
    started = asyncio.Event()

    async def stubborn(ctx=None):
        started.set()
        await asyncio.sleep(30)
        return "too late"

    extra_tools(define_tool(stubborn, name="stubborn"))
    run = await start_agent_run(agent={"prompt": "call stubborn"})
    await asyncio.wait_for(started.wait(), 10)
    await runner.cancel_run(run.pk)
    done = await finished(run)
    assert done.status == RunStatus.CANCELLED
    result = [e for e in await entries(run) if e.kind == Kind.TOOL_RESULT]
    assert result[0].text == "cancelled: the tool did not stop within the grace period"


async def test_agent_run_timeout_reaches_the_tool_and_times_the_run_out(extra_tools):
    seen = {}

    async def slow(ctx=None):
        seen["timeout"] = ctx.timeout
        await ctx.signal.wait()
        return ToolResult(output="gave up", is_error=True)

    extra_tools(define_tool(slow, name="slow"))
    run = await start_agent_run(agent={"prompt": "call slow"}, timeout=0.5)
    done = await finished(run)
    assert 0 < seen["timeout"] <= 0.5
    assert done.status == RunStatus.TIMED_OUT
    assert done.result_output == "timed out after 0.5s while slow was running"


# -- the builtin question -----------------------------------------------------------------------------


async def test_builtin_question_is_asked_answered_and_seen_by_the_model(opened, make_user):
    bob = await sync_to_async(make_user)("bob", password=None)
    questions = [{"question": "Which colour?", "options": ["red", "blue"]}]
    run = await start_agent_run(agent={"prompt": f"call question with {json.dumps({'questions': questions})}"})
    [frame] = await opened.wait_for(1, run_id=run.pk)
    assert frame["request"]["kind"] == "question"
    assert frame["request"]["data"] == {"questions": questions}
    await sync_to_async(decisions.resolve_request)(frame["request_id"], ok=True, data={"answers": [["blue"]]}, user=bob)
    done = await finished(run)

    assert done.status == RunStatus.SUCCEEDED
    assert done.result_output == 'Done. 1 tool call:\n- question: {"answers": [["blue"]]}'
    result = [e for e in await entries(run) if e.kind == Kind.TOOL_RESULT][0]
    assert result.text == '{"answers": [["blue"]]}'


# -- several suspensions in one turn -----------------------------------------------------------------


async def test_several_suspensions_in_one_turn_are_open_together_and_resolved_in_any_order(extra_tools, opened):
    tool, calls = recording_tool(kind="confirmation")  # answered with JSON replies
    extra_tools(tool)
    prompt = 'call ask with {"hint": "a"} and call ask with {"hint": "b"} and call ask with {"hint": "c"}'
    run = await start_agent_run(agent={"prompt": prompt})
    frames = await opened.wait_for(3, run_id=run.pk)
    by_hint = {f["request"]["data"]["hint"]: f["request_id"] for f in frames}
    assert set(by_hint) == {"a", "b", "c"}
    assert await Request.objects.filter(run_id=run.pk, status=RequestStatus.OPEN).acount() == 3

    # Answer the last first: the loop is still blocked on "a" (tool-call order, §10), so the run waits on.
    [blocked] = await opened.waiting(run)
    assert blocked["payload"]["request"] == by_hint["a"]
    await decisions.aresolve_request(by_hint["c"], ok=True, data={"n": 3})
    assert (await Run.objects.aget(pk=run.pk)).status == RunStatus.WAITING
    await decisions.aresolve_request(by_hint["a"], ok=True, data={"n": 1})
    await decisions.aresolve_request(by_hint["b"], ok=False, reason="declined")
    done = await finished(run)

    assert done.status == RunStatus.SUCCEEDED
    declined = "declined/expired: Decide on b (declined by the console) Do not make the same call again; ask the user how to go on."
    assert done.result_output == f'Done. 3 tool calls:\n- ask: a: {{"n": 1}}\n- ask: {declined}\n- ask: c: {{"n": 3}}'
    # Each call re-executed at most once, with its own answer.
    retries = {c["hint"]: c["ctx"].answer.data for c in calls if c["ctx"].answer is not None}
    assert retries == {"a": {"n": 1}, "c": {"n": 3}}
    results = {e.call_id: e.text for e in await entries(run) if e.kind == Kind.TOOL_RESULT}
    assert results == {
        "call_1_1": 'a: {"n": 1}',
        "call_1_2": declined,
        "call_1_3": 'c: {"n": 3}',
    }


async def test_twenty_agent_runs_at_once_all_finish(extra_tools, opened):
    tool, _calls = recording_tool(kind="confirmation")
    extra_tools(tool)
    runs = [
        await start_agent_run(
            agent={"prompt": f'call ask with {{"hint": "r{i}x"}} and call ask with {{"hint": "r{i}y"}}'}
        )
        for i in range(20)
    ]
    frames = await opened.wait_for(40, timeout=30)
    assert {f["run_id"] for f in frames} == {r.pk for r in runs}
    random.Random(7).shuffle(frames)
    await asyncio.gather(
        *(
            decisions.aresolve_request(f["request_id"], ok=True, data={"hint": f["request"]["data"]["hint"]})
            for f in frames
        )
    )
    done = await asyncio.wait_for(asyncio.gather(*(finished(r, timeout=30) for r in runs)), 40)

    for i, run in enumerate(done):
        assert run.status == RunStatus.SUCCEEDED, run.result_output
        assert run.result_output == (
            f'Done. 2 tool calls:\n- ask: r{i}x: {{"hint": "r{i}x"}}\n- ask: r{i}y: {{"hint": "r{i}y"}}'
        )
    assert await Request.objects.filter(status=RequestStatus.OPEN).acount() == 0


# -- input checks and the API ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "agent, message",
    [
        ({"prompt": "call nosuch"}, "would call 'nosuch', which is not a tool here"),
        ({"prompt": "call deploy with {oops}"}, "expects a JSON object"),
        ({"prompt": "call deploy with [1]"}, "must be a JSON object"),
        ({"prompt": "   "}, "Write a prompt"),
        ({"prompt": "hi", "model": "gpt-9"}, "Unknown model 'gpt-9'. Known models: scripted"),
        ("call deploy", "'agent' must be an object"),
    ],
)
async def test_an_agent_run_that_cannot_start_is_refused_with_a_reason(agent, message):
    with pytest.raises(RunInputError) as refused:
        await start_agent_run(agent=agent)
    assert message in str(refused.value)
    assert await Run.objects.acount() == 0


@pytest.fixture
async def api(make_user):
    user = await sync_to_async(make_user)("alice", password=None)
    client = AsyncClient()
    await client.aforce_login(user)
    return client


@pytest.fixture
async def reviewer_api(make_user):
    """Another reviewer than the one who started the run."""
    user = await sync_to_async(make_user)("bob", password=None)
    client = AsyncClient()
    await client.aforce_login(user)
    return client


async def post(client, path, body=None):
    response = await client.post(path, data=json.dumps(body or {}), content_type="application/json")
    return response.status_code, response.json()


async def test_api_starts_an_agent_run_and_shows_its_transcript(api, reviewer_api, opened):
    status, body = await post(api, "/api/v1/runs", {"agent": {"prompt": "call refund", "model": "scripted"}})
    assert status == 201
    assert (body["kind"], body["label"], body["agent"], body["tool"]) == (
        "agent",
        "agent (scripted)",
        {"prompt": "call refund", "model": "scripted"},
        "",
    )
    [frame] = await opened.wait_for(1, run_id=body["id"])
    response = await api.get(f"/api/v1/runs/{body['id']}/transcript")
    assert response.status_code == 200
    shown = response.json()
    assert shown["run"] == body["id"]
    assert [e["kind"] for e in shown["entries"]][:4] == ["prompt", "thinking", "assistant", "pending"]
    assert shown["entries"][3]["request"] == frame["request_id"]

    status, answer = await post(reviewer_api, f"/api/v1/requests/{frame['request_id']}/answer", {"ok": True})
    assert status == 200
    run = await finished(await Run.objects.aget(pk=body["id"]))
    assert run.result_output == "Done. 1 tool call:\n- refund: refunded 25.0 EUR on order A-1001"
    assert (await api.get("/api/v1/runs/999999/transcript")).status_code == 404


@pytest.mark.parametrize(
    "body, message",
    [
        ({"agent": {"prompt": "call nosuch"}}, "not a tool here"),
        ({"agent": {"prompt": "call refund"}, "tool": "refund"}, "not both"),
        ({"agent": {"prompt": "call refund"}, "timeout": 0}, "more than 0 seconds"),
    ],
)
async def test_api_refuses_a_bad_agent_run_with_400(api, body, message):
    status, answer = await post(api, "/api/v1/runs", body)
    assert status == 400
    assert message in answer["message"]


async def test_api_retry_starts_the_same_run_again_linked_to_the_first(api, opened, extra_tools):
    status, first = await post(api, "/api/v1/runs", {"tool": "crunch", "args": {"steps": 1, "pause": 0}})
    await finished(await Run.objects.aget(pk=first["id"]))
    status, again = await post(api, f"/api/v1/runs/{first['id']}/retry")
    assert status == 201
    assert (again["tool"], again["args"], again["retry_of"]) == ("crunch", {"steps": 1, "pause": 0}, first["id"])
    await finished(await Run.objects.aget(pk=again["id"]))

    status, agent = await post(api, "/api/v1/runs", {"agent": {"prompt": "call refund"}, "timeout": 60})
    status, refused = await post(api, f"/api/v1/runs/{agent['id']}/retry")
    assert (status, refused["error"]) == (409, "not_finished")
    assert "only a finished run can be retried" in refused["message"]
    await runner.cancel_run(agent["id"])
    await finished(await Run.objects.aget(pk=agent["id"]))
    status, agent_again = await post(api, f"/api/v1/runs/{agent['id']}/retry")
    assert status == 201
    assert (agent_again["agent"], agent_again["timeout"], agent_again["retry_of"]) == (
        {"prompt": "call refund", "model": "scripted"},
        60.0,
        agent["id"],
    )
    status, missing = await post(api, "/api/v1/runs/999999/retry")
    assert status == 404


# -- models from settings ----------------------------------------------------------------------------------


class FakeOpenAI(BaseHTTPRequestHandler):
    """An OpenAI-style chat completions endpoint on loopback: first a tool call, then a final answer."""

    seen = []
    tool_name = "refund"

    def do_POST(self):  # noqa: N802 (http.server's spelling)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeOpenAI.seen.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        tool_messages = [m for m in body["messages"] if m.get("role") == "tool"]
        if tool_messages:
            message = {"role": "assistant", "content": f"The refund tool said: {tool_messages[-1]['content']}"}
        else:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_x",
                        "type": "function",
                        "function": {"name": FakeOpenAI.tool_name, "arguments": json.dumps({"amount": 7})},
                    }
                ],
            }
        payload = json.dumps(
            {
                "choices": [
                    {"index": 0, "message": message, "finish_reason": "tool_calls" if not tool_messages else "stop"}
                ],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_openai():
    FakeOpenAI.seen = []
    FakeOpenAI.tool_name = "refund"
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


SECRET = "sk-test-never-shown-4471"


async def test_a_configured_openai_style_model_runs_with_its_key_from_the_environment(
    settings, monkeypatch, fake_openai, opened
):
    settings.TOOLNEXUS = {
        **settings.TOOLNEXUS,
        "MODELS": {
            "local": {"style": "openai", "base_url": fake_openai, "model": "fake-1", "api_key_env": "FAKE_MODEL_KEY"},
        },
    }
    monkeypatch.setenv("FAKE_MODEL_KEY", SECRET)
    run = await start_agent_run(agent={"prompt": "Refund order A-1001", "model": "local"})
    [frame] = await opened.wait_for(1, run_id=run.pk)
    await decisions.aresolve_request(frame["request_id"], ok=True)
    done = await finished(run)

    assert done.status == RunStatus.SUCCEEDED
    assert done.result_output == "The refund tool said: refunded 7 EUR on order A-1001"
    assert [s["auth"] for s in FakeOpenAI.seen] == [f"Bearer {SECRET}"] * 2
    assert FakeOpenAI.seen[0]["body"]["model"] == "fake-1"
    assert FakeOpenAI.seen[0]["path"] == "/v1/chat/completions"
    # The key is used, never kept: not in the run, its transcript, the audit trail or the catalog.
    stored = json.dumps(
        [
            [e.payload async for e in AuditEvent.objects.all()],
            [(e.text, e.data) async for e in TranscriptEntry.objects.all()],
            [(r.agent_messages, r.agent_prompt) async for r in Run.objects.all()],
            agent_models.model_catalog(),
        ],
        default=str,
    )
    assert SECRET not in stored
    tool_call = [e async for e in TranscriptEntry.objects.filter(run=run, kind=Kind.ASSISTANT)][0]
    assert tool_call.data == {"tool_calls": [{"id": "call_x", "name": "refund", "args": {"amount": 7}}]}


async def test_a_configured_model_without_its_key_is_refused_naming_the_variable(settings, monkeypatch):
    settings.TOOLNEXUS = {
        **settings.TOOLNEXUS,
        "MODELS": {
            "claude": {
                "style": "anthropic",
                "base_url": "http://127.0.0.1:9/v1",
                "model": "c",
                "api_key_env": "NO_SUCH_KEY_VAR",
            },
        },
    }
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with pytest.raises(RunInputError) as refused:
        await start_agent_run(agent={"prompt": "hello", "model": "claude"})
    assert "NO_SUCH_KEY_VAR, which is not set" in str(refused.value)
    catalog = {m["name"]: m for m in agent_models.model_catalog()}
    assert catalog["claude"]["ready"] is False
    assert catalog["scripted"]["ready"] is True


def test_bad_model_settings_are_named(settings):
    settings.TOOLNEXUS = {
        **settings.TOOLNEXUS,
        "MODELS": {"x": {"style": "grpc", "base_url": "u", "model": "m", "api_key_env": "K"}},
    }
    with pytest.raises(agent_models.ModelConfigError, match=r"\['x'\]\[\"style\"\] is 'grpc'"):
        agent_models.configured_models()
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "MODELS": {"y": {"style": "openai"}}}
    with pytest.raises(agent_models.ModelConfigError, match="missing base_url, model, api_key_env"):
        agent_models.configured_models()


# -- the scripted model's language, and resuming a halted turn ----------------------------------------------


def test_script_calls_in_one_turn_then_the_next():
    turns = parse_script('Please call deploy with {"service": "web"} and call refund, then think 0.5 then call crunch.')
    assert [t.calls for t in turns] == [[("deploy", {"service": "web"}), ("refund", {})], [("crunch", {})]]
    assert [t.think_seconds for t in turns] == [0.0, 0.5]


def test_script_errors_say_what_to_change():
    with pytest.raises(ScriptError, match="'call' needs a tool name"):
        parse_script("call")
    with pytest.raises(ScriptError, match="'think' needs a number of seconds"):
        parse_script("think soon")


def test_scripted_model_counts_its_turns_from_the_messages():
    prompt = {"role": "user", "content": "call a then call b"}
    first = scripted_generate({"messages": [prompt]})
    assert first == {"tool_calls": [{"id": "call_1_1", "name": "a", "arguments": {}}]}
    turn_1 = {"role": "assistant", "tool_calls": [{"id": "call_1_1", "function": {"name": "a", "arguments": "{}"}}]}
    result_1 = {"role": "tool", "tool_call_id": "call_1_1", "content": "A!"}
    second = scripted_generate({"messages": [prompt, turn_1, result_1]})
    assert second["tool_calls"][0]["name"] == "b"
    turn_2 = {"role": "assistant", "tool_calls": [{"id": "call_2_1", "function": {"name": "b", "arguments": "{}"}}]}
    result_2 = {"role": "tool", "tool_call_id": "call_2_1", "content": "B!"}
    final = scripted_generate({"messages": [prompt, turn_1, result_1, turn_2, result_2]})
    assert final == {"content": "Done. 2 tool calls:\n- a: A!\n- b: B!"}


def test_halted_turn_lists_the_calls_still_without_a_result():
    assistant = {
        "role": "assistant",
        "tool_calls": [
            {"id": "c1", "function": {"name": "a", "arguments": '{"x": 1}'}},
            {"id": "c2", "function": {"name": "b", "arguments": "{}"}},
        ],
    }
    messages = [{"role": "user", "content": "go"}, assistant, {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    assert halted_turn(messages, "openai") == [("c2", "b", {})]
    anthropic = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "on it"},
                {"type": "tool_use", "id": "t1", "name": "a", "input": {"x": 1}},
            ],
        },
    ]
    assert halted_turn(anthropic, "anthropic") == [("t1", "a", {"x": 1})]
    result = ToolResult(output="done", is_error=False)
    assert tool_result_messages([("t1", "a", result)], "anthropic") == [
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "done", "is_error": False}],
        }
    ]
    assert tool_result_messages([("c2", "b", result)], "openai") == [
        {"role": "tool", "tool_call_id": "c2", "content": "done"}
    ]


def test_a_mismatched_answer_id_is_refused_on_resume():
    from toolnexus import Answer

    check_answer_matches(Answer(id="r-1", ok=True), "r-1")
    with pytest.raises(ResumeError, match="answer is for request 'r-2', but the run halted on request 'r-1'"):
        check_answer_matches(Answer(id="r-2", ok=True), "r-1")


# -- the run page's transcript partial and the dashboard's agent form ---------------------------------------


async def test_transcript_partial_shows_the_entries_as_data_and_offers_retry(extra_tools, make_user):
    from django.template.loader import render_to_string

    from approvals.web import views

    run = await start_agent_run(agent={"prompt": 'call crunch with {"steps": 1, "pause": 0} </script><b>x</b>'})
    await finished(run)
    await Run.objects.filter(pk=run.pk).aupdate(status=RunStatus.INTERRUPTED)
    again = await start_agent_run(agent={"prompt": 'call crunch with {"steps": 1, "pause": 0}'})
    await Run.objects.filter(pk=again.pk).aupdate(retry_of=run)
    await finished(again)
    context = await views._run_page_context(run.pk, Viewer("reader"))
    html = await sync_to_async(render_to_string)("approvals/_transcript.html", context)

    assert f'data-run-id="{run.pk}"' in html and 'data-run-kind="agent"' in html
    assert 'data-run-status="interrupted"' in html
    assert 'id="run-retry"' in html and static("approvals/transcript.js") in html
    assert f'Retried as <a href="/runs/{again.pk}/">run #{again.pk}</a>' in html
    assert "<b>x</b>" not in html  # the prompt only travels as escaped JSON data
    entries = json_script(html, "initial-transcript")
    assert [e["kind"] for e in entries][:3] == ["prompt", "thinking", "assistant"]
    assert entries[0]["text"].endswith("</script><b>x</b>")

    retried = await sync_to_async(render_to_string)(
        "approvals/_transcript.html", await views._run_page_context(again.pk, Viewer("reader"))
    )
    assert f'A retry of <a href="/runs/{run.pk}/">run #{run.pk}</a>' in retried


def test_start_agent_partial_lists_the_models_without_keys(settings, monkeypatch):
    from django.template.loader import render_to_string

    settings.TOOLNEXUS = {
        **settings.TOOLNEXUS,
        "MODELS": {
            "gpt": {
                "style": "openai",
                "base_url": "http://127.0.0.1:9/v1",
                "model": "m",
                "api_key_env": "GPT_KEY_FOR_TESTS",
            },
        },
    }
    monkeypatch.setenv("GPT_KEY_FOR_TESTS", SECRET)
    html = render_to_string("approvals/_start_agent.html", {"models": agent_models.model_catalog()})
    assert '<option value="scripted">scripted (in-process)</option>' in html
    assert '<option value="gpt">gpt (openai)</option>' in html
    assert SECRET not in html and static("approvals/agent_form.js") in html


async def test_a_model_calling_a_tool_with_arguments_off_its_schema_gets_an_error_naming_them_and_the_tool_never_runs(
    extra_tools,
):
    calls = []

    async def execute(amount: float = 0.0, ctx=None):
        calls.append(amount)
        return f"refunded {amount}"

    extra_tools(
        define_tool(
            execute,
            name="strict_refund",
            input_schema={
                "type": "object",
                "properties": {"amount": {"type": "number", "minimum": 0}},
                "required": ["amount"],
            },
        )
    )
    run = await start_agent_run(
        agent={"prompt": 'call strict_refund with {"amount": "lots"} then call strict_refund with {"amount": 5}'}
    )
    done = await finished(run)

    assert calls == [5]  # only the call that fits the schema reached the tool
    results = [e async for e in TranscriptEntry.objects.filter(run=run, kind=Kind.TOOL_RESULT).order_by("seq")]
    assert [(r.tool, r.is_error) for r in results] == [("strict_refund", True), ("strict_refund", False)]
    assert results[0].text == "invalid arguments for strict_refund: amount: Enter a number."
    assert done.status == RunStatus.SUCCEEDED
