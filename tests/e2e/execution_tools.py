"""Tools for the execution record's e2e test (tests/e2e/test_execution_record.py): an approval whose approved
retry keeps running until the test lets it finish, so a page can be seen saying "Executing…".

``slow_payout(amount, release, fail)``: asks "Pay out <amount> EUR?"; approved, it waits until the file
``release`` exists (the test creates it), then pays out, or fails when ``fail``.
"""

import asyncio
from pathlib import Path

from toolnexus import ToolResult, define_tool, pending


async def slow_payout_execute(amount: int = 10, release: str = "", fail: bool = False, ctx=None):
    answer = getattr(ctx, "answer", None)
    if answer is None:
        return pending(kind="approval", prompt=f"Pay out {amount} EUR?")
    while release and not Path(release).exists():
        if ctx.signal is not None and ctx.signal.is_set():
            return ToolResult(output="stopped before paying out", is_error=True)
        await asyncio.sleep(0.05)  # a file written by another process: there is nothing to await
    if fail:
        return ToolResult(output=f"the bank refused {amount} EUR: account frozen", is_error=True)
    return f"paid out {amount} EUR, receipt R-{amount}"


slow_payout = define_tool(slow_payout_execute, name="slow_payout", description="Pays out once approved.")
