"""What a log line costs: on the thread that logs it, and in all (the listener thread writing it too).

    .venv/bin/python bench/log_lines.py

Lines as a round trip writes them (an access line, an ``approvals.changes`` line from ``log_event``),
through the console's ``BackgroundHandler`` to /dev/null, in both formats. "caller" is the time
CPU time ``logger.info`` takes on the logging thread (the event loop or a database thread); "in all"
is the process's CPU time per line once the listener has written them all (both threads).
"""

import logging
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from provenance import commit, machine  # noqa: E402

from approvals.telemetry import logs  # noqa: E402

LINES = 20_000
EVENT = SimpleNamespace(
    pk=41, action="request.answered", actor="reviewer", run_id=12, request_id="pnd-1a2445832d6-146023848548",
    tool="refund", kind="approval", payload={"ok": True, "reason": None, "comment": "", "data": None, "via": "api"},
)  # fmt: skip
ACCESS = {"method": "POST", "path": "/api/v1/runs", "status": 201, "bytes": 502, "duration_ms": 13.7,
          "client": "127.0.0.1"}  # fmt: skip


def measure(formatter: logging.Formatter) -> tuple[float, float]:
    handler = logs.BackgroundHandler(open(os.devnull, "w"))
    handler.setFormatter(formatter)
    access = logging.getLogger("approvals.access")
    for logger in (access, logs.changes):
        logger.handlers, logger.propagate, logger.level = [handler], False, logging.INFO
    token = logs.request_id.set("e33ebd49e3972c9f")
    cpu, caller_cpu = time.process_time(), time.thread_time()
    for _ in range(LINES // 2):
        logs.log_event(EVENT)
        access.info("%s %s %s", "POST", "/api/v1/runs", 201, extra={"fields": ACCESS, "told": ("method", "path")})
    caller = (time.thread_time() - caller_cpu) / LINES
    logs.flush(60)
    total = (time.process_time() - cpu) / LINES
    logs.request_id.reset(token)
    handler.close()
    return caller * 1e6, total * 1e6


def main() -> None:
    print(f"commit {commit()}, {machine()}")
    for name, formatter in (("text", logs.TextFormatter()), ("json", logs.JsonFormatter())):
        measure(formatter)  # warm-up
        caller, cpu = measure(formatter)
        print(f"{name}: {caller:.1f} µs CPU on the caller per line, {cpu:.1f} µs CPU per line in all")


if __name__ == "__main__":
    main()
