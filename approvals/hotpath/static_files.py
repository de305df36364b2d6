"""WhiteNoise on the event loop: ``WhiteNoiseMiddleware`` is a sync middleware, so in Django's async chain
every request, static or not, would take a thread hop through it. ``StaticFilesOnTheLoop`` wraps the
ASGI application instead: a GET or HEAD for a file in WhiteNoise's index is answered from the loop with
WhiteNoise's own headers and compressed copies, and everything else goes to Django untouched."""

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.typing import (
    ASGIReceiveCallable,
    ASGISendCallable,
    HTTPResponseBodyEvent,
    HTTPResponseStartEvent,
    HTTPScope,
    Scope,
)
from django.conf import settings
from whitenoise.middleware import WhiteNoiseMiddleware
from whitenoise.responders import StaticFile

CHUNK_BYTES = 64 * 1024


class StaticFiles(WhiteNoiseMiddleware):
    """WhiteNoise's file index as its Django middleware builds it (STATIC_ROOT, ``WHITENOISE_*`` settings, the
    finders when DEBUG is on), with a year (not ten) as the max-age of a hashed name: RFC 9111 caches need no more."""

    FOREVER = 365 * 24 * 60 * 60

    def __init__(self) -> None:
        super().__init__(get_response=None)

    def add_mime_headers(self, headers: Any, path: str, url: str) -> None:
        super().add_mime_headers(headers, path, url)
        # What SecurityMiddleware adds to Django's answers: these never reach it.
        if settings.SECURE_CONTENT_TYPE_NOSNIFF:
            headers["X-Content-Type-Options"] = "nosniff"

    def find(self, path: str) -> StaticFile | None:
        """The ``StaticFile`` served at ``path`` (under STATIC_URL), or None."""
        if self.autorefresh:
            return self.find_file(path)
        return self.files.get(path)


class StaticFilesOnTheLoop:
    """ASGI middleware: static files from WhiteNoise's index without leaving the event loop.

    The files are small (console.css, the console's largest, is 28 KB; admin's largest, 325 KB) and read in
    64 KiB chunks: from the page cache a read takes microseconds, less than a hop to a thread and back."""

    def __init__(self, application: Callable[..., Awaitable[None]]) -> None:
        self.application = application
        self.static_files = StaticFiles()
        self.prefix = self.static_files.static_prefix

    async def __call__(self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if scope["type"] == "http":
            path = _path_info(scope)
            if path.startswith(self.prefix):
                static_file = self.static_files.find(path)
                if static_file is not None:
                    return await _serve(static_file, scope, send)
        return await self.application(scope, receive, send)


def _path_info(scope: HTTPScope) -> str:
    path, root_path = scope["path"], scope.get("root_path", "")
    return path[len(root_path) :] if root_path and path.startswith(root_path) else path


async def _serve(static_file: StaticFile, scope: HTTPScope, send: ASGISendCallable) -> None:
    # WhiteNoise reads the request's headers the WSGI way: HTTP_ACCEPT_ENCODING, HTTP_IF_NONE_MATCH, HTTP_RANGE.
    environ = {
        "HTTP_" + name.decode("latin-1").upper().replace("-", "_"): value.decode("latin-1")
        for name, value in scope["headers"]
    }
    response = static_file.get_response(scope["method"], environ)
    headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in response.headers]
    start: HTTPResponseStartEvent = {
        "type": "http.response.start",
        "status": int(response.status),
        "headers": headers,
        "trailers": False,
    }
    await send(start)
    if response.file is not None:
        with response.file as file:
            while chunk := file.read(CHUNK_BYTES):
                body: HTTPResponseBodyEvent = {"type": "http.response.body", "body": chunk, "more_body": True}
                await send(body)
    end: HTTPResponseBodyEvent = {"type": "http.response.body", "body": b"", "more_body": False}
    await send(end)
