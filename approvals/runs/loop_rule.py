"""Executing a tool run under the §10 loop rule: call the tool under the run's token and deadline; a
suspension persists its Request and waits; ok re-executes the same call once with ``ctx.answer``; a
second suspension is unresolved; ok=false is declined/expired without running the tool again.

An approval a reviewer edited re-executes with the merged arguments (the request's, the approved edits over
them: ``answers.retry_args``), and its result ends with what changed (``edit_notice``), in tool runs and agent
runs alike.
"""

import asyncio
import contextvars
import logging
from collections.abc import Coroutine
from dataclasses import replace
from typing import Any, cast

from django.conf import settings
from toolnexus import Answer, Tool, ToolContext, ToolResult, pending_of

from approvals import selectors
from approvals.models import Request, RunStatus
from approvals.review import answers, execution, outcomes
from approvals.runs import services
from approvals.runs.cancel import CancelToken
from approvals.runs.clock import RunClock
from approvals.runs.supervisor import STATUS_FOR_TRIP, RunScope, ToolStopped, current_scope, supervisor
from approvals.runs.toolkit import get_toolkit
from approvals.runs.waiting import await_answer, wait_in_scope, withdraw_if_open

logger = logging.getLogger(__name__)


async def execute_run(
    run_id: int,
    tool_name: str,
    args: dict[str, Any],
    timeout: float | None,
    token: CancelToken,
    *,
    resume_request: Request | None = None,
    elapsed: float = 0.0,
    counts_waiting: bool = False,
) -> None:
    """A tool run: the §10 loop rule from the first call, or, for a run adopted after a
    restart, from the wait on ``resume_request`` (the suspension the tool already returned).

    ``elapsed``: the time the run already used before a restart (its own time, or its wall time when
    ``counts_waiting``: the old behaviour, where the wait for a person counts against ``timeout``)."""
    clock = RunClock(timeout, used=elapsed, counts_waiting=counts_waiting)
    scope = RunScope(run_id=run_id, tool=tool_name, args=args, token=token, clock=clock)
    current_scope.set(scope)
    try:
        toolkit = await get_toolkit()
        tool = toolkit.get(tool_name)
        if tool is None:
            await services.afinish_run(run_id, RunStatus.FAILED, f"Unknown tool: {tool_name}", True)
            return
        scope.tool_input_schema = tool.input_schema
        if resume_request is None:
            result = await _apply_loop_rule(tool, args, scope)
        else:
            answer = await await_answer(resume_request.id, scope)  # claims the resume, and the execution
            result = await retry_with_answer(
                tool, args, resume_request.prompt, answer, scope, kind=resume_request.kind, claimed=True
            )
        status = (
            STATUS_FOR_TRIP[cast(str, token.reason)]  # set once tripped
            if token.is_set()
            else (RunStatus.FAILED if result.is_error else RunStatus.SUCCEEDED)
        )
        await services.afinish_run(
            run_id,
            status,
            result.output,
            result.is_error,
            executed=scope.executing,
            executed_output=scope.executed_output,
        )
    except ToolStopped as stopped:
        output = {
            "cancelled": "cancelled: the tool did not stop within the grace period",
            "timeout": f"timed out after {timeout:g}s" if timeout is not None else "timed out",
            "shutdown": "interrupted: the console is shutting down",
        }[stopped.reason]
        await services.afinish_run(
            run_id,
            STATUS_FOR_TRIP[stopped.reason],
            output,
            True,
            executed=scope.executing,
            executed_output=scope.executed_output,
        )
    except asyncio.CancelledError:
        token.trip("shutdown")
        raise
    except Exception as exc:  # a tool that raises fails its run, never the server
        logger.exception("run %s failed", run_id)
        output = f"{type(exc).__name__}: {exc}"
        await services.afinish_run(
            run_id, RunStatus.FAILED, output, True, executed=scope.executing, executed_output=scope.executed_output
        )


async def _apply_loop_rule(tool: Tool, args: dict[str, Any], scope: RunScope) -> ToolResult:
    """§10: a suspension waits; ok re-executes once with ctx.answer; a second suspension is unresolved."""
    result = await call_tool(tool, args, ToolContext(signal=scope.token, timeout=scope.remaining()), scope)
    request = pending_of(result)
    if request is None:
        return result
    answer = await wait_in_scope(request, scope, resumable=True)  # claims the resume, and the execution
    return await retry_with_answer(tool, args, request.prompt, answer, scope, kind=request.kind, claimed=True)


async def retry_with_answer(
    tool: Tool,
    args: dict[str, Any],
    prompt: str,
    answer: Answer,
    scope: RunScope,
    *,
    kind: str,
    claimed: bool = False,
) -> ToolResult:
    """§10 after the wait: ok re-executes the tool once with ctx.answer (a second suspension is
    unresolved); ok=false is declined/expired without running it again.

    ``kind``: the request's. An approval's edits are merged into the arguments of the retry, and its result
    ends with what they changed (``edit_notice``).

    At most once per approval (review/execution.py): ``claimed`` says this run's wait claimed the resume, which
    marked the request executing in the same statement; anyone else takes the mark here first, and when it is
    taken already (another process or channel resumed the same answer) the tool is not run again."""
    if not answer.ok:
        return await refused_result(prompt, answer, tool=tool.name)
    if not claimed and not await execution.amark_executing(answer.id, actor=f"tool:{tool.name}"):
        state = await execution.aexecution_state_of(answer.id)
        return ToolResult(output=execution.not_run_again(state), is_error=True)
    scope.executing = answer.id
    retry_ctx = ToolContext(signal=scope.token, timeout=scope.remaining(), answer=answer)
    result = await call_tool(tool, answers.retry_args(kind, args, answer.data, tool.input_schema), retry_ctx, scope)
    if pending_of(result) is not None:
        result = ToolResult(output=outcomes.unresolved_output(prompt), is_error=True)
    scope.executed_output = result.output
    return with_notice(result, await edit_notice(kind, answer))


