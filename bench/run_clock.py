"""What a run's own-time clock adds to each tool call (issue 35): ``call_tool``'s wait for the tool beside
the token, before (a timeout on the wait) and now (the clock's ``run_out`` task in the wait).

    python bench/run_clock.py
"""

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from approvals.runs.clock import RunClock  # noqa: E402 (the repository on the path first)

CALLS = 20_000


async def tool() -> int:
    return 1


async def before(n: int) -> None:
    for _ in range(n):
        stop = asyncio.ensure_future(asyncio.Event().wait())
        task = asyncio.ensure_future(tool())
        await asyncio.wait({task, stop}, timeout=60.0, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()


async def with_clock(n: int) -> None:
    clock = RunClock(60.0)
    for _ in range(n):
        stop = asyncio.ensure_future(asyncio.Event().wait())
        task = asyncio.ensure_future(tool())
        out = asyncio.ensure_future(clock.run_out())
        await asyncio.wait({task, stop, out}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        out.cancel()


async def main() -> None:
    for name, way in (("before", before), ("clock", with_clock)) * 2:
        started = time.perf_counter()
        await way(CALLS)
        print(f"{name}: {(time.perf_counter() - started) / CALLS * 1e6:.1f} µs a call")


if __name__ == "__main__":
    asyncio.run(main())
