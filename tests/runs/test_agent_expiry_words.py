"""What the model reads when a request of its agent run ends without a person deciding it (issue 35, part 4).

toolnexus' client writes §10's ``declined/expired: <prompt>`` for every refusal; the console gives the model
the words a tool run gets after that exact prefix when nobody answered ("(expired at 20:14 UTC, nobody
answered)", or what the outcome did), and keeps the client's words for a person's decline. Each test reads
the exact messages the scripted model is sent next (a recording wrapper around the real model), the
transcript's tool result, and the run's answer. Deadlines are moved into the past and the expiry timer runs
once, as time passing would: no sleeps.
"""

import asyncio
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone
from toolnexus import Answer, define_tool, pending

from approvals import moments
from approvals.models import AuditEvent, Policy, Request, Run, RunStatus, TranscriptEntry
from approvals.review import decisions
from approvals.runs import runner, waiting
from approvals.runs.agent_runner import AgentLoop
from approvals.runs.cancel import CancelToken
from approvals.runs.runner import start_agent_run
from approvals.runs.supervisor import supervisors_by_loop

pytestmark = pytest.mark.django_db(transaction=True)
Kind = TranscriptEntry.Kind


@pytest.fixture(autouse=True)
def _stop_leftover_runs(stop_leftover_runs):
    """Every test here cancels what it left running (the fixture is in tests/conftest.py)."""


def asking_tool(name="ask", *, kind="approval", data=None):
    """Suspends with "Decide on <hint>" on its first call; on the retry says what it was answered."""

    async def execute(hint: str = "", ctx=None):
        if ctx is not None and ctx.answer is not None:
            return f"{hint}: {ctx.answer.data}"
        return pending(kind=kind, prompt=f"Decide on {hint}", data=data if data is not None else {"hint": hint})

    return define_tool(execute, name=name)


async def blocked(console_events, run_id):
    """The next time the agent loop blocks on a reviewer (its ``waiting`` transcript entry)."""
    while True:
        frame = await console_events.next(AuditEvent.Action.RUN_TRANSCRIPT, run_id=run_id)
        if frame["payload"]["kind"] == "waiting":
            return frame["payload"]


async def deadline_passes(request_id):
    """It was opened two hours ago (defaults need people to have had the time), its deadline is a minute ago,
    and the console's expiry timer runs once."""
    now = timezone.now()
    await Request.objects.filter(pk=request_id).aupdate(
        created_at=now - timedelta(hours=2), expires_at=now - timedelta(minutes=1)
    )
    await decisions.aexpire_due_requests()


async def expired_at(request_id):
    return moments.readable_time((await Request.objects.aget(pk=request_id)).answered_at)


async def finished(run_id, timeout=15):
    await asyncio.wait_for(runner.wait_for_run(run_id), timeout)
    return await Run.objects.aget(pk=run_id)


def tool_results_read(messages):
    """The tool results in the messages the model was sent, by call id (OpenAI wire shape)."""
    return {m["tool_call_id"]: m["content"] for m in messages if m.get("role") == "tool"}


async def transcript_results(run_id):
    return {
        e.call_id: e.text
        async for e in TranscriptEntry.objects.filter(run_id=run_id, kind=Kind.TOOL_RESULT).order_by("seq")
    }


async def test_an_expiry_tells_the_model_when_it_expired_and_that_nobody_answered(
    extra_tools, console_events, model_inputs
):
    extra_tools(asking_tool())
    run = await start_agent_run(agent={"prompt": 'call ask with {"hint": "the colour"}'})
    waited = await blocked(console_events, run.pk)
    await deadline_passes(waited["request"])
    done = await finished(run.pk)

    told = f"declined/expired: Decide on the colour (expired at {await expired_at(waited['request'])}, nobody answered)"
    assert len(model_inputs) == 2
    assert tool_results_read(model_inputs[1]) == {"call_1_1": told}
    assert await transcript_results(run.pk) == {"call_1_1": told}
    assert (done.status, done.result_output) == (RunStatus.SUCCEEDED, f"Done. 1 tool call:\n- ask: {told}")


