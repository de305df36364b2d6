"""Which console processes are alive, so a run never outlives its process unseen.

Every process beats: it writes ``ConsoleProcess.last_beat`` every HEARTBEAT_SECONDS.
An owner is dead when its row is missing, silent for HEARTBEAT_TIMEOUT_SECONDS, or
(on this same host) its pid no longer exists, which spots a restart at once instead
of a heartbeat later. Another process then takes over its runs
(runs.recover_orphaned_runs): waiting ones are adopted, executing ones interrupted.
"""

import os
import socket
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from toolnexus import Answer

from approvals import events, selectors
from approvals.hotpath import rows
from approvals.models import (
    ACTIVE_RUN_STATUSES,
    RESOLVING_ACTIONS,
    AuditEvent,
    ConsoleProcess,
    ExecutionState,
    Request,
    RequestStatus,
    Run,
    run_state,
)
from approvals.selectors import last_seq

HOSTNAME = socket.gethostname()


def heartbeat_timeout() -> timedelta:
    return timedelta(seconds=settings.TOOLNEXUS["HEARTBEAT_TIMEOUT_SECONDS"])


def beat(process_id: str) -> bool:
    """Say this process is alive; True if its row was still there (False: it had been declared dead)."""
    now = timezone.now()
    if ConsoleProcess.objects.filter(pk=process_id).update(last_beat=now):
        return True
    _, pid, _ = (process_id.split(":") + ["", "", ""])[:3]
    ConsoleProcess.objects.update_or_create(
        pk=process_id,
        defaults={"hostname": HOSTNAME, "pid": int(pid) if pid.isdigit() else 0, "last_beat": now},
    )
    return False


abeat = database_sync_to_async(beat)
# The heartbeat's own thread (runner._pulse): the shared database thread can be queued behind runs'
# work or waiting on a lock, the default executor full of blocking tools; a process that busy is alive.
_pulse_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="console-heartbeat")
abeat_apart = database_sync_to_async(beat, thread_sensitive=False, executor=_pulse_thread)


def last_beat(process_id: str) -> datetime | None:
    """When ``process_id`` last said it was alive, as the other processes read it; None: no row (it
    stopped, or was declared dead)."""
    return ConsoleProcess.objects.filter(pk=process_id).values_list("last_beat", flat=True).first()


alast_beat = database_sync_to_async(last_beat)


def leave(process_id: str) -> None:
    """A stopping process says it is gone: whatever it still owns is taken over at the next heartbeat of
    another, not after HEARTBEAT_TIMEOUT_SECONDS."""
    ConsoleProcess.objects.filter(pk=process_id).delete()


# On the pulse's own thread: after a beat that was under way, never before it (a beat would write the row again).
aleave = database_sync_to_async(leave, thread_sensitive=False, executor=_pulse_thread)


def _pid_is_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # it exists, under another user
        return False
    return False


def is_alive(process: ConsoleProcess, now: datetime | None = None) -> bool:
    now = now or timezone.now()
    if now - process.last_beat > heartbeat_timeout():
        return False
    if process.hostname == HOSTNAME and process.pid and process.pid != os.getpid() and _pid_is_gone(process.pid):
        return False
    return True


def dead_owners(current_owner: str) -> set[str]:
    """Owners of active runs that are not alive, ``current_owner`` never among them."""
    owners = set(
        Run.objects.filter(status__in=ACTIVE_RUN_STATUSES).exclude(owner=current_owner).values_list("owner", flat=True)
    )
    if not owners:
        return set()
    now = timezone.now()
    alive = {p.pk for p in ConsoleProcess.objects.filter(pk__in=owners) if is_alive(p, now)}
    return owners - alive


adead_owners = database_sync_to_async(dead_owners)


def forget_dead_processes(current_owner: str) -> list[str]:
    """Drop the rows of processes that stopped beating (their runs are taken over separately); returns their ids,
    whose channels the caller takes out of the channel layer's groups (runner.take_over_dead_processes)."""
    now = timezone.now()
    gone = [p.pk for p in ConsoleProcess.objects.exclude(pk=current_owner) if not is_alive(p, now)]
    if gone:
        ConsoleProcess.objects.filter(pk__in=gone).delete()
    return gone


aforget_dead_processes = database_sync_to_async(forget_dead_processes)


# What a supervisor acts on when it is not told: a resolved request (its waits wake), a cancel (its
# token trips), a run adopted from or interrupted under this process (its task stops here).
SUPERVISED_ACTIONS = (
    *RESOLVING_ACTIONS,
    AuditEvent.Action.RUN_CANCEL_REQUESTED,
    AuditEvent.Action.RUN_ADOPTED,
    AuditEvent.Action.RUN_INTERRUPTED,
)
CHANGES_PER_READ = 1000


@dataclass(frozen=True)
class Change:
    seq: int
    action: str
    run_id: int | None
    request_id: str | None
    previous_owner: str | None


