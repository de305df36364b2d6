"""This process's audit sealer: chains committed audit events in batches, off every answer's path.

Writers only INSERT an event with its own MAC (``models.sealing``). After each commit that appended
events, the sealer is woken; it waits ``CONSOLE_AUDIT_SEAL_SECONDS`` so one batch takes everything
committed meanwhile, then runs ``AuditEvent.objects.seal_pending`` on its own thread and connection.
Every console runs one; sealers take turns on a lock writers never take (PostgreSQL: an advisory lock;
SQLite: its write lock), and each chains whatever any process committed. At start it chains what a
stopped process left, and the run supervisor's graceful stop chains what this one wrote last.

A commit in another process (a console with no sealer, ``archive_audit``, a shell) wakes no sealer here,
so each sealer also looks every ``CONSOLE_AUDIT_SEAL_POLL_SECONDS`` for events not chained yet (one
``SELECT id ... WHERE position IS NULL`` on the index of positions) and chains them. A sealing that fails (the
database away) is retried after 0.25 s, 0.5 s, 1 s, ... up to the poll interval, until one succeeds.
"""

import logging
import threading
from collections.abc import Callable

from django.conf import settings
from django.db import connections
from django.db.models import QuerySet

from approvals.models import AuditEvent, sealing

logger = logging.getLogger(__name__)

FIRST_RETRY_SECONDS = 0.25
# Events left waiting that the sealer remembers (refused replays, those after an event that fails its MAC), so a
# poll that finds only them does not seal and log them again.
STUCK_REMEMBERED = 1000


class Sealer:
    """One thread that chains pending audit events after a wake-up, a poll that finds some, or a failure."""

    def __init__(self, delay: float, using: str = "default", poll: float = 5.0) -> None:
        self.delay = delay
        self.using = using
        self.poll = poll
        self.woken = threading.Event()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, name="audit-sealer", daemon=True)
        self.stuck: frozenset[int] = frozenset()
        self.reported: str | None = None  # the MAC failure last logged, so each is said once
        self.refused: set[int] = set()  # the archived events put back already logged (seal_pending)
        # What it did so far, for whoever waits on it (tests, a graceful stop): notified after each attempt.
        self.attempts = 0
        self.chained = 0
        self.failures = 0
        self.attempted = threading.Condition()

    def start(self) -> None:
        sealing.on_append(self.wake)
        self.thread.start()
        self.wake()  # what a stopped process left unchained

    def wake(self) -> None:
        self.woken.set()

    def stop(self, timeout: float = 10.0) -> None:
        """Chain what is pending now, then end the thread."""
        sealing.stop_telling(self.wake)
        self.stopping.set()
        self.woken.set()
        self.thread.join(timeout)

    def wait_until(self, done: Callable[["Sealer"], bool], timeout: float) -> bool:
        """Wait until ``done(self)`` holds after an attempt (or already does); False after ``timeout``."""
        with self.attempted:
            return self.attempted.wait_for(lambda: done(self), timeout)

    def seal_now(self) -> int:
        """Chain every pending event, batch after batch; how many."""
        total = 0
        while True:
            sealed = AuditEvent.objects.using(self.using).seal_pending(reported=self.refused)
            total += sealed
            if sealed == 0:
                return total

    def _serve(self) -> None:
        retry: float | None = None  # after a failure: how long until the next attempt
        try:
            while not self.stopping.is_set():
                woken = self.woken.wait(self.poll if retry is None else retry)
                if self.stopping.is_set():
                    break
                if woken:
                    # Gather: everything committed in the next moments goes in the same batch.
                    self.stopping.wait(self.delay)
                    self.woken.clear()
                retry = self._attempt(retry, look_first=not woken and retry is None)
            self._attempt(None, look_first=False)
        finally:
            connections.close_all()

    def _unchained_ids(self, limit: int) -> list[int]:
        return list(waiting(self.using)[:limit])

    def _attempt(self, retry: float | None, look_first: bool) -> float | None:
        """Seal (on a poll: only if an event nobody refused is waiting); the wait before a retry, None if it worked."""
        chained = 0
        try:
            if look_first and set(self._unchained_ids(len(self.stuck) + 1)) <= self.stuck:
                return None
            try:
                chained = self.seal_now()
                self.reported = None
            except sealing.Unsealable as problem:
                # An altered pending event stops the chain there; verify_audit names it. Said once, not each poll.
                if str(problem) != self.reported:
                    logger.error("audit sealing stopped at an event that does not match its own MAC: %s", problem)
                    self.reported = str(problem)
            self.stuck = frozenset(self._unchained_ids(STUCK_REMEMBERED))
            return None
        except Exception:  # the database is away: retried with backoff, up to the poll interval
            logger.exception("could not chain the pending audit events")
            connections[self.using].close()
            with self.attempted:
                self.failures += 1
            return min(self.poll, retry * 2 if retry is not None else FIRST_RETRY_SECONDS)
        finally:
            with self.attempted:
                self.attempts += 1
                self.chained += chained
                self.attempted.notify_all()


def waiting(using: str) -> "QuerySet[AuditEvent, int]":
    """The ids of the events not chained yet, oldest first: ``SELECT id ... WHERE position IS NULL ORDER BY id``,
    read from the unique index on ``position`` alone (both databases look NULLs up in it; no table scan)."""
    return AuditEvent.objects.using(using).filter(position__isnull=True).order_by("id").values_list("id", flat=True)


_sealer: list[Sealer] = []


def start_sealer() -> Sealer | None:
    """Start this process's sealer once (None when ``CONSOLE_AUDIT_SEAL_SECONDS`` is None: nothing seals by itself)."""
    if _sealer:
        return _sealer[0]
    delay = getattr(settings, "CONSOLE_AUDIT_SEAL_SECONDS", 0.5)
    if delay is None:
        return None
    sealer = Sealer(float(delay), poll=float(getattr(settings, "CONSOLE_AUDIT_SEAL_POLL_SECONDS", 5.0)))
    _sealer.append(sealer)
    sealer.start()
    return sealer


def stop_sealer() -> None:
    """Chain what this process wrote last and stop its sealer (a graceful stop)."""
    if _sealer:
        _sealer.pop().stop()
