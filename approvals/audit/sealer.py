"""This process's audit sealer: chains committed audit events in batches, off every answer's path.

Writers only INSERT an event with its own MAC (``models.sealing``). After each commit that appended
events, the sealer is woken; it waits ``CONSOLE_AUDIT_SEAL_SECONDS`` so one batch takes everything
committed meanwhile, then runs ``AuditEvent.objects.seal_pending`` on its own thread and connection.
Every console runs one; sealers take turns on a lock writers never take (PostgreSQL: an advisory lock;
SQLite: its write lock), and each chains whatever any process committed. At start it chains what a
stopped process left, and the run supervisor's graceful stop chains what this one wrote last.
"""

import logging
import threading

from django.conf import settings
from django.db import connections

from approvals.models import AuditEvent, sealing

logger = logging.getLogger(__name__)


class Sealer:
    """One thread that chains pending audit events after a wake-up and a short gathering wait."""

    def __init__(self, delay: float, using: str = "default") -> None:
        self.delay = delay
        self.using = using
        self.woken = threading.Event()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, name="audit-sealer", daemon=True)

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

    def seal_now(self) -> int:
        """Chain every pending event, batch after batch; how many."""
        total = 0
        while True:
            sealed = AuditEvent.objects.using(self.using).seal_pending()
            total += sealed
            if sealed == 0:
                return total

    def _serve(self) -> None:
        try:
            while not self.stopping.is_set():
                self.woken.wait()
                # Gather: everything committed in the next moments goes in the same batch.
                self.stopping.wait(self.delay)
                self.woken.clear()
                self._seal_logging_errors()
            self._seal_logging_errors()
        finally:
            connections.close_all()

    def _seal_logging_errors(self) -> None:
        try:
            self.seal_now()
        except sealing.Unsealable:
            # An altered pending event stops the chain there; verify_audit names it. Retried on the next wake.
            logger.exception("audit sealing stopped at an event that does not match its own MAC")
        except Exception:  # the database is away: the next commit (or start) wakes the sealer again
            logger.exception("could not chain the pending audit events")
            connections[self.using].close()


_sealer: list[Sealer] = []


def start_sealer() -> Sealer | None:
    """Start this process's sealer once (None when ``CONSOLE_AUDIT_SEAL_SECONDS`` is None: nothing seals by itself)."""
    if _sealer:
        return _sealer[0]
    delay = getattr(settings, "CONSOLE_AUDIT_SEAL_SECONDS", 0.5)
    if delay is None:
        return None
    sealer = Sealer(float(delay))
    _sealer.append(sealer)
    sealer.start()
    return sealer


def stop_sealer() -> None:
    """Chain what this process wrote last and stop its sealer (a graceful stop)."""
    if _sealer:
        _sealer.pop().stop()
