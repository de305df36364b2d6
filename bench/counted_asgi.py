"""An ASGI app served with every statement it sends counted (tests/support/statements.py), for bench/roundtrip.py.

    BENCH_ASGI_TARGET=toolnexus_site.asgi:application daphne counted_asgi:application

``GET /__bench__/statements`` answers the running totals (statements, write transactions) and is
answered here, never by the app. The count costs a Python call per statement on both apps alike.
"""

import importlib
import json
import os
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent), str(BENCH)]

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


async def application(scope, receive, send):
    if scope["type"] == "http" and scope["path"] == "/__bench__/statements":
        totals = {"statements": tally.statements, "write_transactions": tally.write_transactions}
        body = json.dumps(totals).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    await target(scope, receive, send)
