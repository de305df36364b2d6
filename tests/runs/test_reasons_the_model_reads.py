"""What a run hears back after a reviewer declines, replies or asks for changes (issue 36, parts 1 and 2).

Tool runs read it as the run's output (``loop_rule.refused_result``); agent runs give the model the same words in
the next messages it is sent (``AgentLoop.as_told``, through ``before_llm``), the transcript and the saved resume
point hold them, and a run resumed after a restart too. Each test counts the refunds the tool really made (a
module-level list): a refusal of any kind never makes one (mastra#20470).
"""

import asyncio

import pytest
from asgiref.sync import sync_to_async
from toolnexus import Answer, define_tool, pending

from approvals.models import AuditEvent, Request, Run, RunStatus, TranscriptEntry
from approvals.review import decisions
from approvals.runs import runner, waiting
from approvals.runs.agent_runner import AgentLoop
from approvals.runs.cancel import CancelToken
from approvals.runs.runner import start_agent_run
from approvals.runs.supervisor import supervisors_by_loop

pytestmark = pytest.mark.django_db(transaction=True)
Kind = TranscriptEntry.Kind

TOO_LARGE = {"key": "too_large", "label": "Too large", "text": "Refunds above 100 EUR need a manager."}
REFUNDS_MADE: list[int] = []  # the side effect: one entry per refund the tool really made
REASON_ADVICE = "Do not make the same call again; follow the reviewer's reason, or ask the user how to go on."


async def pay_refund(amount: int = 0, ctx=None):
    """Asks for an approval; makes the refund only when re-executed with an ok answer (§10)."""
    if ctx is not None and ctx.answer is not None:
        REFUNDS_MADE.append(amount)
        return f"refunded {amount} EUR"
    return pending(kind="approval", prompt=f"Refund {amount} EUR?", data={"reject_options": [TOO_LARGE]})


@pytest.fixture(autouse=True)
def _refund_tool(extra_tools, stop_leftover_runs):
    REFUNDS_MADE.clear()
    extra_tools(define_tool(pay_refund, name="pay_refund"))


@pytest.fixture
async def bob(make_user):
    return await sync_to_async(make_user)("bob", password=None)


async def finished(run_id, timeout=15):
    await asyncio.wait_for(runner.wait_for_run(run_id), timeout)
    return await Run.objects.aget(pk=run_id)


async def tool_run_asks(console_events, amount=500):
    run = await runner.start_run(tool="pay_refund", args={"amount": amount})
    opened = await console_events.next("request.opened", run_id=run.pk)
    return run, opened["request_id"]


async def agent_run_blocks(console_events, prompt='call pay_refund with {"amount": 500}'):
    run = await start_agent_run(agent={"prompt": prompt})
    while True:
        frame = await console_events.next(AuditEvent.Action.RUN_TRANSCRIPT, run_id=run.pk)
        if frame["payload"]["kind"] == "waiting":
            return run, frame["payload"]["request"]


def tool_results_read(messages):
    """The tool results in the messages the model was sent, by call id (OpenAI wire shape)."""
    return {m["tool_call_id"]: m["content"] for m in messages if m.get("role") == "tool"}


async def transcript_results(run_id):
    return {
        e.call_id: (e.text, e.is_error)
        async for e in TranscriptEntry.objects.filter(run_id=run_id, kind=Kind.TOOL_RESULT).order_by("seq")
    }


# -- tool runs ------------------------------------------------------------------------------------------


async def test_a_tool_run_declined_with_an_option_and_a_comment_reads_who_and_why(console_events, bob):
    run, request_id = await tool_run_asks(console_events)
    await decisions.aresolve_request(request_id, ok=False, option="too_large", comment="split it in two", user=bob)
    done = await finished(run.pk)

    assert (done.status, done.result_is_error) == (RunStatus.FAILED, True)
    assert done.result_output == (
        'declined/expired: Refund 500 EUR? (declined by bob: Too large. Refunds above 100 EUR need a manager. "split '
        f'it in two") {REASON_ADVICE}'
    )
    assert REFUNDS_MADE == []


async def test_a_reply_in_a_tool_run_is_its_output_and_the_tool_never_runs(console_events, bob):
    run, request_id = await tool_run_asks(console_events)
    answer = await decisions.aresolve_request(
        request_id, ok=False, response="respond", message="Refund 50 EUR; the rest goes on a voucher.", user=bob
    )
    done = await finished(run.pk)

    assert (answer.ok, answer.reason) == (False, "declined")  # a host would not run the tool either
    assert (done.status, done.result_is_error) == (RunStatus.SUCCEEDED, False)
    assert (
        done.result_output == "bob answered instead of running pay_refund: Refund 50 EUR; the rest goes on a voucher."
    )
    assert REFUNDS_MADE == []


