"""Replaces Channels' in-memory ``group_send`` (a deep copy and a task per member, a sweep of every
channel per send) with one shared copy per group send, so one event reaches 100 dashboards in time.
Measurements: docs/performance.md."""

import asyncio
import copy
import math
import time
from typing import Any

from channels.layers import InMemoryChannelLayer

# Messages expire after a minute (the layer's ``expiry``): sweeping for them once a second is enough.
SWEEP_SECONDS = 1.0


class FanOutInMemoryChannelLayer(InMemoryChannelLayer):
    """Same semantics (capacity, expiry, groups); a group's members share one copy of the message.

    Receivers only read what they are sent; each gets its own top-level dict, so a
    handler that sets a key does not change another's.
    """

    _swept_at = -math.inf

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now - self._swept_at < SWEEP_SECONDS:
            return
        self._swept_at = now
        # Channels' own sweep is private, so channels-stubs leave it out; tests/hotpath run it on the installed one.
        super()._clean_expired()  # type: ignore[misc]

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "Message is not a dict"
        self.send_to_group(group, copy.deepcopy(message))  # the sender may go on changing its own

    def send_to_group(self, group: str, shared: dict[str, Any]) -> None:
        """``group_send`` without the copy and without awaiting, on the layer's event loop: for a sender
        that hands ``shared`` over and never changes it (events.Outbox, which built it for this send)."""
        self.require_valid_group_name(group)
        self._clean_expired()
        expires = time.time() + self.expiry
        for channel in list(self.groups.get(group, ())):
            queue = self.channels.setdefault(channel, asyncio.Queue(maxsize=self.get_capacity(channel)))
            try:
                queue.put_nowait((expires, dict(shared)))
            except asyncio.QueueFull:
                pass  # as upstream: a full channel misses this one (its listener catches up by sequence)
