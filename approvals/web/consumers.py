"""The sockets: the dashboard's (/ws/console/) and a remote host's (/ws/host/).

The dashboard gets a snapshot on connect (the first page of open requests and
active runs, and the totals), then numbered events; answers, cancels, ``page``
frames (the next page after a cursor) and ``timeline`` frames (a page of one run's
events, for the run page) come in. Every event carries ``seq`` and
``prev`` so it can tell when it missed one and ask for a fresh snapshot.

A host socket is authenticated by an API token and is sent the answers to the
requests its user opened (and to any it ``watch``es), each once. It follows the
same sequence numbers, so a dropped notification is read from the database.

Thin by design: parse a frame, call decisions/runner/selectors, send the result.
"""

import asyncio
import json
import random
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar

from channels.consumer import get_handler_name
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.contrib.auth.models import User

from approvals import frames, keyset, selectors, shapes
from approvals.events import CONSOLE_GROUP, rejoin
from approvals.models import ApiToken
from approvals.review import deadlines, decisions, intake
from approvals.review.intake import NotJson, parse_json
from approvals.runs import runner
from approvals.team import policies, tokens
from approvals.telemetry import metrics
from approvals.web.team_socket import FrameError, TeamSocketMixin

# The host socket's handshake from a client address locked out for refused tokens (HTTP's 429).
LOCKED_OUT_CLOSE_CODE = 4429

# A frame handler as a consumer's ``handlers`` lists it: a method of that consumer's class, unbound, so its
# first argument is the consumer (Any: each consumer has its own handlers and its own class).
FrameHandler = Callable[[Any, dict[str, Any], object], Awaitable[None]]


def logged_in_user(candidate: object) -> User | None:
    """The scope's ``user`` when it is a logged-in user; None for no user or AnonymousUser."""
    return candidate if isinstance(candidate, User) and candidate.is_authenticated else None


def safety_tick_wait() -> float:
    """One wait of a socket's safety tick: SAFETY_TICK_SECONDS, give or take a quarter, so ticks spread out."""
    return settings.TOOLNEXUS["SAFETY_TICK_SECONDS"] * random.uniform(0.75, 1.25)


class EncodedEvents:
    """The text of the event being fanned out, per (viewer, prev), so 100 dashboards of one team encode it once.

    One per event loop; it keeps only the newest event (the in-memory layer hands every
    socket the same frame object, so identity tells it apart).
    """

    _per_loop: ClassVar[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, "EncodedEvents"]] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self) -> None:
        self.frame: dict[str, Any] | None = None
        self.texts: dict[tuple[int, policies.Viewer | None], str] = {}

    @classmethod
    def of_running_loop(cls) -> "EncodedEvents":
        loop = asyncio.get_running_loop()
        encoded = cls._per_loop.get(loop)
        if encoded is None:
            encoded = cls._per_loop[loop] = cls()
        return encoded

    def text(self, frame: dict[str, Any], prev: int, viewer: policies.Viewer | None) -> str:
        if frame is not self.frame:
            self.frame, self.texts = frame, {}
        key = (prev, viewer)
        text = self.texts.get(key)
        if text is None:
            text = self.texts[key] = json.dumps(frames.frame_for_user({**frame, "prev": prev}, viewer))
        return text


# How long a follower waits for an id that no committed event held (ChangeFollower.note_unseen).
UNSEEN_SECONDS = 60.0