async def test_changes_asked_for_in_a_tool_run_are_its_output_and_the_tool_never_runs(console_events, bob):
    run, request_id = await tool_run_asks(console_events)
    await decisions.aresolve_request(
        request_id,
        ok=False,
        response="request_changes",
        message="Refund at most 100 EUR.",
        option="too_large",
        user=bob,
    )
    done = await finished(run.pk)

    assert (done.status, done.result_is_error) == (RunStatus.FAILED, True)
    assert done.result_output == (
        "declined/expired: Refund 500 EUR? (bob requested changes: Too large. Refunds above 100 EUR need a manager. "
        "Refund at most 100 EUR) Do not make the same call again; call pay_refund again only with these changes, or "
        "ask the user."
    )
    assert REFUNDS_MADE == []


async def test_an_approval_still_makes_the_refund_once(console_events, bob):
    """The counter counts: the same tool approved runs once (so the zeros above mean something)."""
    run, request_id = await tool_run_asks(console_events)
    await decisions.aresolve_request(request_id, ok=True, user=bob)
    done = await finished(run.pk)
    assert (done.result_output, REFUNDS_MADE) == ("refunded 500 EUR", [500])


async def test_a_stale_reply_after_a_decline_is_refused_and_changes_nothing(console_events, bob):
    """mastra#19633: an answer for a call already decided is a 409, and nothing about the run changes."""
    run, request_id = await tool_run_asks(console_events)
    await decisions.aresolve_request(request_id, ok=False, user=bob)
    done = await finished(run.pk)

    with pytest.raises(decisions.DecisionError) as refused:
        await decisions.aresolve_request(request_id, ok=True, user=bob)
    with pytest.raises(decisions.DecisionError):
        await decisions.aresolve_request(request_id, ok=False, response="respond", message="do this", user=bob)

    assert refused.value.http_status == 409
    assert "already declined by bob" in refused.value.message
    after = await Run.objects.aget(pk=run.pk)
    assert (after.status, after.result_output) == (done.status, done.result_output)
    assert (await Request.objects.aget(pk=request_id)).answer_data is None
    assert REFUNDS_MADE == []


# -- agent runs -------------------------------------------------------------------------------------------


async def test_the_model_reads_the_option_and_the_comment_after_a_decline(console_events, model_inputs, bob):
    run, request_id = await agent_run_blocks(console_events)
    await decisions.aresolve_request(request_id, ok=False, option="too_large", comment="split it in two", user=bob)
    done = await finished(run.pk)

    told = (
        'declined/expired: Refund 500 EUR? (declined by bob: Too large. Refunds above 100 EUR need a manager. "split '
        f'it in two") {REASON_ADVICE}'
    )
    assert len(model_inputs) == 2
    assert model_inputs[1][-1] == {"role": "tool", "tool_call_id": "call_1_1", "content": told}
    assert await transcript_results(run.pk) == {"call_1_1": (told, True)}
    assert (done.status, done.result_output) == (RunStatus.SUCCEEDED, f"Done. 1 tool call:\n- pay_refund: {told}")
    assert REFUNDS_MADE == []


async def test_the_model_reads_a_reply_as_the_calls_result_and_the_tool_never_ran(console_events, model_inputs, bob):
    run, request_id = await agent_run_blocks(console_events)
    await decisions.aresolve_request(
        request_id, ok=False, response="respond", message="Refund 50 EUR; the rest goes on a voucher.", user=bob
    )
    await finished(run.pk)

    told = "bob answered instead of running pay_refund: Refund 50 EUR; the rest goes on a voucher."
    assert tool_results_read(model_inputs[1]) == {"call_1_1": told}
    assert "declined/expired" not in str(model_inputs[1])
    assert await transcript_results(run.pk) == {"call_1_1": (told, False)}
    assert REFUNDS_MADE == []


async def test_a_replys_comment_stays_with_the_team_and_the_model_reads_only_the_reply(
    console_events, model_inputs, bob
):
    """Respond: the model reads the reply alone, in a tool run and an agent run; the comment is the team's record
    (the decision, the refusal's data), never part of the words the model reads."""
    reply = "Refund 50 EUR; the rest goes on a voucher."
    told = f"bob answered instead of running pay_refund: {reply}"
    tool_run, tool_request = await tool_run_asks(console_events)
    answer = await decisions.aresolve_request(
        tool_request, ok=False, response="respond", message=reply, comment="customer called twice", user=bob
    )
    agent_run, agent_request = await agent_run_blocks(console_events)
    await decisions.aresolve_request(
        agent_request, ok=False, response="respond", message=reply, comment="customer called twice", user=bob
    )
    done = await finished(tool_run.pk)
    await finished(agent_run.pk)

    assert answer.data == {"comment": "customer called twice", "response": "respond", "message": reply}
    assert (done.status, done.result_output) == (RunStatus.SUCCEEDED, told)
    assert tool_results_read(model_inputs[1]) == {"call_1_1": told}
    assert await transcript_results(agent_run.pk) == {"call_1_1": (told, False)}
    decision = (await Request.objects.aget(pk=tool_request)).comment
    assert decision == "customer called twice"
    assert REFUNDS_MADE == []