async def test_a_person_declining_is_named_after_the_clients_exact_words(
    extra_tools, console_events, model_inputs, make_user
):
    extra_tools(asking_tool())
    rita = await sync_to_async(make_user)("rita", password=None)
    run = await start_agent_run(agent={"prompt": 'call ask with {"hint": "the colour"}'})
    waited = await blocked(console_events, run.pk)
    await decisions.aresolve_request(waited["request"], ok=False, reason="declined", user=rita)
    done = await finished(run.pk)

    # Issue 36: after §10's exact prefix, who declined and what to do instead of the same call.
    told = "declined/expired: Decide on the colour (declined by rita) Do not make the same call again; ask the user how to go on."
    assert tool_results_read(model_inputs[1]) == {"call_1_1": told}
    assert await transcript_results(run.pk) == {"call_1_1": told}
    assert done.result_output == f"Done. 1 tool call:\n- ask: {told}"


async def test_defaults_that_did_not_fit_are_named_to_the_model(extra_tools, console_events, model_inputs):
    # "replicas" is required and has no default: applying the defaults declines, and the record says so.
    schema = {
        "type": "object",
        "properties": {"env": {"type": "string", "default": "staging"}, "replicas": {"type": "integer"}},
        "required": ["env", "replicas"],
    }
    extra_tools(asking_tool("rollout", kind="input", data={"schema": schema}))
    await sync_to_async(Policy.objects.create)(name="rollouts", tool_pattern="rollout", on_timeout="apply_defaults")
    run = await start_agent_run(agent={"prompt": 'call rollout with {"hint": "where"}'})
    waited = await blocked(console_events, run.pk)
    await deadline_passes(waited["request"])
    done = await finished(run.pk)

    when = await expired_at(waited["request"])
    told = f"declined/expired: Decide on where (expired at {when}, nobody answered; defaults did not fit)"
    assert tool_results_read(model_inputs[1]) == {"call_1_1": told}
    assert await transcript_results(run.pk) == {"call_1_1": told}
    assert done.status == RunStatus.SUCCEEDED


async def test_only_the_expired_call_of_a_turn_gets_the_expirys_words(extra_tools, console_events, model_inputs):
    extra_tools(asking_tool())
    run = await start_agent_run(agent={"prompt": 'call ask with {"hint": "a"} and call ask with {"hint": "b"}'})
    waited = await blocked(console_events, run.pk)
    requests = {r.args["hint"]: r.pk async for r in Request.objects.filter(run_id=run.pk)}
    assert waited["request"] == requests["a"]
    await decisions.aresolve_request(requests["b"], ok=False, reason="declined")
    await deadline_passes(requests["a"])
    await finished(run.pk)

    told = f"declined/expired: Decide on a (expired at {await expired_at(requests['a'])}, nobody answered)"
    declined = "declined/expired: Decide on b (declined by the console) Do not make the same call again; ask the user how to go on."
    expected = {"call_1_1": told, "call_1_2": declined}
    assert tool_results_read(model_inputs[1]) == expected
    assert await transcript_results(run.pk) == expected


# -- resumed after a restart ------------------------------------------------------------------------

STOPPED_OWNER = "a-console-that-stopped"


async def stop_the_process(monkeypatch, *run_ids):
    """The old console process goes away: its tasks vanish and withdraw nothing; its rows stay as they are."""

    async def withdraw_nothing(request_id, reason):
        return Answer(id=request_id, ok=False, reason=reason)

    sup = runner.supervisor()
    with monkeypatch.context() as patch:
        patch.setattr(waiting, "_withdraw", withdraw_nothing)
        tasks = [sup.tasks[run_id] for run_id in run_ids] + sup.background_tasks()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    supervisors_by_loop.pop(asyncio.get_running_loop())
    await Run.objects.filter(pk__in=run_ids).aupdate(owner=STOPPED_OWNER)


