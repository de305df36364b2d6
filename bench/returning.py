"""What the suspension's wait costs in one process: the UPDATE and the two reads after it, or one UPDATE
with RETURNING (approvals/hotpath/returning.py), on the embedded SQLite.

    .venv/bin/python bench/returning.py            # 3 rounds of 2,000 waits each way
    .venv/bin/python bench/returning.py --calls 500 --rounds 1

"before" is what decisions.open_request ran until issue 34: ``rows.update`` (SQL built once), then
``rows.get(Run, related=("started_by",))`` and ``rows.pks`` for the run's open requests. "after" is
``run_state.wait_on_suspension`` with the frame's extras (the starter's username, whether another request
is open). Each wait is in its own transaction, as in the door. Prints the median microseconds per wait of
each round and the statements each way sends.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="bench-returning-")
    os.environ["CONSOLE_SQLITE_PATH"] = str(Path(workdir) / "db.sqlite3")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolnexus_site.settings")
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection, transaction

    from approvals.hotpath import rows
    from approvals.models import ACTIVE_RUN_STATUSES, Request, RequestStatus, Run, RunStatus, run_state

    call_command("migrate", verbosity=0)
    user = User.objects.create_user("starter")
    run = Run.objects.create(tool="refund", args={"order": "A-7", "amount": 12}, started_by=user)
    Request.objects.create(id="bench-open", run=run, kind="approval", prompt="Refund?")

    def before() -> None:
        with transaction.atomic():
            rows.update(Run, run.pk, {"status": RunStatus.WAITING}, only_if=("status", ACTIVE_RUN_STATUSES))
            rows.get(Run, run.pk, related=("started_by",))
            rows.pks(Request, {"run": run.pk, "status": RequestStatus.OPEN}, order_by="created_at")

    def after() -> None:
        with transaction.atomic():
            run_state.wait_on_suspension(run.pk, "bench-open")

    for name, wait in (("before", before), ("after", after)):
        wait()  # SQL built, connection open
        sent = []
        connection.connection.set_trace_callback(sent.append)
        wait()
        connection.connection.set_trace_callback(None)
        medians = []
        for _ in range(options.rounds):
            times = []
            for _ in range(options.calls):
                begin = time.perf_counter()
                wait()
                times.append(time.perf_counter() - begin)
            medians.append(statistics.median(times) * 1e6)
        print(f"{name}: {len(sent)} statements per wait; median us per wait, each round: {[round(m) for m in medians]}")


if __name__ == "__main__":
    main()
