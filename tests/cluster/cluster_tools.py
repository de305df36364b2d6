"""Tools the cluster tests serve (TOOLNEXUS_TOOL_MODULES=tests.cluster.cluster_tools).

Every execution appends one JSON line to the file named by CLUSTER_EXECUTIONS_LOG:
``{"tool", "label", "pid", "answer", "event"}``, so a test can tell in which process a
tool ran and count re-executions exactly (``Cluster.executions``). ``label`` is the
test's own name for the run, which keeps the records of runs sharing a log apart.
Plain toolnexus tools: nothing here knows about Django or the cluster.
"""

import asyncio
import json
import os

from toolnexus import ToolResult, define_tool, pending

EXECUTIONS_LOG_ENV = "CLUSTER_EXECUTIONS_LOG"
HOLD_SECONDS = 60.0  # a holding tool gives up on its own after this, so a broken test cannot leave it running


def record(tool, label, event, ctx=None, **extra):
    answer = getattr(ctx, "answer", None)
    line = {
        "tool": tool,
        "label": label,
        "pid": os.getpid(),
        "event": event,
        "answer": None if answer is None else {"ok": answer.ok, "data": answer.data},
        **extra,
    }
    # One write of one short line with O_APPEND: lines from several processes never interleave.
    with open(os.environ[EXECUTIONS_LOG_ENV], "a") as log:
        log.write(json.dumps(line) + "\n")


async def approve_execute(label: str, hold_on_retry: bool = False, ctx=None):
    """Ask for an approval; on the §10 retry, say in which process it went on. ``hold_on_retry``: the
    retry works until the run's token trips (or HOLD_SECONDS), so a test can stop a process during it."""
    record("cluster_approve", label, "executed", ctx)
    answer = getattr(ctx, "answer", None)
    if answer is None:
        return pending(kind="approval", prompt=f"Go ahead with {label}?", data={"label": label})
    if not answer.ok:
        return ToolResult(output=f"{label} declined in pid {os.getpid()}", is_error=True)
    if hold_on_retry:
        try:
            await asyncio.wait_for(ctx.signal.wait(), timeout=HOLD_SECONDS)
        except TimeoutError:
            pass
    return f"{label} approved in pid {os.getpid()}"


async def hold_execute(label: str, seconds: float = HOLD_SECONDS, ctx=None):
    """Work (an async tool) until the run's token trips, then say why it stopped."""
    record("cluster_hold", label, "started", ctx)
    signal = getattr(ctx, "signal", None)
    try:
        await asyncio.wait_for(signal.wait(), timeout=seconds)
    except TimeoutError:
        return f"{label} held for {seconds:g}s"
    record("cluster_hold", label, "stopped", ctx, reason=signal.reason)
    return ToolResult(output=f"{label} stopped ({signal.reason}) in pid {os.getpid()}", is_error=True)


def hold_sync_execute(label: str, seconds: float = HOLD_SECONDS, ctx=None):
    """The same in a plain ``def`` tool: toolnexus runs it in a worker thread."""
    record("cluster_hold_sync", label, "started", ctx)
    signal = getattr(ctx, "signal", None)
    if not signal.wait_blocking(seconds):
        return f"{label} held for {seconds:g}s"
    record("cluster_hold_sync", label, "stopped", ctx, reason=signal.reason)
    return ToolResult(output=f"{label} stopped ({signal.reason}) in pid {os.getpid()}", is_error=True)


TOOLS = [
    define_tool(approve_execute, name="cluster_approve"),
    define_tool(hold_execute, name="cluster_hold"),
    define_tool(hold_sync_execute, name="cluster_hold_sync"),
]
