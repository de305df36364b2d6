"""CancelToken: the console's ``ToolContext.signal`` (§1).

toolnexus runs a plain ``def`` tool in a worker thread and an ``async def`` tool on
the event loop, and its client loop takes an ``asyncio.Event``-style ``cancel``
(``is_set()`` / ``await wait()``). One token has to serve all three: a flag under a
lock, futures of any loop to resolve when it trips, and a ``threading.Event`` made
only for a tool that blocks a thread on it (``wait_blocking``). A run waits with
one token for as long as a person takes; most never block a thread on it.
"""

import asyncio
import threading

from toolnexus import ToolContext

REASONS = ("cancelled", "timeout", "shutdown")


class CancelToken:
    __slots__ = ("_tripped", "_lock", "_blocking", "_waiters", "reason")

    def __init__(self) -> None:
        self._tripped = False
        self._lock = threading.Lock()
        self._blocking: threading.Event | None = None  # made by the first wait_blocking
        # (loop, future) pairs to resolve when tripped: wait()'s, and those attached by a wait
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self.reason: str | None = None

    def __repr__(self) -> str:
        return f"<CancelToken {'tripped: ' + str(self.reason) if self.is_set() else 'clear'}>"

    def trip(self, reason: str = "cancelled") -> bool:
        """Trip the token once; later trips keep the first reason. Returns True if this call tripped it."""
        if reason not in REASONS:
            raise ValueError(f"unknown cancel reason {reason!r}; expected one of {', '.join(REASONS)}")
        with self._lock:
            if self._tripped:
                return False
            self.reason = reason
            self._tripped = True
            blocking = self._blocking
            waiters, self._waiters = self._waiters, []
        if blocking is not None:
            blocking.set()
        for loop, future in waiters:
            try:
                loop.call_soon_threadsafe(_resolve, future)
            except RuntimeError:  # that loop is closed: nothing waits there any more
                pass
        return True

    def set(self) -> None:
        """``asyncio.Event`` spelling, so the token can be toolnexus' ``cancel``."""
        self.trip("cancelled")

    def is_set(self) -> bool:
        return self._tripped

    @property
    def cancelled(self) -> bool:
        return self._tripped

    def attach(self, future: asyncio.Future[None]) -> None:
        """Resolve ``future`` (of the running loop) when the token trips; at once if it has. ``detach`` it after."""
        with self._lock:
            if not self._tripped:
                self._waiters.append((future.get_loop(), future))
                return
        _resolve(future)

    def detach(self, future: asyncio.Future[None]) -> None:
        with self._lock:
            self._waiters = [(loop, f) for loop, f in self._waiters if f is not future]

    async def wait(self) -> bool:
        """Wait until tripped (from any thread); returns True like ``asyncio.Event.wait``."""
        if self._tripped:
            return True
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.attach(future)
        try:
            await future
        finally:
            self.detach(future)
        return True

    def wait_blocking(self, timeout: float | None = None) -> bool:
        """For a sync tool in a worker thread: sleep up to ``timeout`` seconds, waking at once if tripped.

        Returns True if the token is tripped.
        """
        with self._lock:
            if self._tripped:
                return True
            if self._blocking is None:
                self._blocking = threading.Event()
            blocking = self._blocking
        return blocking.wait(timeout)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def is_cancelled(ctx: ToolContext | None) -> bool:
    """True when a ``ToolContext`` carries a tripped signal; ``ctx`` and ``ctx.signal`` may be None."""
    signal = getattr(ctx, "signal", None)
    return bool(signal is not None and signal.is_set())
