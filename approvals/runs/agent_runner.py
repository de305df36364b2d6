"""Agent runs: toolnexus' own client loop over the console's tools, reviewers and cancel token.

toolnexus' loop calls a tool with no context, and on a §10 retry with only
``ToolContext(answer=...)``. So each run gets its own Toolkit (``create_toolkit``
over wrappers of the console's tools) whose every call goes through
``loop_rule.call_tool`` with ``ToolContext(signal=<run token>, timeout=<remaining>,
answer=<on the retry>)``: the token, the deadline and the grace period reach every
tool the model calls, and the same token is the client's ``cancel``.

A suspension is opened the moment its tool returns it, so several in one assistant
turn are on the dashboard at once and can be answered in any order. The loop itself
resolves them the §10 way, one by one in tool-call order: each answer waits in the
database until the loop reaches it, so none is lost.

A refused call's result is §10's ``declined/expired: <prompt>``, which toolnexus' client writes itself and
passes through no hook. The model reads on after that exact prefix what happened, in the words a tool run
gets (``loop_rule.refused_result``): nobody answered, or who declined and why (a reject option, a comment,
the changes asked for); a reviewer's reply ("respond") replaces the result whole and is not an error.
``before_llm`` sends the messages with those results in the console's words (``AgentLoop.as_told``), and
the transcript and the saved resume point hold the same words.

An approval a reviewer edited re-executes its tool with the merged arguments (the client hands the wrapper
the model's own; ``answers.retry_args`` lays the approved edits over them), and the result the model reads
ends with what changed (``loop_rule.edit_notice``): the ``after_tool`` hook replaces the client's result
(``AgentLoop.told``), and the resume path, which executes the tool itself, applies the same function.

The transcript is recorded as it happens (``approvals.runs.transcript``), and the message
list is saved whenever the loop blocks on a reviewer: a console process that adopts
the run after a restart resumes from there (``resume_agent_run``), re-executing the
halted tool with the answer, with no new user turn.
"""

import asyncio
import contextvars
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from django.conf import settings
from toolnexus import Answer, Client, Request, Tool, ToolContext, Toolkit, ToolResult, create_toolkit, pending_of
from toolnexus.client import ProviderError, RunCancelled, RunResult, RunTimeout

from approvals import shapes
from approvals.models import Run, RunStatus, TranscriptEntry
from approvals.review import answers, decisions, execution, outcomes
from approvals.runs import agent_models, loop_rule, services, transcript, waiting
from approvals.runs.cancel import CancelToken
from approvals.runs.clock import RunClock
from approvals.runs.supervisor import STATUS_FOR_TRIP, RunScope, ToolStopped
from approvals.runs.toolkit import get_toolkit

logger = logging.getLogger(__name__)
Kind = TranscriptEntry.Kind

# A provider's message (its documented wire format), and one tool call in it: (call id, tool name, args).
Message = dict[str, Any]
Call = tuple[Any, Any, dict[str, Any]]

# The tool call the loop is executing, set by the before_tool hook in that call's own task.
_current_call_id: contextvars.ContextVar[str] = contextvars.ContextVar("toolnexus_console_call_id", default="")


class ResumeError(RuntimeError):
    """An adopted run cannot be resumed from what the database holds; the message says why."""


@dataclass
class Suspension:
    """A §10 suspension one of the run's tool calls returned."""

    call_id: str
    tool: str
    args: dict[str, Any]
    prompt: str
    kind: str = ""  # the request's kind: only an approval's answer edits the arguments


async def resume_agent_run(run: Run, token: CancelToken, *, elapsed: float = 0.0) -> None:
    """The coroutine that carries on an adopted waiting agent run (see ``AgentLoop.drive``)."""
    loop = AgentLoop(
        run.pk, run.agent_model, token, run.timeout, elapsed=elapsed, counts_waiting=run.timeout_counts_waiting
    )
    return await loop.drive(resume=True)