async def test_the_model_reads_the_changes_asked_for(console_events, model_inputs, bob):
    run, request_id = await agent_run_blocks(console_events)
    await decisions.aresolve_request(
        request_id, ok=False, response="request_changes", message="Refund at most 100 EUR.", user=bob
    )
    await finished(run.pk)

    told = (
        "declined/expired: Refund 500 EUR? (bob requested changes: Refund at most 100 EUR) Do not make the same call "
        "again; call pay_refund again only with these changes, or ask the user."
    )
    assert tool_results_read(model_inputs[1]) == {"call_1_1": told}
    assert REFUNDS_MADE == []


async def test_the_saved_resume_point_holds_a_reply(console_events, model_inputs, bob):
    """Call one is answered by a reply; the loop then blocks on call two and saves its messages with the reply."""
    prompt = 'call pay_refund with {"amount": 500} and call pay_refund with {"amount": 20}'
    run, first = await agent_run_blocks(console_events, prompt)
    second = await Request.objects.filter(run_id=run.pk).exclude(pk=first).values_list("pk", flat=True).aget()
    await decisions.aresolve_request(first, ok=False, response="respond", message="Not today.", user=bob)
    while True:
        frame = await console_events.next(AuditEvent.Action.RUN_TRANSCRIPT, run_id=run.pk)
        if frame["payload"]["kind"] == "waiting" and frame["payload"]["request"] == second:
            break

    saved = (await Run.objects.aget(pk=run.pk)).agent_messages
    assert tool_results_read(saved) == {"call_1_1": "bob answered instead of running pay_refund: Not today."}


STOPPED_OWNER = "a-console-that-stopped"


async def stop_the_process(run_id):
    """The old console process goes away: its tasks vanish and withdraw nothing; its rows stay as they are."""

    async def withdraw_nothing(request_id, reason):
        return Answer(id=request_id, ok=False, reason=reason)

    sup = runner.supervisor()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(waiting, "_withdraw", withdraw_nothing)
        tasks = [sup.tasks[run_id], *sup.background_tasks()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    supervisors_by_loop.pop(asyncio.get_running_loop())
    await Run.objects.filter(pk=run_id).aupdate(owner=STOPPED_OWNER)


async def test_a_run_resumed_after_a_restart_reads_the_decline_and_the_reply(console_events, model_inputs, bob):
    """Both requests are decided while no process owns the run; the process that resumes it gives the model the
    console's words for each (a decline with its option, a reply), and still makes no refund."""
    prompt = 'call pay_refund with {"amount": 500} and call pay_refund with {"amount": 20}'
    run, first = await agent_run_blocks(console_events, prompt)
    second = await Request.objects.filter(run_id=run.pk).exclude(pk=first).values_list("pk", flat=True).aget()
    await stop_the_process(run.pk)
    await decisions.aresolve_request(first, ok=False, option="too_large", user=bob)
    await decisions.aresolve_request(second, ok=False, response="respond", message="Done by hand.", user=bob)
    await runner.ensure_started()
    done = await finished(run.pk)

    declined = f"declined/expired: Refund 500 EUR? (declined by bob: Too large. Refunds above 100 EUR need a manager) {REASON_ADVICE}"
    replied = "bob answered instead of running pay_refund: Done by hand."
    assert tool_results_read(model_inputs[-1]) == {"call_1_1": declined, "call_1_2": replied}
    assert await transcript_results(run.pk) == {"call_1_1": (declined, True), "call_1_2": (replied, False)}
    assert done.status == RunStatus.SUCCEEDED, done.result_output
    assert REFUNDS_MADE == []


def test_an_anthropic_style_reply_is_not_an_error():
    """A model of the Anthropic wire style reads a reply as a tool_result block with ``is_error`` false."""
    loop = AgentLoop(1, "scripted", CancelToken(), None)
    loop.style = "anthropic"
    replied = "bob answered instead of running pay_refund: Not today."
    loop.refusals = {"toolu_a": ("declined/expired: Refund 500 EUR?", replied)}
    loop.replied = {"toolu_a"}
    block = {"type": "tool_result", "tool_use_id": "toolu_a", "content": "declined/expired: Refund 500 EUR?"}
    sent = [{"role": "user", "content": [{**block, "is_error": True}]}]

    assert loop.as_told(sent) == [{"role": "user", "content": [{**block, "content": replied, "is_error": False}]}]