async def test_an_expiry_after_a_restart_tells_the_model_the_same_words(extra_tools, console_events, model_inputs):
    """The request expires while no process owns the run; the process that resumes it says what happened."""
    extra_tools(asking_tool())
    run = await start_agent_run(agent={"prompt": 'call ask with {"hint": "a"}'})
    waited = await blocked(console_events, run.pk)
    await stop_the_process(pytest.MonkeyPatch(), run.pk)
    await deadline_passes(waited["request"])
    await runner.ensure_started()
    done = await finished(run.pk)

    told = f"declined/expired: Decide on a (expired at {await expired_at(waited['request'])}, nobody answered)"
    assert len(model_inputs) == 2
    assert tool_results_read(model_inputs[1]) == {"call_1_1": told}
    assert await transcript_results(run.pk) == {"call_1_1": told}
    assert (done.status, done.result_output) == (RunStatus.SUCCEEDED, f"Done. 1 tool call:\n- ask: {told}")


async def test_the_saved_resume_point_holds_an_earlier_expirys_words(extra_tools, console_events, model_inputs):
    """The request of call "a" expires, then the loop blocks on "b" and saves its messages: a process resuming
    from them gives the model the words "a"'s expiry got, not the client's."""
    extra_tools(asking_tool())
    run = await start_agent_run(agent={"prompt": 'call ask with {"hint": "a"} and call ask with {"hint": "b"}'})
    await blocked(console_events, run.pk)
    requests = {r.args["hint"]: r.pk async for r in Request.objects.filter(run_id=run.pk)}
    await deadline_passes(requests["a"])
    assert (await blocked(console_events, run.pk))["request"] == requests["b"]

    told = f"declined/expired: Decide on a (expired at {await expired_at(requests['a'])}, nobody answered)"
    saved = (await Run.objects.aget(pk=run.pk)).agent_messages
    assert tool_results_read(saved) == {"call_1_1": told}


async def test_a_run_resumed_after_a_restart_tells_the_model_each_expirys_words(
    extra_tools, console_events, model_inputs
):
    """ "a" expires while this process runs the loop, "b" while no process owns the run: the process that
    resumes it (from the saved messages and the transcript) gives the model both in the console's words."""
    extra_tools(asking_tool())
    run = await start_agent_run(agent={"prompt": 'call ask with {"hint": "a"} and call ask with {"hint": "b"}'})
    await blocked(console_events, run.pk)
    requests = {r.args["hint"]: r.pk async for r in Request.objects.filter(run_id=run.pk)}
    await deadline_passes(requests["a"])
    assert (await blocked(console_events, run.pk))["request"] == requests["b"]
    await stop_the_process(pytest.MonkeyPatch(), run.pk)
    await deadline_passes(requests["b"])
    await runner.ensure_started()
    done = await finished(run.pk)

    expected = {
        hint: f"declined/expired: Decide on {hint} (expired at {await expired_at(requests[hint])}, nobody answered)"
        for hint in ("a", "b")
    }
    assert len(model_inputs) == 2
    assert tool_results_read(model_inputs[1]) == {"call_1_1": expected["a"], "call_1_2": expected["b"]}
    assert await transcript_results(run.pk) == {"call_1_1": expected["a"], "call_1_2": expected["b"]}
    assert done.status == RunStatus.SUCCEEDED, done.result_output


def test_an_anthropic_style_turn_gets_the_same_words():
    """A model of the Anthropic wire style reads tool results as blocks of a user message: the same words."""
    loop = AgentLoop(1, "scripted", CancelToken(), None)
    loop.style = "anthropic"
    told = "declined/expired: Decide on a (expired at 20:14 UTC, nobody answered)"
    loop.refusals = {"toolu_a": ("declined/expired: Decide on a", told)}
    results = [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "declined/expired: Decide on a", "is_error": True},
        {"type": "tool_result", "tool_use_id": "toolu_b", "content": "b: done", "is_error": False},
    ]
    sent = [{"role": "user", "content": "go"}, {"role": "user", "content": results}]

    assert loop.as_told(sent) == [
        {"role": "user", "content": "go"},
        {"role": "user", "content": [{**results[0], "content": told}, results[1]]},
    ]
    assert sent[1]["content"][0]["content"] == "declined/expired: Decide on a"  # what the client holds is not changed
