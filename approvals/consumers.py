"""The dashboard's WebSocket: a snapshot on connect, then numbered events; answers and cancels in.

Thin by design: parse a frame, call decisions/runner, send the result. Every frame
the dashboard receives carries ``seq`` and ``prev`` so it can tell when it missed
one and ask for a fresh snapshot.
"""
import asyncio
import json

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from . import decisions, runner, selectors
from .api import parse_json
from .events import CONSOLE_GROUP

snapshot = database_sync_to_async(selectors.snapshot)
frames_after = database_sync_to_async(selectors.frames_after)
last_seq = database_sync_to_async(selectors.last_seq)

# Without any notification a dashboard still re-checks the database this often.
SAFETY_TICK_SECONDS = 5.0


class ConsoleConsumer(AsyncWebsocketConsumer):
    async def connect(self):
        self.user = self.scope.get("user")
        if self.user is None or not self.user.is_authenticated:
            await self.close(code=4401)  # before accept: the handshake is refused
            return
        self.seq = 0
        self.sent_seq = 0
        self.lock = asyncio.Lock()
        await self.channel_layer.group_add(CONSOLE_GROUP, self.channel_name)
        await self.accept()
        await self.send_snapshot()
        self.ticker = asyncio.ensure_future(self.safety_tick())

    async def disconnect(self, code):
        ticker = getattr(self, "ticker", None)
        if ticker is not None:
            ticker.cancel()
        await self.channel_layer.group_discard(CONSOLE_GROUP, self.channel_name)

    # -- outgoing ----------------------------------------------------------------

    async def send_json(self, content):
        await self.send(text_data=json.dumps(content))

    async def send_snapshot(self):
        async with self.lock:
            frame = await snapshot()
            self.seq = frame["seq"]
            await self.send_json(frame)

    async def console_changed(self, message):
        """A change was committed somewhere; forward it, or catch up from the database after a gap."""
        async with self.lock:
            seq = message["seq"]
            if seq <= self.seq:
                return
            if seq == self.seq + 1 and message.get("frame"):
                frames = [message["frame"]]
            else:
                frames = await frames_after(self.seq, seq)
            while frames:
                for frame in frames:
                    await self.send_json({**frame, "prev": self.seq})
                    self.seq = frame["seq"]
                # frames_after returns one page (500 events): a longer gap takes more than one read.
                frames = await frames_after(self.seq, seq) if self.seq < seq else []
            self.seq = max(self.seq, seq)

    async def safety_tick(self):
        while True:
            await asyncio.sleep(SAFETY_TICK_SECONDS)
            newest = await last_seq()
            if newest > self.seq:
                await self.console_changed({"seq": newest})

    # -- incoming ----------------------------------------------------------------

    async def receive(self, text_data=None, bytes_data=None):
        ref = None
        try:
            if text_data is None:
                raise FrameError("Send text frames with JSON; binary frames are not understood.")
            if len(text_data.encode()) > settings.TOOLNEXUS["MAX_FRAME_BYTES"]:
                raise FrameError(f"Frame too large: at most {settings.TOOLNEXUS['MAX_FRAME_BYTES']} bytes.")
            try:
                frame = parse_json(text_data)
            except (ValueError, RecursionError) as exc:  # RecursionError: nesting too deep to decode
                raise FrameError(f"Malformed JSON: {exc}.") from None
            if not isinstance(frame, dict):
                raise FrameError("A frame must be a JSON object with a 'type'.")
            ref = frame.get("ref")
            frame_type = frame.get("type")
            handler = self.handlers.get(frame_type) if isinstance(frame_type, str) else None
            if handler is None:
                raise FrameError(
                    f"Unknown frame type {frame.get('type')!r}; expected one of {', '.join(sorted(self.handlers))}."
                )
            await handler(self, frame, ref)
        except FrameError as exc:
            await self.send_json({"type": "error", "error": "bad_frame", "message": str(exc), "ref": ref})
        except decisions.DecisionError as exc:
            await self.send_json({"type": "error", "ref": ref, **exc.as_dict()})

    async def on_answer(self, frame, ref):
        request_id = frame.get("request")
        if not isinstance(request_id, str):
            raise FrameError("'answer' needs 'request': the id of the request to answer.")
        if not isinstance(frame.get("ok"), bool):
            raise FrameError("'answer' needs 'ok': true to approve or answer, false to decline.")
        answer = await decisions.aresolve_request(
            request_id,
            ok=frame["ok"],
            data=frame.get("data"),
            form=frame.get("form"),
            reason=frame.get("reason"),
            comment=str(frame.get("comment") or ""),
            user=self.user,
        )
        await self.send_json({"type": "answered", "ref": ref, "answer": selectors.wire_answer(answer)})

    async def on_cancel_run(self, frame, ref):
        run_id = frame.get("run")
        if isinstance(run_id, bool) or not isinstance(run_id, int):
            raise FrameError("'cancel_run' needs 'run': the numeric id of the run.")
        run = await runner.cancel_run(run_id, user=self.user)
        await self.send_json({"type": "cancel_requested", "ref": ref, "run": run.pk})

    async def on_resync(self, frame, ref):
        await self.send_snapshot()

    handlers = {"answer": on_answer, "cancel_run": on_cancel_run, "resync": on_resync}


class FrameError(Exception):
    pass