def _changes_between(seq: int, newest: int, unseen: Collection[int]) -> tuple[int, list[Change], list[int]]:
    """``changes_after``'s reads up to ``newest``: on PostgreSQL, inside its one view."""
    supervised = AuditEvent.objects.filter(action__in=SUPERVISED_ACTIONS)
    rows = list(
        supervised.filter(Q(id__gt=seq, id__lte=newest) | Q(id__in=list(unseen)))
        .order_by("id")
        .values_list("id", "action", "run_id", "request_id", "payload")[:CHANGES_PER_READ]
    )
    changes = [
        Change(pk, action, run_id, request_id, (payload or {}).get("previous_owner"))
        for pk, action, run_id, request_id, payload in rows
    ]
    upto = max(seq, changes[-1].seq) if len(changes) == CHANGES_PER_READ else max(seq, newest)
    if selectors.ids_follow_commits() or (upto <= seq and not unseen):
        return upto, changes, []
    expected = set(unseen) | set(range(seq + 1, upto + 1))
    present = AuditEvent.objects.filter(Q(id__gt=seq, id__lte=upto) | Q(id__in=list(unseen))).values_list(
        "id", flat=True
    )
    return upto, changes, sorted(expected.difference(present))


def changes_after(seq: int, unseen: Collection[int] = ()) -> tuple[int, list[Change], list[int]]:
    """The supervised changes recorded after audit event ``seq`` or among the ``unseen`` ids, oldest first (at
    most CHANGES_PER_READ); the sequence number they bring a reader up to; and the ids at or below it that
    no committed event holds yet.

    Reads only events newer than ``seq`` (the primary key's range), so its cost follows what changed, not
    how many runs wait. On SQLite events are numbered in commit order (ids are handed out under its write
    lock), so nothing committed later can appear below a number already read. On PostgreSQL an event is
    one INSERT with no lock (docs/design.md, "The audit trail"): an id taken by a transaction still open
    can commit after a higher one was read. Those ids come back as the third value, for the next call's
    ``unseen`` (an id a rollback lost stays unseen: the caller forgets it after a while).
    """
    newest = last_seq()
    if newest <= seq and not unseen:
        return seq, [], []
    if selectors.ids_follow_commits():
        return _changes_between(seq, newest, unseen)
    # The changes and the ids present read in one view: an id committed between two reads is in neither.
    with selectors.one_view():
        return _changes_between(seq, newest, unseen)


achanges_after = database_sync_to_async(changes_after)


def live_processes() -> list[ConsoleProcess]:
    now = timezone.now()
    return [p for p in ConsoleProcess.objects.all() if is_alive(p, now)]


def stored_answer_and_claim(request_id: str, run_id: int, process_id: str) -> tuple[Answer, bool] | tuple[None, None]:
    """A waiting run's read of its request in one database call: ``(None, None)`` while the request is
    open, else ``(its Answer, whether this process resumes the run)``.

    One SELECT when the answer's own transaction claimed the resume (``run_state.claim_resume_here``: the
    answer came in the run's own process) or another process holds it; ``claim_resume`` otherwise.
    """
    # Every waiting run reads this on each wake-up: plain SQL (rows.py), as selectors.stored_answer reads.
    row = rows.values(Request, request_id, ("status", "answer_ok", "answer_data", "answer_reason", "resumed_by"))
    if row is None or row["status"] == RequestStatus.OPEN:
        return None, None
    answer = Answer(id=request_id, ok=bool(row["answer_ok"]), data=row["answer_data"], reason=row["answer_reason"])
    return answer, resumes_here(row["resumed_by"], run_id, request_id, process_id)


astored_answer_and_claim = database_sync_to_async(stored_answer_and_claim)


def resumes_here(resumed_by: str, run_id: int, request_id: str, process_id: str) -> bool:
    """Whether ``process_id`` goes on with ``run_id`` after ``request_id``'s answer, given the request's
    ``resumed_by`` as read: claimed for it in the answer's write, claimed now, or another's."""
    if resumed_by:
        return resumed_by == process_id
    return claim_resume(run_id, request_id, process_id)


def _tell_executing(request_id: str) -> None:
    """Dashboards hear that a claimed ok answer's tool runs now (``request.executing``), as its frame shows it."""
    executing = Request.objects.filter(pk=request_id, execution_state=ExecutionState.EXECUTING)
    request = executing.select_related(*selectors.REQUEST_USERS).first()
    if request is not None:
        events.record(
            AuditEvent.Action.REQUEST_EXECUTING, actor="system", run=request.run, request=request, rows_current=True
        )


def claim_resume(run_id: int, request_id: str, process_id: str) -> bool:
    """Take the right to go on with ``run_id`` after ``request_id``'s answer; exactly one process gets it.

    The request's row, then the run's, stay locked until the claim commits (the order every door takes
    them in; runs.recover_orphaned_runs too): an owner taken for dead that wakes up as it is adopted
    either claims first, and keeps the run, or finds it adopted and lets it go to the adopter.
    """
    with transaction.atomic():
        # An ok answer's tool runs next: marked executing in the same statement (review/execution.py).
        marks = run_state.executing_if_ok(timezone.now())
        claimed = Request.objects.filter(pk=request_id, resumed_by="").update(
            resumed_by=process_id, execution_state=marks["execution_state"], execution_at=marks["execution_at"]
        )
        if not claimed:
            return False
        owned = Run.objects.select_for_update().filter(pk=run_id, owner=process_id, status__in=ACTIVE_RUN_STATUSES)
        if not owned.values_list("pk", flat=True):
            transaction.set_rollback(True)  # not this process's run (any more): the claim is the owner's
            return False
        _tell_executing(request_id)
        return True


aclaim_resume = database_sync_to_async(claim_resume)
