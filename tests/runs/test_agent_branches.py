"""Agent runs that take another path (issue 36, part 6): the scripted model reads a reviewer's words in a tool
result and calls a different tool. Each test reads the exact input the model is sent next (a recording wrapper
around the real model) and counts which tools ran.
"""

import asyncio

import pytest
from asgiref.sync import sync_to_async
from toolnexus import Answer, define_tool, pending

from approvals.models import AuditEvent, Run, RunStatus
from approvals.review import decisions
from approvals.runs import runner, waiting
from approvals.runs.runner import start_agent_run
from approvals.runs.supervisor import supervisors_by_loop

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _stop_leftover_runs(stop_leftover_runs):
    """Every test here cancels what it left running (the fixture is in tests/conftest.py)."""


def payout_and_owner(calls):
    """payout asks a reviewer (amount editable) and pays what its parameters say; notify_owner and audit
    record that they ran."""

    async def payout(order: str, amount: int, ctx=None):
        if getattr(ctx, "answer", None) is None:
            return pending(kind="approval", prompt=f"Pay {amount} on {order}?", data={"editable": ["amount"]})
        calls.append(("payout", amount))
        return f"paid {amount} on {order}"

    async def notify_owner(order: str = ""):
        calls.append(("notify_owner", order))
        return f"owner of {order} told"

    async def audit(order: str = ""):
        calls.append(("audit", order))
        return "audited"

    return define_tool(payout, name="payout"), define_tool(notify_owner), define_tool(audit)


async def blocked(console_events, run_id):
    """The next time the agent loop blocks on a reviewer (its ``waiting`` transcript entry)."""
    while True:
        frame = await console_events.next(AuditEvent.Action.RUN_TRANSCRIPT, run_id=run_id)
        if frame["payload"]["kind"] == "waiting":
            return frame["payload"]


async def finished(run_id, timeout=15):
    await asyncio.wait_for(runner.wait_for_run(run_id), timeout)
    return await Run.objects.aget(pk=run_id)


BRANCHING = (
    'call payout with {"order": "A-7", "amount": 500} '
    'then if "a reviewer changed amount" then call notify_owner with {"order": "A-7"} else call audit'
)


