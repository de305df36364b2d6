"""The scripted model's branches (issue 36, part 6): a script that takes another path on what a tool result says.

The language (``if "<text>" then call <tool>``, ``else``/``otherwise``), the errors that say what to change,
turns skipped when their condition does not hold, and the turn to take derived from the messages alone. Then
an agent run that reads a reviewer's words and calls a different tool: the exact input the model is sent next.
"""

import asyncio
import copy

import pytest
from toolnexus import Answer, define_tool, pending

from approvals.models import AuditEvent, Run, RunStatus
from approvals.review import decisions
from approvals.runs import agent_models, runner, waiting
from approvals.runs.runner import start_agent_run
from approvals.runs.scripted_model import ScriptError, Turn, parse_script, planned_tools, scripted_generate
from approvals.runs.supervisor import supervisors_by_loop

PROMPT = 'call refund with {"amount": 500} then if "declined" then call notify_owner else call audit then call wrap_up'


def assistant(number, *names):
    """The assistant message of the model's ``number``-th turn asking for ``names`` (OpenAI wire shape)."""
    calls = [{"id": f"call_{number}_{i}", "function": {"name": n, "arguments": "{}"}} for i, n in enumerate(names, 1)]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def result(call_id, content):
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def next_calls(prompt, *after):
    """The tool names the model asks for next (or its final text) after these messages."""
    reply = scripted_generate({"messages": [{"role": "user", "content": prompt}, *after]})
    return [(c["id"], c["name"]) for c in reply["tool_calls"]] if "tool_calls" in reply else reply["content"]


# -- the language ------------------------------------------------------------------------------------------


def test_the_issues_example_reads_as_a_call_then_a_conditional_turn():
    assert parse_script('call refund with {"amount": 500} then if "declined" then call notify_owner') == [
        Turn(calls=[("refund", {"amount": 500})]),
        Turn(calls=[("notify_owner", {})], condition="declined"),
    ]


def test_a_condition_has_an_else_or_otherwise_branch_of_several_calls():
    script = 'call a then If "said \\"no\\"" then call b and call c with {"x": 1} otherwise call d, then call e'
    assert parse_script(script) == [
        Turn(calls=[("a", {})]),
        Turn(calls=[("b", {}), ("c", {"x": 1})], condition='said "no"', otherwise=[("d", {})]),
        Turn(calls=[("e", {})]),
    ]
    assert parse_script('call a then if "x" then call b else call c')[1].otherwise == [("c", {})]
    assert planned_tools(script) == ["a", "b", "c", "d", "e"]


def test_think_goes_with_a_conditional_turn():
    assert parse_script('call a then if "x" then think 2 call b') == [
        Turn(calls=[("a", {})]),
        Turn(calls=[("b", {})], think_seconds=2.0, condition="x"),
    ]


@pytest.mark.parametrize(
    "script, message",
    [
        (
            "call a then if declined then call b",
            "'if' needs the text to look for in double quotes, as in "
            'if "declined" then call notify_owner (at character 16).',
        ),
        ("call a then if “declined” then call b", "'if' needs the text to look for in double quotes"),
        ('call a then if "declined', "The text after 'if' is quoted as JSON writes a string"),
        ('call a then if "  " then call b', "'if' needs some text to look for between its quotes (at character 16)."),
        ('call a then if "declined" call b', "Write 'then' and the call to make after 'if \"declined\"', as in"),
        ('call a then if "declined" then', "'if \"declined\" then' needs a call after it, as in"),
        ('call a then if "declined" then then call b', "'if \"declined\" then' needs a call after it"),
        ('call a if "declined" then call b', "'if' starts a turn of its own: put 'then' before it"),
        ("call a else call b", "'else' belongs to the 'if' its turn starts with, once"),
        ('call a then if "x" then call b else call c otherwise call d', "'otherwise' belongs to the 'if'"),
        ('call a then if "x" then call b else then call c', "The 'else' of 'if \"x\"' needs a call after it"),
        ('call a then if "x" then else call c', "'if \"x\" then' needs a call after it"),
    ],
)
def test_a_branch_the_model_cannot_follow_is_refused_saying_what_to_change(script, message):
    with pytest.raises(ScriptError) as refused:
        parse_script(script)
    assert str(refused.value).startswith(message)


# -- taking and skipping turns, from the messages alone -------------------------------------------------------