# -- message shapes (the providers' documented wire formats) -----------------------------------


def assistant_calls(message: Message, style: str) -> list[Call]:
    """The tool calls of an assistant message, as [(call id, tool name, args)]."""
    if style == "anthropic":
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        return [(b.get("id"), b.get("name"), b.get("input") or {}) for b in blocks if b.get("type") == "tool_use"]
    calls: list[Call] = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments = function.get("arguments")
        try:
            args = json.loads(arguments) if isinstance(arguments, str) else (arguments or {})
        except ValueError:
            args = {}
        calls.append((call.get("id"), function.get("name"), args if isinstance(args, dict) else {}))
    return calls


def assistant_message(response: dict[str, Any], style: str) -> Message:
    """The assistant message in a provider response (what the loop appends to its messages)."""
    if style == "anthropic":
        return {"role": "assistant", "content": response.get("content") or []}
    return (response.get("choices") or [{}])[0].get("message") or {}


def assistant_text(message: Message, style: str) -> str:
    if style == "anthropic":
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        return "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    return message.get("content") or ""


def halted_turn(messages: Sequence[Message], style: str) -> list[Call]:
    """The last assistant turn's calls that have no result in ``messages`` yet, in tool-call order."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "assistant":
            calls = assistant_calls(message, style)
            answered = set()
            for later in messages[index + 1 :]:
                if later.get("role") == "tool":
                    answered.add(later.get("tool_call_id"))
                elif style == "anthropic" and isinstance(later.get("content"), list):
                    answered |= {b.get("tool_use_id") for b in later["content"] if b.get("type") == "tool_result"}
            return [call for call in calls if call[0] not in answered]
    return []


def tool_result_messages(results: Sequence[tuple[Any, str, ToolResult]], style: str) -> list[Message]:
    """Messages that give the model these results, [(call id, tool name, ToolResult)], in order."""
    if style == "anthropic":
        blocks = [
            {"type": "tool_result", "tool_use_id": call_id, "content": result.output, "is_error": result.is_error}
            for call_id, _name, result in results
        ]
        return [{"role": "user", "content": blocks}] if blocks else []
    return [{"role": "tool", "tool_call_id": call_id, "content": result.output} for call_id, _name, result in results]


def check_answer_matches(answer: Answer, request_id: str) -> None:
    """A resumed run re-executes its halted tool only with the answer to the request it halted on."""
    if answer.id != request_id:
        raise ResumeError(
            f"The answer is for request {answer.id!r}, but the run halted on request {request_id!r}; "
            "it was not applied."
        )


def _plain(messages: list[Message]) -> list[Message]:
    """The message list as plain JSON (what the database can keep)."""
    return json.loads(json.dumps(messages, default=str))


# -- the loop ---------------------------------------------------------------------------------


class AgentLoop:
    """One agent run's state while this process executes it: the hooks, the tool wrappers, the wait_for."""

    def __init__(
        self,
        run_id: int,
        model: str,
        token: CancelToken,
        timeout: float | None,
        *,
        elapsed: float = 0.0,
        counts_waiting: bool = False,
    ) -> None:
        self.run_id = run_id
        self.model = model
        self.style = "openai"  # the model's wire style, read from settings when the loop starts
        self.token = token
        self.timeout = timeout
        # The run's own time (the model's and the tools'); waits for a person stop it (issue 35).
        self.clock = RunClock(timeout, used=elapsed, counts_waiting=counts_waiting)
        self.suspensions: dict[str, Suspension] = {}  # request id -> Suspension
        # call id -> (the client's words for its refusal, the console's words: what the model is told)
        self.refusals: dict[str, tuple[str, str]] = {}
        # call ids whose refusal is a reviewer's reply ("respond"): the model reads it as a result, not an error
        self.replied: set[str] = set()
        # call id -> what a reviewer's edits changed, in the words the model reads after the retry's result
        self.notices: dict[str, str] = {}
        self.messages: list[Message] = []  # the loop's own message list (it appends to it as it goes)
        self.turn_offset = 0  # turns already taken before a resume
        self.turn = 0
        # a resume's rebuilt messages, swapped in on the first turn
        self.replacement_messages: list[Message] | None = None
        self.running: list[str] = []  # tools executing now (for "where it stopped")
        self.where = "before the model started"
        self.toolkit: Toolkit | None = None  # this run's Toolkit, once built
        # Requests whose ok answer this loop's wait claimed, which marked their execution ours (review/execution.py).
        self.claimed: set[str] = set()

    # -- the run's Toolkit ----------------------------------------------------------------

    def scope(
        self,
        tool_name: str,
        args: dict[str, Any],
        tool_input_schema: dict[str, Any] | None = None,
        call_id: str = "",
    ) -> RunScope:
        async def on_asked(request: Request, scope: RunScope) -> None:
            await self._record(
                Kind.ASKED,
                call_id=call_id,
                tool=scope.tool,
                text=request.prompt,
                request_id=request.id,
                data={"kind": request.kind},
            )

        return RunScope(
            run_id=self.run_id,
            tool=tool_name,
            args=args,
            token=self.token,
            clock=self.clock,
            tool_input_schema=tool_input_schema,
            on_asked=on_asked,
        )

    def wrap(self, tool: Tool) -> Tool:
        """The console tool as this run calls it: same name, schema and source; the run's context injected."""

        async def execute(args: dict[str, Any] | None = None, ctx: ToolContext | None = None) -> ToolResult:
            return await self.call(tool, dict(args or {}), getattr(ctx, "answer", None))

        return Tool(
            name=tool.name,
            description=tool.description,
            input_schema=tool.input_schema,
            source=tool.source,
            execute=execute,
        )

    async def run_toolkit(self, base: Toolkit) -> Toolkit:
        return await create_toolkit(extra_tools=[self.wrap(t) for t in base.tools()], builtins=False)

    async def call(self, tool: Tool, args: dict[str, Any], answer: Answer | None) -> ToolResult:
        """One tool call under the run's token and deadline; a suspension is opened at once.

        Arguments that do not fit the tool's input schema are an error result for the model (naming each
        field) and the tool is not called; the retry after an answer re-uses the arguments already checked.
        """
        suspension = self.suspensions.get(answer.id) if answer is not None else None
        if answer is not None and suspension is None:
            return ToolResult(output=f"The console has no request {answer.id!r} for this run.", is_error=True)
        call_id = suspension.call_id if suspension else _current_call_id.get()
        if suspension is not None and answer is not None:  # the retry: with the approved edits, if any
            args = answers.retry_args(suspension.kind, args, answer.data, tool.input_schema)
        errors = services.tool_args_errors(tool.input_schema, args) if suspension is None else {}
        if errors:  # the model is told what to fix, as a person starting the run would be; the tool never runs
            said = services.args_errors_in_words(errors)
            result = ToolResult(output=f"invalid arguments for {tool.name}: {said}", is_error=True)
            await self._record(Kind.TOOL_RESULT, call_id=call_id, tool=tool.name, text=result.output, is_error=True)
            return result
        if answer is not None and not await self.take_execution(answer):
            state = await execution.aexecution_state_of(answer.id)
            result = ToolResult(output=execution.not_run_again(state), is_error=True)
            await self._record(Kind.TOOL_RESULT, call_id=call_id, tool=tool.name, text=result.output, is_error=True)
            return result
        # Someone asking from inside the call (an MCP server's elicitation) goes in the transcript too.
        scope = self.scope(tool.name, args, tool.input_schema, call_id=call_id)
        ctx = ToolContext(signal=self.token, timeout=scope.remaining(), answer=answer)
        self.running.append(tool.name)
        self._where_running()
        try:
            result = await loop_rule.call_tool(tool, args, ctx, scope)
        except ToolStopped as stopped:
            verb = {"cancelled": "cancelled", "timeout": "timed out", "shutdown": "interrupted"}[stopped.reason]
            result = ToolResult(output=f"{verb}: the tool did not stop within the grace period", is_error=True)
        except Exception as exc:  # a tool that raises gives the model an error result, never the server
            logger.exception("tool %s of run %s raised", tool.name, self.run_id)
            result = ToolResult(output=f"{type(exc).__name__}: {exc}", is_error=True)
        finally:
            self.running.remove(tool.name)
            self._where_running()
        request = pending_of(result)
        if request is not None and suspension is not None:
            result = ToolResult(output=outcomes.unresolved_output(suspension.prompt), is_error=True)  # §10: never twice
        elif request is not None:
            return await self._open_suspension(request, call_id, tool, args, result)
        if answer is not None:  # the approved retry ran: how it ended goes on its request
            await execution.arecord_outcome(answer.id, not result.is_error, result.output, actor=f"tool:{tool.name}")
        told = loop_rule.with_notice(result, self.notices.get(call_id, ""))  # the words the model will read
        await self._record(Kind.TOOL_RESULT, call_id=call_id, tool=tool.name, text=told.output, is_error=told.is_error)
        return result

    async def take_execution(self, answer: Answer) -> bool:
        """Whether this call may run the tool for ``answer``: the mark this loop's wait claimed (once), or one
        taken now; False when another call, process or channel already executed this approval."""
        if answer.id in self.claimed:
            self.claimed.discard(answer.id)
            return True
        return await execution.amark_executing(answer.id, actor=f"model:{self.model}")

    async def _open_suspension(
        self, request: Request, call_id: str, tool: Tool, args: dict[str, Any], result: ToolResult
    ) -> ToolResult:
        waiting.give_deadline(request, self.clock)
        opening = decisions.aopen_request(
            request,
            run_id=self.run_id,
            tool=tool.name,
            args=args,
            tool_input_schema=tool.input_schema,
            actor=f"tool:{tool.name}",
            resumable=True,
            mark_run_waiting=False,
        )
        try:
            await asyncio.shield(asyncio.ensure_future(opening))
        except decisions.DecisionError as exc:
            failed = ToolResult(output=f"The console could not ask a reviewer: {exc}", is_error=True)
            await self._record(Kind.TOOL_RESULT, call_id=call_id, tool=tool.name, text=failed.output, is_error=True)
            return failed
        self.suspensions[request.id] = Suspension(
            call_id=call_id, tool=tool.name, args=args, prompt=request.prompt, kind=request.kind
        )
        await self._record(
            Kind.PENDING,
            call_id=call_id,
            tool=tool.name,
            args=args,
            text=request.prompt,
            request_id=request.id,
            data={"kind": request.kind},
        )
        return result

    # -- the wait_for slot ----------------------------------------------------------------

    async def wait_for(self, request: Request) -> Answer:
        """toolnexus' ``wait_for`` for this run: block on the reviewer's answer (§10), saving the resume point."""
        suspension = self.suspensions.get(request.id)
        if suspension is None:  # not one of our tools' suspensions (e.g. a hook's): ask, tied to the run
            return await waiting.wait_in_scope(request, self.scope("", {}))
        self.where = f"while waiting for a reviewer to answer {suspension.tool}"
        await services.ablock_on_request(
            self.run_id,
            request.id,
            _plain(self.as_told(self.messages)),
            turn=self.turn or None,
            call_id=suspension.call_id,
            tool=suspension.tool,
            text=suspension.prompt,
        )
        answer = await waiting.await_answer(request.id, self.scope(suspension.tool, suspension.args))
        if answer.ok:  # the wait claimed the resume, which marked the execution this loop's (processes.claim_resume)
            self.claimed.add(request.id)
        await services.aunblock(self.run_id)
        await self._record(
            Kind.ANSWER,
            call_id=suspension.call_id,
            tool=suspension.tool,
            request_id=request.id,
            data=shapes.wire_answer(answer),
        )
        notice = await loop_rule.edit_notice(suspension.kind, answer)
        if notice:  # the retry's result will say what the reviewer changed (``told``)
            self.notices[suspension.call_id] = notice
        if not answer.ok:  # the loop will not call the tool again: this is the call's result (§10)
            refused = await loop_rule.refused_result(suspension.prompt, answer, tool=suspension.tool)
            self.refusals[suspension.call_id] = (outcomes.refused_output(suspension.prompt), refused.output)
            if not refused.is_error:
                self.replied.add(suspension.call_id)
            await self._record(
                Kind.TOOL_RESULT,
                call_id=suspension.call_id,
                tool=suspension.tool,
                text=refused.output,
                is_error=refused.is_error,
            )
        return answer

    def as_told(self, messages: list[Message]) -> list[Message]:
        """``messages`` with each refused call's result in the console's words (``wait_for``) where the client
        wrote its own: what the model reads, and what a resume starts from. A reviewer's reply is not an error
        where the wire format says so (Anthropic's ``is_error``). The other messages are kept as they are;
        ``messages`` itself is not changed."""

        def ours(call_id: Any, content: Any) -> Any:
            words = self.refusals.get(call_id)
            return words[1] if words is not None and content == words[0] else content

        def block(b: dict[str, Any]) -> dict[str, Any]:
            told = {**b, "content": ours(b.get("tool_use_id"), b.get("content"))}
            if b.get("tool_use_id") in self.replied:
                told["is_error"] = False
            return told

        told: list[Message] = []
        for message in messages:
            content = message.get("content")
            if message.get("role") == "tool":
                message = {**message, "content": ours(message.get("tool_call_id"), content)}
            elif self.style == "anthropic" and isinstance(content, list):
                blocks = [block(b) if isinstance(b, dict) and b.get("type") == "tool_result" else b for b in content]
                message = {**message, "content": blocks}
            told.append(message)
        return told

    # -- hooks (toolnexus client lifecycle) ---------------------------------------------------

    def hooks(self) -> dict[str, Any]:
        return {
            "before_llm": self.before_llm,
            "after_llm": self.after_llm,
            "before_tool": self.before_tool,
            "after_tool": self.after_tool,
        }

    async def before_llm(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """The model is sent the messages with refused calls in the console's words (``as_told``); a resumed run
        goes on from its saved messages, not from a new user turn. The client carries on with the list sent."""
        if self.replacement_messages is not None and event["turn"] == 0:
            messages, self.replacement_messages = self.replacement_messages, None
        else:
            messages = event["messages"]
        self.messages = self.as_told(messages) if self.refusals else messages
        override = {"messages": self.messages} if self.messages is not event["messages"] else None
        if self.token.is_set():
            return override  # the loop stops before this call reaches the model: nothing to show
        self.turn = self.turn_offset + event["turn"] + 1
        self.where = f"while the model was thinking (turn {self.turn})"
        await self._record(Kind.THINKING)
        return override

    async def after_llm(self, event: dict[str, Any]) -> None:
        message = assistant_message(event.get("response") or {}, self.style)
        calls = [{"id": cid, "name": name, "args": args} for cid, name, args in assistant_calls(message, self.style)]
        self.where = f"after the model's turn {self.turn}"
        await self._record(Kind.ASSISTANT, text=assistant_text(message, self.style), data={"tool_calls": calls})

    def before_tool(self, event: dict[str, Any]) -> None:
        _current_call_id.set(event.get("id") or "")  # read by this call's wrapper, in the same task

    async def after_tool(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """A retried call's result says what a reviewer changed before approving (``told``); the client
        carries on with the result returned here."""
        # The wrappers record every call they run; a tool the model made up never reaches one.
        if self.toolkit is not None and self.toolkit.get(event.get("name") or "") is None:
            result = event["result"]
            await self._record(
                Kind.TOOL_RESULT,
                call_id=event.get("id") or "",
                tool=event.get("name") or "",
                text=result.output,
                is_error=result.is_error,
            )
        told = self.told(event.get("id") or "", event["result"])
        return {"result": told} if told is not event["result"] else None

    def told(self, call_id: str, result: ToolResult) -> ToolResult:
        """The retried call's result as the model reads it: ending with what a reviewer's edits changed
        (``loop_rule.edit_notice``), once; any other result as it is."""
        return loop_rule.with_notice(result, self.notices.pop(call_id, ""))

    def _where_running(self) -> None:
        if self.running:
            names = ", ".join(sorted(set(self.running)))
            self.where = f"while {names} {'was' if len(set(self.running)) == 1 else 'were'} running"

    async def _record(self, kind: str, **fields: Any) -> dict[str, Any]:
        return await transcript.arecord(self.run_id, kind, turn=self.turn or None, **fields)

    # -- driving the run ----------------------------------------------------------------------

    def client(self, base: Toolkit) -> Client:
        """The toolnexus client for this run. It gets no ``timeout_ms``: its deadline is fixed when its loop
        starts and would count the time inside ``wait_for``; the run's own clock (``time_out``) ends the
        loop through the token, its ``cancel``, instead (docs/how-it-works.md, "Human-aware time")."""
        system = "\n\n".join(p for p in (settings.TOOLNEXUS.get("AGENT_SYSTEM_PROMPT"), base.skills_prompt()) if p)
        return agent_models.build_client(
            self.model,
            hooks=self.hooks(),
            wait_for=self.wait_for,
            system_prompt=system or None,
        )

    async def time_out(self) -> None:
        """Trip the token (reason ``timeout``) once the run's own time is used up; the client stops on it."""
        await self.clock.run_out()
        self.token.trip("timeout")

    async def drive(self, *, prompt: str | None = None, resume: bool = False) -> None:
        """Run the loop to its end and finish the run: succeeded, failed, cancelled, timed out."""
        watchdog = asyncio.ensure_future(self.time_out()) if self.clock.deadline is not None else None
        try:
            self.style = agent_models.style_of(self.model)
            base = await get_toolkit()
            toolkit = self.toolkit = await self.run_toolkit(base)
            client = self.client(base)
            cancel = cast(asyncio.Event, self.token)  # the client calls only is_set() and wait()
            if resume:
                self.replacement_messages = await self.resume_halted_turn(toolkit)
                result = await client.run("", toolkit, history=self.replacement_messages, cancel=cancel)
            else:
                assert prompt is not None, "a new agent run has a prompt"
                await self._record(Kind.PROMPT, text=prompt)
                result = await client.run(prompt, toolkit, cancel=cancel)
            if self.token.is_set():
                raise RunCancelled("run cancelled")
            await self._finish(result)
        except (RunCancelled, RunTimeout) as stop:
            if not self.token.is_set():
                self.token.trip("timeout" if isinstance(stop, RunTimeout) else "cancelled")
            await self._stopped(cast(str, self.token.reason))  # tripped just above, if not before
        except ProviderError as exc:  # the message is toolnexus' redacted one; the key is never in it
            await self._failed(f"The model's provider refused the call: {exc}")
        except ResumeError as exc:
            await self._failed(f"The run could not be resumed: {exc}", status=RunStatus.INTERRUPTED)
        except asyncio.CancelledError:
            self.token.trip("shutdown")
            raise
        except Exception as exc:
            logger.exception("agent run %s failed", self.run_id)
            await self._failed(f"{type(exc).__name__}: {exc}")
        finally:
            if watchdog is not None:
                watchdog.cancel()

    async def _finish(self, result: RunResult) -> None:
        if result.status == "done":
            status, output, is_error = RunStatus.SUCCEEDED, result.text, False
        else:  # "incomplete": the model used every turn and never gave a final answer
            status, is_error = RunStatus.FAILED, True
            output = f"stopped: the model used all {result.turns} turns without a final answer"
        await self._record(
            Kind.FINISHED,
            text=output,
            data={
                "status": result.status,
                "turns": result.turns,
                "tool_calls": result.tool_call_count,
                "usage": result.usage,
            },
        )
        await services.afinish_run(self.run_id, status, output, is_error)

    async def _stopped(self, reason: str) -> None:
        verb = {"cancelled": "cancelled", "timeout": "timed out", "shutdown": "interrupted"}[reason]
        if reason == "timeout" and self.timeout is not None:
            verb = f"timed out after {self.timeout:g}s"
        output = f"{verb} {self.where}"
        await self._record(Kind.STOPPED, text=output, data={"reason": reason})
        await services.afinish_run(self.run_id, STATUS_FOR_TRIP[reason], output, True)

    async def _failed(self, output: str, status: str = RunStatus.FAILED) -> None:
        await self._record(Kind.STOPPED, text=output, data={"reason": "error"})
        await services.afinish_run(self.run_id, status, output, True)

    # -- resuming after a restart ---------------------------------------------------------------

    async def resume_halted_turn(self, toolkit: Toolkit) -> list[Message]:
        """The saved messages plus every result of the halted turn, awaiting the answers still to come.

        Each call of the turn that has no result in the saved messages gets, in order:
        its recorded result if it finished; for a suspension, the reviewer's answer
        then the tool re-executed with it once (ok) or ``declined/expired`` (not ok).
        """
        run, _open = await services.aresume_point(self.run_id)
        if not run.agent_messages:
            raise ResumeError("no saved messages to resume from")
        messages = list(run.agent_messages)
        self.messages = messages  # what a wait below saves again as the resume point
        self.turn_offset = sum(1 for m in messages if m.get("role") == "assistant")
        self.turn = self.turn_offset
        entries = await transcript.aentries_for_resume(self.run_id)
        last_turn = max((e.seq for e in entries if e.kind == Kind.ASSISTANT), default=0)
        this_turn = [e for e in entries if e.seq > last_turn]
        await self._record(Kind.RESUMED, text="A console process picked this run up after a restart.")
        results: list[tuple[Any, str, ToolResult]] = []
        for call_id, name, args in halted_turn(messages, self.style):
            done = [e for e in this_turn if e.call_id == call_id and e.kind == Kind.TOOL_RESULT]
            asked = [e for e in this_turn if e.call_id == call_id and e.kind == Kind.PENDING]
            if done:
                result = ToolResult(output=done[-1].text, is_error=bool(done[-1].is_error))
            elif asked and toolkit.get(name) is not None:
                result = await self._resume_suspension(toolkit, asked[-1], name, args)
            else:
                result = ToolResult(output="not run: the console restarted before this call ran", is_error=True)
                await self._record(Kind.TOOL_RESULT, call_id=call_id, tool=name, text=result.output, is_error=True)
            results.append((call_id, name, result))
        return messages + tool_result_messages(results, self.style)

    async def _resume_suspension(
        self, toolkit: Toolkit, pending_entry: TranscriptEntry, name: str, args: dict[str, Any]
    ) -> ToolResult:
        request_id = cast(str, pending_entry.request_id)  # a pending entry names its request
        kind = (pending_entry.data or {}).get("kind", "")
        self.suspensions[request_id] = Suspension(
            call_id=pending_entry.call_id, tool=name, args=args, prompt=pending_entry.text, kind=kind
        )
        answer = await self.wait_for(Request(id=request_id, kind=kind, prompt=pending_entry.text))
        check_answer_matches(answer, request_id)
        if not answer.ok:  # in the words wait_for recorded (nobody answered, a person's refusal or reply)
            call_id = pending_entry.call_id
            return ToolResult(output=self.refusals[call_id][1], is_error=call_id not in self.replied)
        result = await toolkit.execute(name, args, ToolContext(answer=answer))
        return self.told(pending_entry.call_id, result)  # as after_tool tells the model on the loop's own path