async def test_an_agent_run_reads_a_reviewers_edit_and_calls_a_different_tool(
    extra_tools, console_events, model_inputs
):
    calls = []
    extra_tools(*payout_and_owner(calls))
    run = await start_agent_run(agent={"prompt": BRANCHING})
    waited = await blocked(console_events, run.pk)
    await decisions.aresolve_request(waited["request"], ok=True, data={"args": {"amount": 50}})
    done = await finished(run.pk)

    told = "paid 50 on A-7 (a reviewer changed amount 500 → 50 before approving; the call ran with the changed values)"
    prompt_at = next(i for i, m in enumerate(model_inputs[1]) if m.get("role") == "user")
    assert model_inputs[1][prompt_at:] == [
        {"role": "user", "content": BRANCHING},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_1_1",
                    "type": "function",
                    "function": {"name": "payout", "arguments": '{"order": "A-7", "amount": 500}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1_1", "content": told},
    ]
    assert calls == [("payout", 50), ("notify_owner", "A-7")]
    assert (done.status, done.result_output) == (
        RunStatus.SUCCEEDED,
        f"Done. 2 tool calls:\n- payout: {told}\n- notify_owner: owner of A-7 told",
    )


async def test_an_agent_run_whose_call_is_declined_takes_the_declined_branch(extra_tools, console_events, model_inputs):
    """Today's refusal words (§10's ``declined/expired: <prompt>``) already hold "declined"."""
    calls = []
    extra_tools(*payout_and_owner(calls))
    script = 'call payout with {"order": "A-7", "amount": 500} then if "declined" then call notify_owner with {"order": "A-7"} else call audit'
    run = await start_agent_run(agent={"prompt": script})
    waited = await blocked(console_events, run.pk)
    await decisions.aresolve_request(waited["request"], ok=False, reason="declined", comment="not this month")
    done = await finished(run.pk)

    [read] = [m for m in model_inputs[1] if m.get("role") == "tool"]
    assert read["content"].startswith("declined/expired: Pay 500 on A-7?")
    assert calls == [("notify_owner", "A-7")]  # payout never ran, audit was not chosen
    assert done.status == RunStatus.SUCCEEDED


TOO_LARGE = {"key": "too_large", "label": "Too large", "text": "Payouts above 100 need a manager."}


async def test_an_agent_run_reads_a_reject_reason_and_the_reviewers_words_then_calls_a_different_tool(
    extra_tools, console_events, model_inputs, make_user
):
    """Issue 36's part 6: bob declines with a reject option and a comment; the model's next input holds both,
    in the console's words after §10's exact prefix, and the script's branch on the option's words calls
    notify_owner instead of paying."""
    bob = await sync_to_async(make_user)("bob", password=None)
    calls = []

    async def payout(order: str, amount: int, ctx=None):
        if getattr(ctx, "answer", None) is None:
            return pending(kind="approval", prompt=f"Pay {amount} on {order}?", data={"reject_options": [TOO_LARGE]})
        calls.append(("payout", amount))
        return f"paid {amount} on {order}"

    _, notify_owner, audit = payout_and_owner(calls)
    extra_tools(define_tool(payout, name="payout"), notify_owner, audit)
    script = (
        'call payout with {"order": "A-7", "amount": 500} '
        'then if "need a manager" then call notify_owner with {"order": "A-7"} else call audit'
    )
    run = await start_agent_run(agent={"prompt": script})
    waited = await blocked(console_events, run.pk)
    await decisions.aresolve_request(
        waited["request"], ok=False, option="too_large", comment="ask Dana to sign it", user=bob
    )
    done = await finished(run.pk)

    told = (
        "declined/expired: Pay 500 on A-7? (declined by bob: Too large. Payouts above 100 need a manager. "
        '"ask Dana to sign it") Do not make the same call again; follow the reviewer\'s reason, or ask the user '
        "how to go on."
    )
    assert [m for m in model_inputs[1] if m.get("role") == "tool"] == [
        {"role": "tool", "tool_call_id": "call_1_1", "content": told}
    ]
    assert calls == [("notify_owner", "A-7")]  # payout never ran; the model took the other path
    assert done.status == RunStatus.SUCCEEDED, done.result_output


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
    await Run.objects.filter(pk__in=run_ids).aupdate(owner="a-console-that-stopped")


async def test_a_branching_run_resumed_after_a_restart_takes_the_branch_from_the_saved_messages(
    extra_tools, console_events, model_inputs
):
    """Turn 1 done, turn 2 (skipped unless "declined") passed over, turn 3 waits on a reviewer when the process
    stops; the process that resumes it from the saved messages asks the model, which goes on with turn 4."""
    calls = []
    extra_tools(*payout_and_owner(calls))
    script = (
        'call audit with {"order": "A-7"} then if "declined" then call notify_owner '
        'then call payout with {"order": "A-7", "amount": 500} '
        'then if "a reviewer changed amount" then call notify_owner with {"order": "A-7"} else call audit'
    )
    run = await start_agent_run(agent={"prompt": script})
    waited = await blocked(console_events, run.pk)
    await stop_the_process(pytest.MonkeyPatch(), run.pk)
    await decisions.aresolve_request(waited["request"], ok=True, data={"args": {"amount": 50}})
    await runner.ensure_started()
    done = await finished(run.pk)

    assert [[m["tool_call_id"] for m in sent if m.get("role") == "tool"] for sent in model_inputs] == [
        [],
        ["call_1_1"],
        ["call_1_1", "call_2_1"],  # the first model call of the process that resumed the run
        ["call_1_1", "call_2_1", "call_3_1"],
    ]
    assert calls == [("audit", "A-7"), ("payout", 50), ("notify_owner", "A-7")]
    assert done.status == RunStatus.SUCCEEDED, done.result_output
