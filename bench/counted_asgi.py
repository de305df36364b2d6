"""An ASGI app served with every statement it sends counted (tests/support/statements.py), for bench/roundtrip.py.

    BENCH_ASGI_TARGET=toolnexus_site.asgi:application daphne counted_asgi:application

``GET /__bench__/statements`` answers the running totals (statements, write transactions) and is
answered here, never by the app. The count costs a Python call per statement on both apps alike.
"""

import cProfile
import importlib
import json
import os
import sys
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent), str(BENCH)]

# BENCH_PROFILE=1: every thread runs under cProfile (the ORM's thread too, which cProfile alone misses);
# POST /__bench__/profile marks a start; GET /__bench__/profile answers what each function cost since.
profiles = []


def _profile_this_thread(*_):
    profile = cProfile.Profile(time.thread_time)  # CPU, not the wall: a wait in epoll costs nothing
    profiles.append(profile)
    profile.enable()  # replaces this function as the thread's profiler


if os.environ.get("BENCH_PROFILE"):
    threading.setprofile(_profile_this_thread)
    _profile_this_thread()

module, _, name = os.environ["BENCH_ASGI_TARGET"].partition(":")
target = getattr(importlib.import_module(module), name)

from tests.support import statements  # noqa: E402


class Tally:
    """Running totals only: a benchmark sends hundreds of thousands of statements."""

    def __init__(self):
        self.statements = 0
        self.write_transactions = 0
        self.open = {}  # connection -> whether its transaction wrote

    def add(self, statement):
        self.statements += 1  # under the GIL; the totals are read between blocks
        verb, key = statement.verb, statement.connection
        if verb == "BEGIN":
            self.open[key] = False
        elif verb in ("COMMIT", "END", "ROLLBACK") and "TO" not in statement.sql.upper().split():
            self.write_transactions += bool(self.open.pop(key, False))
        elif verb in statements.WRITES:
            if key in self.open:
                self.open[key] = True
            else:
                self.write_transactions += 1


tally = Tally()
statements._install()
statements._active.append(tally)  # for the life of the process


def profile_snapshot():
    """{function: [calls, own seconds, cumulative seconds]} over every thread's profile, still running
    (``getstats`` reads without stopping a profile, unlike ``create_stats``)."""
    totals = {}
    for profile in list(profiles):
        for entry in profile.getstats():
            code = entry.code
            label = code if isinstance(code, str) else f"{code.co_filename}:{code.co_firstlineno}({code.co_name})"
            row = totals.setdefault(label, [0, 0.0, 0.0])
            row[0] += entry.callcount
            row[1] += entry.inlinetime
            row[2] += entry.totaltime
    return totals


profile_start = {}


async def application(scope, receive, send):
    if scope["type"] == "http" and scope["path"] == "/__bench__/profile":
        now = profile_snapshot()
        if scope["method"] == "POST":  # from here on
            profile_start.clear()
            profile_start.update(now)
        zero = [0, 0.0, 0.0]
        since = {k: [a - b for a, b in zip(v, profile_start.get(k, zero), strict=True)] for k, v in now.items()}
        body = json.dumps({k: v for k, v in since.items() if v[0] > 0}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    if scope["type"] == "http" and scope["path"] == "/__bench__/statements":
        totals = {"statements": tally.statements, "write_transactions": tally.write_transactions}
        body = json.dumps(totals).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    await target(scope, receive, send)
