"""What the dashboard socket does for a team: per-viewer policy bits, presence, and closing on logout.

A mixin for ConsoleConsumer, so the consumer itself stays a thin frame router:
``join_team`` / ``leave_team`` / ``team_tick`` are called from its connect,
disconnect and safety tick; the channel-layer handlers (``session_ended``,
``presence_seen``, ``presence_left``) and the ``viewing`` frame live here.
"""

from typing import Any

from channels.generic.websocket import AsyncWebsocketConsumer
from django.contrib.auth.models import User

from approvals.review import intake
from approvals.team import accounts, policies, presence

LOGGED_OUT_CLOSE_CODE = 4401


class FrameError(Exception):
    """A frame the console cannot act on; its message says what to send instead."""


class TeamSocketMixin(AsyncWebsocketConsumer):
    """The team half of ConsoleConsumer; the consumer sets ``user`` (a logged-in user) before ``join_team``."""

    user: User
    viewer: policies.Viewer | None = None
    session_key: str | None = None
    presence_sent: dict[str, tuple[str, ...]]

    async def send_json(self, content: dict[str, Any]) -> None:
        """Send one frame to the browser: the consumer's own, which adds what this viewer may answer."""
        raise NotImplementedError

    def joined_viewer(self) -> policies.Viewer:
        """The viewer ``join_team`` read: every frame and channel-layer message comes after it."""
        if self.viewer is None:
            raise RuntimeError("join_team() runs before the socket is accepted.")
        return self.viewer

    async def join_team(self) -> None:
        """Before accept: who this viewer is, and the groups that reach this socket."""
        self.viewer = await policies.aviewer_of(self.user)
        session = self.scope.get("session")
        self.session_key = getattr(session, "session_key", None) if session is not None else None
        self.presence_sent = {}  # request id -> the viewers this socket was last told about
        for group in self.team_groups():
            await self.channel_layer.group_add(group, self.channel_name)

    def team_groups(self) -> tuple[str, ...]:
        """The groups that reach this socket for its user: their logouts and the team's presence."""
        return (accounts.user_group(self.user.pk), presence.PRESENCE_GROUP)

    async def leave_team(self) -> None:
        if self.viewer is None:
            return
        await self.channel_layer.group_discard(accounts.user_group(self.user.pk), self.channel_name)
        await self.channel_layer.group_discard(presence.PRESENCE_GROUP, self.channel_name)
        presence.board.left(self.channel_name)
        await self.channel_layer.group_send(
            presence.PRESENCE_GROUP, {"type": "presence.left", "channel": self.channel_name}
        )

    async def team_tick(self) -> bool:
        """On the safety tick: still logged in? (else close); groups re-read; expired presence dropped.

        Returns False when the socket was closed.
        """
        if self.session_key and not await accounts.asession_is_valid(self.session_key, self.user.pk):
            await self.close(code=LOGGED_OUT_CLOSE_CODE)
            return False
        self.viewer = await policies.aviewer_of(self.user)
        await self.send_presence_changes()
        return True

    # -- logout ------------------------------------------------------------------------------

    async def session_ended(self, message: dict[str, Any]) -> None:
        if message.get("session") == accounts.session_digest(self.session_key):
            await self.close(code=LOGGED_OUT_CLOSE_CODE)

    # -- presence ------------------------------------------------------------------------------

    async def on_viewing(self, frame: dict[str, Any], ref: object) -> None:
        request_id = frame.get("request")
        if not intake.is_valid_request_id(request_id):
            raise FrameError("'viewing' needs 'request': the id of the request on screen.")
        await self.channel_layer.group_send(
            presence.PRESENCE_GROUP,
            {
                "type": "presence.seen",
                "request": request_id,
                "channel": self.channel_name,
                "user": self.joined_viewer().username,
                "seconds": presence.ttl_seconds(),
            },
        )

    async def presence_seen(self, message: dict[str, Any]) -> None:
        presence.board.saw(message["request"], message["channel"], message["user"], float(message["seconds"]))
        await self.send_presence_for(message["request"])

    async def presence_left(self, message: dict[str, Any]) -> None:
        for request_id in presence.board.left(message["channel"]) | set(self.presence_sent):
            await self.send_presence_for(request_id)

    async def send_presence_for(self, request_id: str) -> None:
        """Tell the browser who else looks at ``request_id``, when that changed since it was last told."""
        names = presence.others(request_id, self.joined_viewer().username)
        if self.presence_sent.get(request_id, ()) == names:
            return
        if names:
            self.presence_sent[request_id] = names
        else:
            self.presence_sent.pop(request_id, None)
        await self.send_json({"type": "presence", "request": request_id, "viewers": list(names)})

    async def send_presence_changes(self) -> None:
        for request_id in set(presence.board.request_ids()) | set(self.presence_sent):
            await self.send_presence_for(request_id)

    async def send_all_presence(self) -> None:
        """After a snapshot the page rebuilt its cards: tell it again about everyone on the board."""
        self.presence_sent = {}
        await self.send_presence_changes()
