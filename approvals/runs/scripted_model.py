"""The built-in "scripted" model: a deterministic in-process model for the demo and the tests.

It needs no key and no network: ``create_in_process_client(generate=scripted_generate)``.
It reads its instructions from the user's prompt:

    call <tool>                        ask for one tool call with no arguments
    call <tool> with {<JSON object>}   ask for one tool call with these arguments
    then                               the calls after it come in the model's next turn
    think <seconds>                    take this long over the turn (at most 30 s)
    if "<text>" then call <tool> ...   a turn taken only when a tool result the model read
                                       after its previous turn contains the text
    else call <tool> ...               (or ``otherwise``) the turn's calls when it does not

Calls in the same turn (not separated by ``then``) arrive in ONE assistant message,
so toolnexus runs them concurrently. Any other words are ignored (``if``, ``else`` and
``otherwise`` are the script's), so a prompt can read like a sentence:
``call deploy with {"service": "web"} and call refund then call crunch``.
``if`` is the script's only when quoted text follows it, and ``else``/``otherwise`` only when
``call`` does: in ``call deploy and if it fails call notify`` they are words of the prose.

A condition is quoted text (JSON string syntax, so ``\\"`` and ``\\u00e9`` work), matched without
regard to case against the tool results the model read after its previous turn: the console's
words for a refusal, a reviewer's edit notice, a tool's own output. ``if`` starts a turn; its
``then`` belongs to it, and the next ``then`` starts the turn after it:
``call refund with {"amount": 500} then if "declined" then call notify_owner else call audit``.
A turn whose condition does not hold and that has no ``else`` is skipped: the model goes on with
the next turn, against the same results.

Once every turn is used up the model answers with a summary of each tool result,
in order: ``Done. 2 tool calls:`` then ``- deploy: deployed to staging`` and so on.
"""

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

SCRIPTED_MODEL = "scripted"
MAX_THINK_SECONDS = 30.0

_WORD = re.compile(r"\S+")
_TOOL_NAME = re.compile(r"[A-Za-z0-9_\-.]+")
_EXAMPLE = 'if "declined" then call notify_owner'

# One tool call a turn asks for: (tool name, args dict).
Call = tuple[str, dict[str, Any]]


class ScriptError(ValueError):
    """A prompt the scripted model cannot follow; the message says what to change."""


@dataclass
class Turn:
    calls: list[Call] = field(default_factory=list)
    think_seconds: float = 0.0
    # if "<text>": the calls are asked only when a tool result read after the previous turn contains it
    condition: str | None = None
    otherwise: list[Call] = field(default_factory=list)  # else: the calls asked when it does not

    def calls_after(self, results: Sequence[str]) -> list[Call]:
        """The calls this turn asks for after the model read ``results`` ([] when it is skipped)."""
        if self.condition is None:
            return self.calls
        wanted = self.condition.casefold()
        return self.calls if any(wanted in result.casefold() for result in results) else self.otherwise


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _call(text: str, pos: int) -> tuple[Call, int]:
    """The ``<tool> [with {...}]`` after ``call`` at ``pos``, and where it ends."""
    pos = _skip_space(text, pos)
    name = _TOOL_NAME.match(text, pos)
    if name is None:
        raise ScriptError(f"'call' needs a tool name after it (at character {pos + 1}).")
    tool = name.group().rstrip(".")
    pos += len(tool)
    args: dict[str, Any] = {}
    after = _skip_space(text, pos)
    if re.match(r"with\b", text[after:], re.IGNORECASE):
        start = _skip_space(text, after + 4)
        try:
            args, pos = json.JSONDecoder().raw_decode(text, start)
        except json.JSONDecodeError as exc:
            raise ScriptError(
                f"After 'call {tool} with' the scripted model expects a JSON object such as "
                f'{{"service": "web"}}: {exc.msg} at character {exc.pos + 1}.'
            ) from None
        if not isinstance(args, dict):
            raise ScriptError(f"The arguments of 'call {tool}' must be a JSON object, not {json.dumps(args)}.")
    return (tool, args), pos


def _condition(text: str, pos: int) -> tuple[str, int]:
    """The quoted text after ``if`` at ``pos``, and where it ends."""
    pos = _skip_space(text, pos)
    if not text.startswith('"', pos):
        raise ScriptError(
            f"'if' needs the text to look for in double quotes, as in {_EXAMPLE} (at character {pos + 1})."
        )
    try:
        condition, end = json.JSONDecoder().raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        raise ScriptError(
            f"The text after 'if' is quoted as JSON writes a string (\\\" for a quote inside it): {exc.msg} "
            f"(at character {exc.pos + 1})."
        ) from None
    if not condition.strip():
        raise ScriptError(f"'if' needs some text to look for between its quotes (at character {pos + 1}).")
    return condition, end


def _next_word(text: str, pos: int) -> str:
    """The word after ``pos``, lower case and without the punctuation around it ("" at the end)."""
    word = _WORD.match(text, _skip_space(text, pos))
    return word.group().lower().strip(",.;:") if word is not None else ""


def _quoted(condition: str | None) -> str:
    return f"if {json.dumps(condition, ensure_ascii=False)}"


def _check_turn(turn: Turn, in_else: bool) -> None:
    """A conditional turn is whole: calls after its ``then``, and after its ``else`` if it has one."""
    if turn.condition is not None and not turn.calls:
        raise ScriptError(f"'{_quoted(turn.condition)} then' needs a call after it, as in {_EXAMPLE}.")
    if in_else and not turn.otherwise:
        raise ScriptError(f"The 'else' of '{_quoted(turn.condition)}' needs a call after it (else call <tool>).")