class ChangeFollower(AsyncWebsocketConsumer):
    """The lifecycle both sockets share: they follow the console's committed changes by sequence number.

    A change that comes next in order is passed on from its frame (``forward``); after a gap the socket
    reads what it missed from the database (``catch_up``). A safety tick, every SAFETY_TICK_SECONDS or
    so, checks the socket is still welcome, rejoins its groups (Channels drops a member after a day) and
    catches up if a notification was lost, so a dropped message delays a change, never loses it.
    """

    seq: int
    lock: asyncio.Lock
    ticker: "asyncio.Future[None] | None" = None
    socket_kind: ClassVar[str]  # the metrics' label: "console" or "host"
    counted = False  # accepted, so counted among the connected sockets until it disconnects
    # PostgreSQL: ids at or below ``seq`` that no committed event held when this socket passed them, with
    # when they were first missed; each is passed on late when it commits (selectors.absent_ids).
    unseen: dict[int, float]

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Hands each message straight to its handler, without Channels' ``aclose_old_connections()`` hop
        to the database thread first: every database call of these consumers goes through
        ``database_sync_to_async``, which closes old connections itself. Why it matters: docs/performance.md.
        """
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def start_following(self) -> None:
        """Join the console's group (before accept, so no change committed after ``seq`` is missed)."""
        self.lock = asyncio.Lock()
        self.unseen = {}
        await self.channel_layer.group_add(CONSOLE_GROUP, self.channel_name)

    def start_safety_tick(self) -> None:
        self.ticker = asyncio.ensure_future(self.safety_tick())

    async def accept(self, subprotocol: str | None = None, headers: list[tuple[str, str]] | None = None) -> None:
        await super().accept(subprotocol, headers)
        metrics.SOCKETS_CONNECTED.labels(kind=self.socket_kind).inc()
        self.counted = True

    async def stop_following(self) -> None:
        if self.counted:
            metrics.SOCKETS_CONNECTED.labels(kind=self.socket_kind).dec()
            self.counted = False
        if self.ticker is not None:
            self.ticker.cancel()
        await self.channel_layer.group_discard(CONSOLE_GROUP, self.channel_name)

    async def console_changed(self, message: dict[str, Any]) -> None:
        """A change was committed somewhere: pass it on, or catch up from the database after a gap."""
        async with self.lock:
            seq = message["seq"]
            if seq <= self.seq:
                if seq in self.unseen:  # committed after a higher id was passed on (PostgreSQL)
                    del self.unseen[seq]
                    frame = message.get("frame")
                    await self.pass_on_late([frame] if frame is not None else await frames.aframes_of([seq]))
                return
            if seq == self.seq + 1 and message.get("frame"):
                await self.forward(message["frame"], seq)
            else:
                metrics.SOCKET_RESYNCS.labels(kind=self.socket_kind, cause="gap").inc()
                # Looked at first: an id that commits in between comes twice (harmless), never not at all.
                absent = await selectors.aabsent_ids(self.seq, seq)
                await self.catch_up(seq)
                self.note_unseen(absent)

    def follow_from(self, seq: int, absent: list[int]) -> None:
        """Start at ``seq``; the ``absent`` ids below it, read in the same view as ``seq`` (their transactions
        were still open then), come late (selectors.follow_point, frames.snapshot_to_follow)."""
        self.seq = seq
        self.note_unseen(absent)

    def note_unseen(self, ids: list[int]) -> None:
        now = asyncio.get_running_loop().time()
        for pk in ids:
            self.unseen.setdefault(pk, now)
        for pk, since in list(self.unseen.items()):
            if now - since > UNSEEN_SECONDS:  # a rollback lost it: no transaction stays open that long
                del self.unseen[pk]

    async def pass_on_late(self, late: list[dict[str, Any]]) -> None:
        """Pass on frames of changes below ``self.seq`` that committed after it was reached; ``self.seq`` stays."""
        newest = self.seq
        for frame in late:
            await self.forward(frame, frame["seq"])
            self.seq = newest

    async def forward(self, frame: dict[str, Any], seq: int) -> None:
        """Pass on the frame of change ``seq``, the next in order; ``self.seq`` becomes ``seq``."""
        raise NotImplementedError

    async def catch_up(self, seq: int) -> None:
        """Read from the database what happened after ``self.seq`` up to ``seq``; ``self.seq`` becomes ``seq``."""
        raise NotImplementedError

    async def still_welcome(self) -> bool:
        """On the safety tick, before anything else: False once the socket was closed (its session or token ended)."""
        return True

    def groups_to_rejoin(self) -> tuple[str, ...]:
        return (CONSOLE_GROUP,)

    async def safety_tick(self) -> None:
        while True:
            await asyncio.sleep(safety_tick_wait())
            if not await self.still_welcome():
                return
            await rejoin(self.channel_layer, self.channel_name, *self.groups_to_rejoin())
            newest = await selectors.alast_seq()
            if newest > self.seq:
                await self.console_changed({"seq": newest})
            if self.unseen:  # their notices may have been lost too
                async with self.lock:
                    came = await frames.aframes_of(list(self.unseen))
                    for frame in came:
                        self.unseen.pop(frame["seq"], None)
                    await self.pass_on_late(came)
                    self.note_unseen([])