def test_a_condition_that_holds_takes_its_calls_matching_without_regard_to_case():
    refund = [assistant(1, "refund"), result("call_1_1", "DECLINED/expired: Refund 500?")]
    assert next_calls(PROMPT, *refund) == [("call_2_1", "notify_owner")]


def test_a_condition_that_does_not_hold_takes_the_else_calls():
    refund = [assistant(1, "refund"), result("call_1_1", "refunded 500")]
    assert next_calls(PROMPT, *refund) == [("call_2_1", "audit")]


def test_a_turn_whose_condition_does_not_hold_is_skipped():
    script = 'call a then if "no" then call b then if "yes" then call c then call d'
    said_yes = [assistant(1, "a"), result("call_1_1", "yes")]
    # b is skipped; c's condition is read against the same results, a's.
    assert next_calls(script, *said_yes) == [("call_2_1", "c")]
    then_c = [*said_yes, assistant(2, "c"), result("call_2_1", "C!")]
    assert next_calls(script, *then_c) == [("call_3_1", "d")]
    done = [*then_c, assistant(3, "d"), result("call_3_1", "D!")]
    assert next_calls(script, *done) == "Done. 3 tool calls:\n- a: yes\n- c: C!\n- d: D!"


def test_the_condition_reads_only_the_results_after_the_previous_turn():
    script = 'call a then call b then if "first" then call c'
    messages = [assistant(1, "a"), result("call_1_1", "first"), assistant(2, "b"), result("call_2_1", "second")]
    assert next_calls(script, *messages) == "Done. 2 tool calls:\n- a: first\n- b: second"


def test_a_condition_reads_every_result_of_a_turn_of_several_calls():
    script = 'call a and call b then if "b said no" then call c'
    messages = [assistant(1, "a", "b"), result("call_1_1", "fine"), result("call_1_2", "B said NO")]
    assert next_calls(script, *messages) == [("call_2_1", "c")]
    neither = [assistant(1, "a", "b"), result("call_1_1", "fine"), result("call_1_2", "B said yes")]
    assert next_calls(script, *neither) == "Done. 2 tool calls:\n- a: fine\n- b: B said yes"


def test_the_same_messages_give_the_same_next_turn_however_often_asked():
    """A run resumed from saved messages goes on where it stopped: the next turn is a function of them alone."""
    script = 'call a then if "skip me" then call b then if "go" then call c else call d then call e'
    messages = [assistant(1, "a"), result("call_1_1", "go on")]
    first = scripted_generate({"messages": [{"role": "user", "content": script}, *messages]})
    again = scripted_generate(copy.deepcopy({"messages": [{"role": "user", "content": script}, *messages]}))
    assert first == again == {"tool_calls": [{"id": "call_2_1", "name": "c", "arguments": {}}]}
    # After c, the replay knows b was skipped and c taken: e comes next, never d.
    later = [*messages, assistant(2, "c"), result("call_2_1", "C!")]
    assert next_calls(script, *later) == [("call_3_1", "e")]


def test_a_first_turn_with_a_condition_has_read_nothing():
    assert next_calls('if "x" then call a else call b') == [("call_1_1", "b")]
    assert next_calls('if "x" then call a then call c') == [("call_1_1", "c")]


# -- an agent run that reads a reviewer's words and calls a different tool --------------------------------------


@pytest.fixture
def model_inputs(monkeypatch):
    """Every message list the scripted model is sent, as it was sent (the real model answers)."""
    sent = []

    def recording_generate(request):
        sent.append(copy.deepcopy(request.get("messages") or []))
        return scripted_generate(request)

    monkeypatch.setattr(agent_models, "scripted_generate", recording_generate)
    return sent


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


@pytest.mark.django_db(transaction=True)
async def test_an_agent_run_reads_a_reviewers_edit_and_calls_a_different_tool(
    extra_tools, console_events, model_inputs, stop_leftover_runs
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


@pytest.mark.django_db(transaction=True)
async def test_an_agent_run_whose_call_is_declined_takes_the_declined_branch(
    extra_tools, console_events, model_inputs, stop_leftover_runs
):
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


@pytest.mark.django_db(transaction=True)
async def test_a_branching_run_resumed_after_a_restart_takes_the_branch_from_the_saved_messages(
    extra_tools, console_events, model_inputs, stop_leftover_runs
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
