"""The tools the realtime benchmarks run inside the console (``TOOLNEXUS_TOOL_MODULES=bench.bench_tools``).

Each stamps the wall clock, ``time.time_ns()`` (CLOCK_REALTIME, so the stamps of two
processes on one machine compare), at the moment the benchmark measures from or to,
and hands the stamp back the way a dashboard sees it: in the request's ``data`` or in
the run's result.

- ``bench_suspend``: returns ``pending(...)`` with ``data.suspended_ns`` taken as it
  returns; on the §10 retry it returns ``resumed_ns`` taken as the retry starts.
- ``bench_cancel_async`` / ``bench_cancel_sync``: wait on ``ctx.signal`` (``await
  signal.wait()`` on the loop, ``signal.wait_blocking`` in the worker thread) and
  return when it was parked and when the trip was seen.
"""

import json
import time
import uuid

from toolnexus import ToolResult, define_tool, pending

# A cancel that never comes must not keep a worker thread forever.
SYNC_WAIT_LIMIT_SECONDS = 60.0


async def bench_suspend(round: int = 0, ctx=None):  # noqa: A002 (the benchmark's round number)
    """Suspend for an approval; on the retry, report when it started."""
    if ctx is not None and ctx.answer is not None:
        return json.dumps({"resumed_ns": time.time_ns(), "ok": ctx.answer.ok})
    return pending(
        kind="approval",
        id=f"bench-{round}-{uuid.uuid4().hex[:12]}",
        prompt=f"Benchmark round {round}: approve?",
        data={"round": round, "suspended_ns": time.time_ns()},
    )


async def bench_cancel_async(ctx=None):
    """An async tool that waits for its token: ``await ctx.signal.wait()``."""
    parked_ns = time.time_ns()
    await ctx.signal.wait()
    observed_ns = time.time_ns()
    return ToolResult(output=json.dumps({"parked_ns": parked_ns, "observed_ns": observed_ns}), is_error=True)


def bench_cancel_sync(ctx=None):
    """A plain ``def`` tool in its worker thread that waits for its token: ``ctx.signal.wait_blocking``."""
    parked_ns = time.time_ns()
    deadline = time.monotonic() + SYNC_WAIT_LIMIT_SECONDS
    while not ctx.signal.wait_blocking(1.0) and time.monotonic() < deadline:
        pass
    observed_ns = time.time_ns()
    return ToolResult(output=json.dumps({"parked_ns": parked_ns, "observed_ns": observed_ns}), is_error=True)


TOOLS = [
    define_tool(bench_suspend, name="bench_suspend"),
    define_tool(bench_cancel_async, name="bench_cancel_async"),
    define_tool(bench_cancel_sync, name="bench_cancel_sync"),
]
