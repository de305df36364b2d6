"""CancelToken: the console's ``ToolContext.signal`` (§1).

toolnexus runs a plain ``def`` tool in a worker thread and an ``async def`` tool on
the event loop, and its client loop takes an ``asyncio.Event``-style ``cancel``
(``is_set()`` / ``await wait()``). One token has to serve all three, so it is a
``threading.Event`` underneath with loop-aware async waiters on top.
"""

import asyncio
import threading

from toolnexus import ToolContext

REASONS = ("cancelled", "timeout", "shutdown")


class CancelToken:
    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        # (loop, future) pairs parked in wait()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[bool]]] = []
        self.reason: str | None = None

    def __repr__(self) -> str:
        return f"<CancelToken {'tripped: ' + str(self.reason) if self.is_set() else 'clear'}>"

    def trip(self, reason: str = "cancelled") -> bool:
        """Trip the token once; later trips keep the first reason. Returns True if this call tripped it."""
        if reason not in REASONS:
            raise ValueError(f"unknown cancel reason {reason!r}; expected one of {', '.join(REASONS)}")
        with self._lock:
            if self._event.is_set():
                return False
            self.reason = reason
            self._event.set()
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            loop.call_soon_threadsafe(_resolve, future)
        return True

    def set(self) -> None:
        """``asyncio.Event`` spelling, so the token can be toolnexus' ``cancel``."""
        self.trip("cancelled")

    def is_set(self) -> bool:
        return self._event.is_set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> bool:
        """Wait until tripped (from any thread); returns True like ``asyncio.Event.wait``."""
        if self._event.is_set():
            return True
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._lock:
            if self._event.is_set():
                return True
            self._waiters.append((loop, future))
        try:
            await future
        finally:
            with self._lock:
                if (loop, future) in self._waiters:
                    self._waiters.remove((loop, future))
        return True

    def wait_blocking(self, timeout: float | None = None) -> bool:
        """For a sync tool in a worker thread: sleep up to ``timeout`` seconds, waking at once if tripped.

        Returns True if the token is tripped.
        """
        return self._event.wait(timeout)


def _resolve(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(True)


def is_cancelled(ctx: ToolContext | None) -> bool:
    """True when a ``ToolContext`` carries a tripped signal; ``ctx`` and ``ctx.signal`` may be None."""
    signal = getattr(ctx, "signal", None)
    return bool(signal is not None and signal.is_set())