class ConsoleConsumer(TeamSocketMixin, ChangeFollower):
    """The dashboard's socket; team features (who may answer, presence, logout) come from TeamSocketMixin."""

    socket_kind = "console"

    async def connect(self) -> None:
        user = logged_in_user(self.scope.get("user"))
        if user is None:
            await self.close(code=4401)  # before accept: the handshake is refused
            return
        self.user = user
        self.seq = 0
        self.sent_seq = 0
        await self.start_following()
        await self.join_team()
        await self.accept()
        await self.send_snapshot()
        self.start_safety_tick()

    async def disconnect(self, code: int) -> None:
        await self.stop_following()
        await self.leave_team()

    # -- outgoing ----------------------------------------------------------------

    async def send_json(self, content: dict[str, Any]) -> None:
        # Frames are shared by every socket; what this viewer may answer is added last, here.
        await self.send(text_data=json.dumps(frames.frame_for_user(content, self.viewer)))

    async def send_snapshot(self) -> None:
        async with self.lock:
            frame, absent = await frames.asnapshot_to_follow(self.viewer)
            self.follow_from(frame["seq"], absent)
            await self.send_json(frame)
        await self.send_all_presence()

    async def forward(self, frame: dict[str, Any], seq: int) -> None:
        await self.send(text_data=EncodedEvents.of_running_loop().text(frame, self.seq, self.viewer))
        self.seq = seq

    async def catch_up(self, seq: int) -> None:
        missed = await frames.aframes_after(self.seq, seq)
        while missed:
            for frame in missed:
                await self.send_json({**frame, "prev": self.seq})
                self.seq = frame["seq"]
            # frames_after returns one page (500 events): a longer gap takes more than one read.
            missed = await frames.aframes_after(self.seq, seq) if self.seq < seq else []
        self.seq = max(self.seq, seq)

    async def still_welcome(self) -> bool:
        return await self.team_tick()

    def groups_to_rejoin(self) -> tuple[str, ...]:
        return (CONSOLE_GROUP, *self.team_groups())

    # -- incoming ----------------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        await dispatch_frame(self, text_data)

    async def on_answer(self, frame: dict[str, Any], ref: object) -> None:
        request_id = frame.get("request")
        if not isinstance(request_id, str):
            raise FrameError("'answer' needs 'request': the id of the request to answer.")
        if not isinstance(frame.get("ok"), bool):
            raise FrameError("'answer' needs 'ok': true to approve or answer, false to decline.")
        if not isinstance(frame.get("digest", ""), str):
            raise FrameError("'answer''s 'digest' is the 'call_digest' text of the request view it was made on.")
        answer = await decisions.aresolve_request(
            request_id,
            ok=frame["ok"],
            data=frame.get("data"),
            form=frame.get("form"),
            reason=frame.get("reason"),
            comment=str(frame.get("comment") or ""),
            user=self.user,
            via="web",
            # A decline's reject option, and respond / request changes with their message (the door checks them).
            response=frame.get("response"),
            message=frame.get("message"),
            option=frame.get("option"),
            # The call digest of the card it was made on: another call under the same id is refused (conflict).
            digest=frame.get("digest"),
        )
        if isinstance(answer, decisions.ApprovalRecorded):  # under a quorum: counted, still open
            await self.send_json({"type": "approval_recorded", "ref": ref, **answer.as_dict()})
            return
        await self.send_json({"type": "answered", "ref": ref, "answer": shapes.wire_answer(answer)})

    async def on_extend(self, frame: dict[str, Any], ref: object) -> None:
        """``{"type": "extend", "request": <id>, "minutes": 60}``: move its deadline later (minutes optional).
        Every dashboard, this one included, sees the new deadline in the event's frame."""
        request_id = frame.get("request")
        if not isinstance(request_id, str):
            raise FrameError("'extend' needs 'request': the id of the request whose deadline to move.")
        row = await deadlines.aextend_request(request_id, user=self.user, minutes=frame.get("minutes"))
        await self.send_json({"type": "extended", "ref": ref, "request": row.pk, "expiresAt": row.expires_at_wire})

    async def on_cancel_run(self, frame: dict[str, Any], ref: object) -> None:
        run_id = frame.get("run")
        if isinstance(run_id, bool) or not isinstance(run_id, int):
            raise FrameError("'cancel_run' needs 'run': the numeric id of the run.")
        run = await runner.cancel_run(run_id, user=self.user)
        await self.send_json({"type": "cancel_requested", "ref": ref, "run": run.pk})

    async def on_resync(self, frame: dict[str, Any], ref: object) -> None:
        metrics.SOCKET_RESYNCS.labels(kind=self.socket_kind, cause="asked").inc()
        await self.send_snapshot()

    async def on_page(self, frame: dict[str, Any], ref: object) -> None:
        """The next page of open requests (with ``"of": "runs"``, active runs) after the cursor ``after``.

        ``"run": <id>`` asks for one run's open requests (the run page); without ``after``, from the first.
        """
        of = frame.get("of", "requests")
        if of not in ("requests", "runs"):
            raise FrameError(f"'page' has 'of': {of!r}; use \"requests\" or \"runs\".")
        after, run = frame.get("after"), frame.get("run")
        if after is not None and not isinstance(after, str):
            raise FrameError("'page' has a bad 'after': send the 'next' cursor of the snapshot or of the page before.")
        if run is not None and (
            of != "requests" or isinstance(run, bool) or not isinstance(run, int) or not 1 <= run <= keyset.MAX_ID
        ):
            raise FrameError(f"'page' takes 'run' (a run's id, 1 to {keyset.MAX_ID}) only with 'of': \"requests\".")
        if after is None and run is None:
            raise FrameError("'page' needs 'after': the 'next' cursor of the snapshot or of the page before.")
        # Under the lock: an event committed after the page was read reaches the page after it, never before.
        async with self.lock:
            try:
                page = await frames.apage_frame(of, after, run)
            except keyset.CursorError as exc:
                raise FrameError(str(exc)) from None
            await self.send_json({**page, "ref": ref})

    async def on_timeline(self, frame: dict[str, Any], ref: object) -> None:
        """A page of one run's timeline (the run page): ``after`` an event number, the events that followed
        it (what a page drawn up to it missed); else the ones before ``before`` ("Show earlier")."""
        run, after, before = frame.get("run"), frame.get("after"), frame.get("before")
        if isinstance(run, bool) or not isinstance(run, int) or not 1 <= run <= keyset.MAX_ID:
            raise FrameError(f"'timeline' needs 'run': a run's id, 1 to {keyset.MAX_ID}.")
        for name, number in (("after", after), ("before", before)):
            if number is not None and (
                isinstance(number, bool) or not isinstance(number, int) or not 0 <= number <= keyset.MAX_ID
            ):
                raise FrameError(f"'timeline' has a bad {name!r}: send the number ('seq') of an event it showed.")
        if after is not None and before is not None:
            raise FrameError("'timeline' takes 'after' (the events since) or 'before' (earlier ones), not both.")
        # Under the lock: an event committed after the page was read reaches the page after it, never before.
        async with self.lock:
            page = await frames.atimeline_frame(run, after=after, before=before)
            await self.send_json({**page, "ref": ref})

    handlers: ClassVar[Mapping[str, FrameHandler]] = {
        "answer": on_answer,
        "cancel_run": on_cancel_run,
        "extend": on_extend,
        "page": on_page,
        "resync": on_resync,
        "timeline": on_timeline,
        "viewing": TeamSocketMixin.on_viewing,
    }


