"""Who else is looking at a request right now ("also here: bob").

A dashboard sends ``{"type": "viewing", "request": id}`` for each request card on
screen, again every few seconds while it stays there. Each sighting is broadcast
on the channel layer (so every console process hears of it) and kept in this
process's PresenceBoard until its time-to-live runs out or the socket closes.
Nothing is stored in the database: presence is a courtesy, not a record.
"""

import threading
import time
from collections.abc import Callable

from django.conf import settings

PRESENCE_GROUP = "console-presence"
# A sighting lasts this long unless renewed; dashboards renew well within it.
DEFAULT_TTL_SECONDS = 30.0
MAX_REQUESTS_PER_SOCKET = 200  # one socket cannot fill the board


def ttl_seconds() -> float:
    return float(settings.TOOLNEXUS.get("PRESENCE_TTL_SECONDS", DEFAULT_TTL_SECONDS))


class PresenceBoard:
    """Process-local: for each request, which sockets (and so which users) look at it, and until when."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._seen: dict[str, dict[str, tuple[str, float]]] = {}  # request id -> {channel name: (username, until)}

    def saw(self, request_id: str, channel: str, username: str, seconds: float) -> bool:
        """Record a sighting; False when the socket already watches too many other requests."""
        with self._lock:
            watching = sum(1 for viewers in self._seen.values() if channel in viewers)
            viewers = self._seen.setdefault(request_id, {})
            if channel not in viewers and watching >= MAX_REQUESTS_PER_SOCKET:
                if not viewers:
                    del self._seen[request_id]
                return False
            viewers[channel] = (username, self.clock() + seconds)
            return True

    def left(self, channel: str) -> set[str]:
        """A socket closed: forget its sightings; returns the requests it was looking at."""
        with self._lock:
            touched = {request_id for request_id, viewers in self._seen.items() if viewers.pop(channel, None)}
            for request_id in touched:
                if not self._seen[request_id]:
                    del self._seen[request_id]
            return touched

    def viewers(self, request_id: str) -> list[str]:
        """The distinct usernames looking at ``request_id`` now (expired sightings are dropped)."""
        now = self.clock()
        with self._lock:
            viewers = self._seen.get(request_id)
            if not viewers:
                return []
            for channel in [c for c, (_, until) in viewers.items() if until <= now]:
                del viewers[channel]
            if not viewers:
                del self._seen[request_id]
                return []
            return sorted({username for username, _ in viewers.values()})

    def request_ids(self) -> list[str]:
        with self._lock:
            return list(self._seen)

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()


board = PresenceBoard()


def others(request_id: str, username: str) -> tuple[str, ...]:
    """Who besides ``username`` looks at the request."""
    return tuple(name for name in board.viewers(request_id) if name != username)
