"""A run's own time (issue 35, human-aware time): its ``timeout`` counts the tool's and the model's time, not
the time the run waits for a person, which that request's deadline (``expiresAt``) governs.

A run that asked for the old behaviour (``Run.timeout_counts_waiting``) keeps a wall clock: a wait for a
person counts, and the run's deadline also ends the wait (the request expires with the run).
"""

import asyncio
import time
from collections.abc import Iterable
from datetime import datetime


class RunClock:
    """The run's deadline on ``time.monotonic()``, paused while the run waits for a person.

    Waits may overlap (an agent turn's suspensions, a question asked from inside a call): the clock
    stays paused from the first one's start to the last one's end, so no waiting second counts twice.
    """

    def __init__(self, timeout: float | None, *, used: float = 0.0, counts_waiting: bool = False) -> None:
        self.timeout = timeout
        self.counts_waiting = counts_waiting
        # ``used``: the own seconds a run resumed in this process already spent (``own_seconds_used``).
        self.deadline = time.monotonic() + timeout - used if timeout is not None else None
        self._waits = 0
        self._paused_at: float | None = None
        self._changed = asyncio.Event()

    @property
    def paused(self) -> bool:
        return self._paused_at is not None

    def remaining(self) -> float | None:
        """The run's own seconds left (frozen while paused); None without a timeout."""
        if self.deadline is None:
            return None
        now = self._paused_at if self._paused_at is not None else time.monotonic()
        return max(0.0, self.deadline - now)

    def wait_deadline(self) -> float | None:
        """Until when a wait for a person may last as far as the run goes: its deadline under the wall clock,
        None under human-aware time (the request's own deadline ends the wait)."""
        return self.deadline if self.counts_waiting else None

    def start_waiting(self) -> None:
        """A wait for a person begins: the own time stops (not under the wall clock)."""
        self._waits += 1
        if self._waits == 1 and not self.counts_waiting and self.deadline is not None:
            self._paused_at = time.monotonic()
            self._changed.set()

    def stop_waiting(self) -> None:
        """A wait for a person is over: the own time goes on from where it stopped."""
        self._waits = max(0, self._waits - 1)
        if self._waits == 0 and self._paused_at is not None:
            assert self.deadline is not None  # paused only with a deadline
            self.deadline += time.monotonic() - self._paused_at
            self._paused_at = None
            self._changed.set()

    async def run_out(self) -> None:
        """Return once the run's own time is used up; never, without a timeout."""
        while True:
            self._changed.clear()
            left = self.remaining()
            if left is not None and left <= 0 and not self.paused:
                return
            timeout = None if left is None or self.paused else left
            try:
                await asyncio.wait_for(self._changed.wait(), timeout)
            except TimeoutError:
                pass


def own_seconds_used(created_at: datetime, now: datetime, waits: Iterable[tuple[datetime, datetime | None]]) -> float:
    """The own seconds a run used from ``created_at`` to ``now``: the wall time minus the union of its waits
    for a person (each a request's opening to its answer, or to ``now`` while open), so overlapping waits
    count once. What a process that resumes the run after a restart starts its clock from."""
    spans = sorted((max(opened, created_at), min(answered or now, now)) for opened, answered in waits)
    waited = 0.0
    end = created_at
    for start, stop in spans:
        start = max(start, end)
        if stop > start:
            waited += (stop - start).total_seconds()
            end = stop
    return max(0.0, (now - created_at).total_seconds() - waited)