def parse_script(prompt: str | None) -> list[Turn]:
    """The turns a prompt asks for, as a list of Turn; raises ScriptError naming what is wrong."""
    text = prompt or ""
    turns = [Turn()]
    in_else = False  # the calls go to the turn's else branch
    pos = 0
    while True:
        pos = _skip_space(text, pos)
        word = _WORD.match(text, pos)
        if word is None:
            break
        token = word.group().lower().strip(",.;:")
        at = pos + 1
        pos = word.end()
        turn = turns[-1]
        if token == "then":
            _check_turn(turn, in_else)
            if turn.calls:  # a turn that only thinks keeps going: the pause belongs to its calls
                turns.append(Turn())
                in_else = False
        elif token == "if" and text.startswith('"', _skip_space(text, pos)):  # else a word of the prose
            if turn.calls or turn.condition is not None:
                raise ScriptError(
                    f"'if' starts a turn of its own: put 'then' before it, as in call refund then {_EXAMPLE} "
                    f"(at character {at})."
                )
            turn.condition, pos = _condition(text, pos)
            pos = _skip_space(text, pos)
            then = _WORD.match(text, pos)
            if then is None or then.group().lower().strip(",.;:") != "then":
                raise ScriptError(
                    f"Write 'then' and the call to make after '{_quoted(turn.condition)}', as in {_EXAMPLE} "
                    f"(at character {pos + 1})."
                )
            pos = then.end()
        elif token in ("else", "otherwise") and _next_word(text, pos) == "call":  # else a word of the prose
            if turn.condition is None or in_else:
                raise ScriptError(
                    f"'{token}' belongs to the 'if' its turn starts with, once: {_EXAMPLE} else call <tool> "
                    f"(at character {at})."
                )
            _check_turn(turn, in_else)
            in_else = True
        elif token == "think":
            pos = _skip_space(text, pos)
            number = re.match(r"\d+(\.\d+)?", text[pos:])
            if number is None:
                raise ScriptError(f"'think' needs a number of seconds after it (at character {pos + 1}).")
            turn.think_seconds = min(float(number.group()), MAX_THINK_SECONDS)
            pos += number.end()
        elif token == "call":
            call, pos = _call(text, pos)
            (turn.otherwise if in_else else turn.calls).append(call)
    _check_turn(turns[-1], in_else)
    return [turn for turn in turns if turn.calls or turn.think_seconds]


def planned_tools(prompt: str | None) -> list[str]:
    """Every tool name the prompt would call, in order (to check them before the run starts)."""
    return [name for turn in parse_script(prompt) for name, _ in turn.calls + turn.otherwise]


def _conversation(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """The user's prompt and the messages after it (the tool calls and results of this run)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "user" and isinstance(message.get("content"), str) and message["content"]:
            return message["content"], messages[index + 1 :]
    return "", list(messages)


def _summary(after: Sequence[dict[str, Any]]) -> str:
    names: dict[str | None, str] = {}  # tool call id -> tool name
    lines: list[str] = []
    for message in after:
        for call in message.get("tool_calls") or []:
            names[call.get("id")] = (call.get("function") or {}).get("name", "?")
        if message.get("role") == "tool":
            lines.append(f"- {names.get(message.get('tool_call_id'), '?')}: {message.get('content') or ''}")
    if not lines:
        return (
            "Nothing to do: the scripted model only calls tools written in the prompt as "
            '`call <tool> with {...}` (see docs/tools.md, "Models").'
        )
    return f"Done. {len(lines)} tool call{'s' if len(lines) != 1 else ''}:\n" + "\n".join(lines)


def _text(content: object) -> str:
    """A tool result's text: a string as it is, a list of content parts' texts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _next_index(turns: Sequence[Turn], start: int, results: Sequence[str]) -> int | None:
    """The first turn from ``start`` the model takes after reading ``results``: one that asks for calls, or the
    last one that only thinks; None when the script is done (the turns whose condition does not hold skipped)."""
    for index in range(start, len(turns)):
        if turns[index].calls_after(results) or not turns[index].calls:
            return index
    return None


def _position(turns: Sequence[Turn], after: Sequence[dict[str, Any]]) -> tuple[int, list[str]]:
    """Where the script stands after the messages ``after`` the prompt, replayed from the start: the first
    turn not taken yet, and the tool results the model read after its last turn."""
    start = 0
    results: list[str] = []
    for message in after:
        if message.get("role") == "assistant" and message.get("tool_calls"):
            taken = _next_index(turns, start, results)
            start, results = (len(turns) if taken is None else taken + 1), []
        elif message.get("role") == "tool":
            results.append(_text(message.get("content")))
    return start, results


def scripted_generate(request: dict[str, Any]) -> dict[str, Any]:
    """toolnexus' in-process ``generate``: the next turn of the script, or the summary once it is done.

    Deterministic: the turn to take is derived from the messages alone (the script replayed over the
    assistant turns and the tool results since the prompt, each condition against the results read before
    its turn), so a run resumed from a saved transcript carries on exactly where it stopped.
    """
    prompt, after = _conversation(request.get("messages") or [])
    try:
        turns = parse_script(prompt)
    except ScriptError as exc:
        return {"content": f"The scripted model could not read the prompt: {exc}"}
    start, results = _position(turns, after)
    taken = _next_index(turns, start, results)
    if taken is not None:
        turn = turns[taken]
        if turn.think_seconds:
            time.sleep(turn.think_seconds)  # generate runs in the client's worker thread
        calls = turn.calls_after(results)
        if calls:
            done = sum(1 for m in after if m.get("role") == "assistant" and m.get("tool_calls"))
            return {
                "tool_calls": [
                    {"id": f"call_{done + 1}_{index + 1}", "name": name, "arguments": args}
                    for index, (name, args) in enumerate(calls)
                ]
            }
    return {"content": _summary(after)}