async def edit_notice(kind: str, answer: Answer) -> str:
    """What the model reads after the retry's result when a reviewer changed the call's arguments before
    approving (outcomes.edit_notice, from the stored request: what the decision's "changes" hold); "" when
    nothing was changed, which reads nothing."""
    if kind != "approval" or not answer.ok:
        return ""
    return outcomes.edit_notice(await answers.aapproved_changes(answer.id, answer.data))


def with_notice(result: ToolResult, notice: str) -> ToolResult:
    """``result`` with ``notice`` after its output (a new ToolResult; the same one when there is no notice)."""
    if not notice:
        return result
    return replace(result, output=f"{result.output}{notice}" if result.output else notice.lstrip())


async def refused_result(prompt: str, answer: Answer, *, tool: str = "") -> ToolResult:
    """§10's error result for a call whose request was refused (``answer.ok`` false), in tool runs and agent runs
    alike: ``declined/expired: <prompt>``, and after that exact prefix what an expiry did, from the stored
    request ("(expired at 20:14 UTC, nobody answered)"), or who declined and why, from the refusal's data (its
    reject option, comment, or the changes asked for; outcomes.decline_words). A withdrawal keeps the prefix alone.

    A reviewer's reply ("respond") is the call's result instead of the tool's, and not an error: "bob answered
    instead of running <tool>: <message>" (outcomes.respond_words). The tool is not run in any of these."""
    if answer.reason == "expired":
        expired = await selectors.aexpiry_of(answer.id)
        expired_at, note = expired if expired is not None else (None, "")
        return ToolResult(output=outcomes.refused_output(prompt, expired_at=expired_at, note=note), is_error=True)
    if answer.reason != "declined":
        return ToolResult(output=outcomes.refused_output(prompt), is_error=True)
    said = answer.data if isinstance(answer.data, dict) else {}
    by = await selectors.adecliner_of(answer.id)
    output = outcomes.refused_output(prompt, declined_by=by, said=said, tool=tool)
    return ToolResult(output=output, is_error=said.get("response") != outcomes.RESPOND)


def _consume(task: asyncio.Task[ToolResult]) -> None:
    if not task.cancelled():
        task.exception()  # a late result or error from an abandoned tool is discarded


async def call_tool(tool: Tool, args: dict[str, Any], ctx: ToolContext, scope: RunScope) -> ToolResult:
    """Execute one tool call under the run's token and deadline.

    At the deadline the token trips with reason ``timeout``. A tripped tool gets
    STOP_GRACE_SECONDS to return; then an async tool's task is cancelled and a
    thread-bound tool is abandoned, its late result discarded.
    """
    token = scope.token
    assert token is not None, "a tool call runs inside a run, which has a token"
    # The tool runs with this call's scope, so a request it asks from inside (console_wait_for)
    # is tied to this run, its token and its deadline.
    context = contextvars.copy_context()
    context.run(current_scope.set, scope)
    call = cast(Coroutine[Any, Any, ToolResult], tool.execute(dict(args), ctx))  # execute is an async def
    task = asyncio.get_running_loop().create_task(call, context=context)
    stop = asyncio.ensure_future(token.wait())
    sup = supervisor()
    is_mcp = getattr(tool, "source", None) == "mcp"
    if is_mcp:
        sup.mcp_calls.append(scope)
    # The run's own time runs out (a wait for a person asked from inside the call stops that clock).
    clock = scope.clock
    out = asyncio.ensure_future(clock.run_out()) if clock is not None and clock.deadline is not None else None
    try:
        watched = {task, stop} if out is None else {task, stop, out}
        done, _ = await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        if task not in done:
            token.trip("timeout")  # keeps the first reason if it was already cancelled
            done, _ = await asyncio.wait({task}, timeout=settings.TOOLNEXUS["STOP_GRACE_SECONDS"])
        if task in done:
            return task.result()
        task.cancel()
        task.add_done_callback(_consume)
        raise ToolStopped(cast(str, token.reason))  # set once tripped
    except asyncio.CancelledError:
        task.cancel()  # the run itself is going away: its tool goes with it
        task.add_done_callback(_consume)
        raise
    finally:
        stop.cancel()
        if out is not None:
            out.cancel()
        if is_mcp:
            sup.mcp_calls.remove(scope)
        if scope.asked and scope.run_id not in sup.relinquished:
            # A call that is over can no longer take an answer to what it asked from inside.
            asked, scope.asked = scope.asked, set()
            await asyncio.shield(asyncio.gather(*(withdraw_if_open(rid) for rid in asked)))
