"""The scripted model's branches (issue 36, part 6): a script that takes another path on what a tool result says.

The language (``if "<text>" then call <tool>``, ``else``/``otherwise``), the errors that say what to change,
turns skipped when their condition does not hold, and the turn to take derived from the messages alone.
Agent runs that take a branch: tests/runs/test_agent_branches.py.
"""

import copy

import pytest

from approvals.runs.scripted_model import ScriptError, Turn, parse_script, planned_tools, scripted_generate

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
        ('call a then if "declined', "The text after 'if' is quoted as JSON writes a string"),
        ('call a then if "  " then call b', "'if' needs some text to look for between its quotes (at character 16)."),
        ('call a then if "declined" call b', "Write 'then' and the call to make after 'if \"declined\"', as in"),
        ('call a then if "declined" then', "'if \"declined\" then' needs a call after it, as in"),
        ('call a then if "declined" then then call b', "'if \"declined\" then' needs a call after it"),
        ('call a if "declined" then call b', "'if' starts a turn of its own: put 'then' before it"),
        ("call a else call b", "'else' belongs to the 'if' its turn starts with, once"),
        ('call a then if "x" then call b else call c otherwise call d', "'otherwise' belongs to the 'if'"),
        ('call a then if "x" then else call c', "'if \"x\" then' needs a call after it"),
    ],
)
def test_a_branch_the_model_cannot_follow_is_refused_saying_what_to_change(script, message):
    with pytest.raises(ScriptError) as refused:
        parse_script(script)
    assert str(refused.value).startswith(message)


@pytest.mark.parametrize(
    "script, turns",
    [
        # "if" with no quoted text after it, "else" / "otherwise" with no "call": words of the prose, ignored.
        ("call deploy and if it fails call notify", [Turn(calls=[("deploy", {}), ("notify", {})])]),
        ("call a then if declined then call b", [Turn(calls=[("a", {})]), Turn(calls=[("b", {})])]),
        ("call a then if “declined” then call b", [Turn(calls=[("a", {})]), Turn(calls=[("b", {})])]),
        ("call deploy, or else nothing", [Turn(calls=[("deploy", {})])]),
        ("call deploy otherwise ask me then call notify", [Turn(calls=[("deploy", {})]), Turn(calls=[("notify", {})])]),
    ],
)
def test_if_else_and_otherwise_are_prose_unless_a_quote_or_a_call_follows(script, turns):
    assert parse_script(script) == turns


def test_if_with_a_quote_and_else_with_a_call_are_the_scripts():
    assert parse_script('call a then if "no" then call b else call c') == [
        Turn(calls=[("a", {})]),
        Turn(calls=[("b", {})], condition="no", otherwise=[("c", {})]),
    ]
    with pytest.raises(ScriptError, match="'otherwise' belongs to the 'if'"):
        parse_script("call deploy otherwise call notify")


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


# -- refused before the run starts -----------------------------------------------------------------------------


def test_a_branch_is_checked_before_the_run_starts():
    from approvals.runs.services import RunInputError, validate_agent_input

    with pytest.raises(RunInputError, match=r"would call 'nope', which is not a tool here"):
        validate_agent_input({"prompt": 'call a then if "x" then call b else call nope'}, None, {"a", "b"})
    with pytest.raises(RunInputError, match=r"^The scripted model cannot follow this prompt: The text after 'if'"):
        validate_agent_input({"prompt": 'call a then if "declined then call b'}, None, {"a", "b"})