def read_frame(text_data: str | None, handlers: Mapping[str, FrameHandler]) -> tuple[dict[str, Any], FrameHandler]:
    """Parse one incoming text frame; returns ``(frame, handler)`` or raises FrameError saying what is wrong."""
    if text_data is None:
        raise FrameError("Send text frames with JSON; binary frames are not understood.")
    # surrogatepass: a lone surrogate is measured here and refused by parse_json with a message.
    if len(text_data.encode("utf-8", "surrogatepass")) > settings.TOOLNEXUS["MAX_FRAME_BYTES"]:
        raise FrameError(f"Frame too large: at most {settings.TOOLNEXUS['MAX_FRAME_BYTES']} bytes.")
    try:
        frame = parse_json(text_data)
    except NotJson as exc:
        raise FrameError(f"The frame is not JSON the console accepts: {exc}.") from None
    if not isinstance(frame, dict):
        raise FrameError("A frame must be a JSON object with a 'type'.")
    frame_type = frame.get("type")
    handler = handlers.get(frame_type) if isinstance(frame_type, str) else None
    if handler is None:
        raise FrameError(f"Unknown frame type {frame_type!r}; expected one of {', '.join(sorted(handlers))}.")
    return frame, handler


async def dispatch_frame(consumer: "ConsoleConsumer | HostConsumer", text_data: str | None) -> None:
    """Run the consumer's handler for a frame; a refusal goes back as an ``error`` frame, never a closed socket."""
    ref = None
    try:
        frame, handler = read_frame(text_data, consumer.handlers)
        ref = frame.get("ref")
        await handler(consumer, frame, ref)
    except FrameError as exc:
        await consumer.send_json({"type": "error", "error": "bad_frame", "message": str(exc), "ref": ref})
    except decisions.DecisionError as exc:
        await consumer.send_json({"type": "error", "ref": ref, **exc.as_dict()})


