"""The built-in "scripted" model: a deterministic in-process model for the demo and the tests.

It needs no key and no network: ``create_in_process_client(generate=scripted_generate)``.
It reads its instructions from the user's prompt:

    call <tool>                        ask for one tool call with no arguments
    call <tool> with {<JSON object>}   ask for one tool call with these arguments
    then                               the calls after it come in the model's next turn
    think <seconds>                    take this long over the turn (at most 30 s)

Calls in the same turn (not separated by ``then``) arrive in ONE assistant message,
so toolnexus runs them concurrently. Any other words are ignored, so a prompt can read
like a sentence: ``call deploy with {"service": "web"} and call refund then call crunch``.
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


class ScriptError(ValueError):
    """A prompt the scripted model cannot follow; the message says what to change."""


@dataclass
class Turn:
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # [(tool name, args dict)]
    think_seconds: float = 0.0


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def parse_script(prompt: str | None) -> list[Turn]:
    """The turns a prompt asks for, as a list of Turn; raises ScriptError naming what is wrong."""
    text = prompt or ""
    turns = [Turn()]
    decoder = json.JSONDecoder()
    pos = 0
    while True:
        pos = _skip_space(text, pos)
        word = _WORD.match(text, pos)
        if word is None:
            break
        token = word.group().lower().strip(",.;:")
        pos = word.end()
        if token == "then":
            if turns[-1].calls:  # a turn that only thinks keeps going: the pause belongs to its calls
                turns.append(Turn())
        elif token == "think":
            pos = _skip_space(text, pos)
            number = re.match(r"\d+(\.\d+)?", text[pos:])
            if number is None:
                raise ScriptError(f"'think' needs a number of seconds after it (at character {pos + 1}).")
            turns[-1].think_seconds = min(float(number.group()), MAX_THINK_SECONDS)
            pos += number.end()
        elif token == "call":
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
                    args, end = decoder.raw_decode(text, start)
                except json.JSONDecodeError as exc:
                    raise ScriptError(
                        f"After 'call {tool} with' the scripted model expects a JSON object such as "
                        f'{{"service": "web"}}: {exc.msg} at character {exc.pos + 1}.'
                    ) from None
                if not isinstance(args, dict):
                    raise ScriptError(f"The arguments of 'call {tool}' must be a JSON object, not {json.dumps(args)}.")
                pos = end
            turns[-1].calls.append((tool, args))
    return [turn for turn in turns if turn.calls or turn.think_seconds]


def planned_tools(prompt: str | None) -> list[str]:
    """Every tool name the prompt would call, in order (to check them before the run starts)."""
    return [name for turn in parse_script(prompt) for name, _ in turn.calls]


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


def scripted_generate(request: dict[str, Any]) -> dict[str, Any]:
    """toolnexus' in-process ``generate``: the next turn of the script, or the summary once it is done.

    Deterministic: the turn is counted from the messages themselves (assistant
    messages with tool calls since the prompt), so a run resumed from a saved
    transcript carries on exactly where it stopped.
    """
    prompt, after = _conversation(request.get("messages") or [])
    try:
        turns = parse_script(prompt)
    except ScriptError as exc:
        return {"content": f"The scripted model could not read the prompt: {exc}"}
    done = sum(1 for m in after if m.get("role") == "assistant" and m.get("tool_calls"))
    if done < len(turns):
        turn = turns[done]
        if turn.think_seconds:
            time.sleep(turn.think_seconds)  # generate runs in the client's worker thread
        if turn.calls:
            return {
                "tool_calls": [
                    {"id": f"call_{done + 1}_{index + 1}", "name": name, "arguments": args}
                    for index, (name, args) in enumerate(turn.calls)
                ]
            }
    return {"content": _summary(after)}