class HostConsumer(ChangeFollower):
    """A remote host's socket: ``{"type": "answer", "answer": {...}}`` as its requests are resolved.

    Refused at the handshake (close code 4401) without a valid token, 4429 from a client address
    locked out for refused tokens; the token is re-checked before answers are sent, so a revoked
    token gets no more.
    """

    socket_kind = "host"

    async def connect(self) -> None:
        user, token = logged_in_user(self.scope.get("user")), self.scope.get("api_token")
        if self.scope.get("token_locked_out"):
            await self.close(code=LOCKED_OUT_CLOSE_CODE)
            return
        if not isinstance(token, ApiToken) or user is None:
            await self.close(code=4401)
            return
        self.user, self.token = user, token
        self.username = self.user.get_username()
        self.watched: set[str] = set()
        self.delivered: set[str] = set()  # request ids whose answer was sent: an answer is final, so once is enough
        await self.start_following()
        self.follow_from(*await selectors.afollow_point())
        await self.accept()
        self.start_safety_tick()

    async def disconnect(self, code: int) -> None:
        await self.stop_following()

    async def send_json(self, content: dict[str, Any]) -> None:
        await self.send(text_data=json.dumps(content))

    async def deliver(self, answer: shapes.WireAnswer) -> None:
        if answer["id"] not in self.delivered:
            self.delivered.add(answer["id"])
            await self.send_json({"type": "answer", "answer": answer})

    async def forward(self, frame: dict[str, Any], seq: int) -> None:
        """Send the answer this change carries for this host, if any."""
        answer = frames.host_answer_in_frame(frame, self.username, self.watched)
        await self.send_answers([answer] if answer is not None else [], seq)

    async def catch_up(self, seq: int) -> None:
        """Send the answers for this host recorded after ``self.seq`` up to ``seq``."""
        await self.send_answers(await frames.ahost_answers_after(self.user.pk, self.watched, self.seq, seq), seq)

    async def send_answers(self, answers: list[shapes.WireAnswer], seq: int) -> None:
        self.seq = seq
        if answers and not await tokens.ais_active(self.token.pk):
            await self.close(code=4401)
            return
        for answer in answers:
            await self.deliver(answer)

    async def still_welcome(self) -> bool:
        if not await tokens.ais_active(self.token.pk):
            await self.close(code=4401)
            return False
        return True

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        await dispatch_frame(self, text_data)

    async def on_watch(self, frame: dict[str, Any], ref: object) -> None:
        """Follow one request: its answer now if it has one, else when it comes."""
        request_id = frame.get("request")
        if not intake.is_valid_request_id(request_id):
            raise FrameError("'watch' needs 'request': the id of a request.")
        if not await selectors.arequest_exists(request_id):
            raise decisions.DecisionError("not_found", f"There is no request with id {request_id!r}.")
        async with self.lock:
            self.watched.add(request_id)
            answer = await selectors.astored_answer(request_id)
            if answer is not None:
                self.delivered.discard(request_id)  # asked for explicitly: send it again
                await self.deliver(shapes.wire_answer(answer))
            else:
                await self.send_json({"type": "watching", "request": request_id, "status": "open", "ref": ref})

    handlers: ClassVar[Mapping[str, FrameHandler]] = {"watch": on_watch}
