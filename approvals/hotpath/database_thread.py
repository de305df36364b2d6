"""Replaces Django's thread per async view: an API call's database work runs on the one thread the runs
and sockets share, and no thread is started for the call (``SharedThreadASGIHandler``).

On SQLite every API call does, so concurrent writers queue instead of sleeping in SQLite's busy handler.
On PostgreSQL the calls that touch a few rows by their keys do (``ROW_CALLS``: a round trip's calls);
the reads that grow with the data (the inbox's list and search, a bulk answer, a transcript) keep
Django's thread and pooled connection per call, so they never hold up the runs and sockets.
Measurements: docs/performance.md."""

import asyncio
import contextvars
import re
from collections.abc import Awaitable, Callable, Coroutine
from functools import wraps
from typing import Any, Concatenate, ParamSpec, TypeVar

import django
from asgiref.sync import SyncToAsync, iscoroutinefunction
from django.core.handlers.asgi import ASGIHandler
from django.db import connections
from django.http import HttpRequest, HttpResponseBase
from django.utils.decorators import sync_and_async_middleware

P = ParamSpec("P")
Response = TypeVar("Response")
# A middleware's next step, as Django hands it over: sync or async, told apart with iscoroutinefunction.
GetResponse = Callable[[HttpRequest], HttpResponseBase | Awaitable[HttpResponseBase]]


# (method, path) of the API calls that read and write a few rows by their keys: on PostgreSQL these share the
# thread too. A call not listed keeps a thread of its own there (its cost may grow with the data).
ROW_CALLS = tuple(
    (method, re.compile(path))
    for method, path in (
        ("POST", r"/api/v1/runs"),
        ("GET", r"/api/v1/runs/\d+"),
        ("POST", r"/api/v1/runs/\d+/(cancel|retry)"),
        ("POST", r"/api/v1/requests"),
        ("GET", r"/api/v1/requests/[^/]+(/answer)?"),
        ("POST", r"/api/v1/requests/[^/]+/(answer|cancel|claim|release|hand)"),
    )
)


def shares_the_database_thread(method: str, path: str) -> bool:
    """Whether an API call (``path`` under /api/) runs its database work on the shared thread."""
    return shares_on(connections["default"].vendor, method, path)


def shares_on(vendor: str, method: str, path: str) -> bool:
    """``shares_the_database_thread`` on a database of ``vendor``."""
    if not path.startswith("/api/"):
        return False
    if vendor == "sqlite":
        return True
    return any(method == listed and pattern.fullmatch(path) for listed, pattern in ROW_CALLS)


def on_the_shared_database_thread(
    view: Callable[Concatenate[HttpRequest, P], Coroutine[Any, Any, Response]],
) -> Callable[Concatenate[HttpRequest, P], Coroutine[Any, Any, Response]]:
    """Run an async view outside its request's thread: its sync calls go to the process's one database thread."""

    @wraps(view)
    async def wrapper(request: HttpRequest, *args: P.args, **kwargs: P.kwargs) -> Response:
        if not shares_the_database_thread(request.method or "", request.path):
            return await view(request, *args, **kwargs)
        context = contextvars.copy_context()
        # Without a ThreadSensitiveContext, asgiref sends thread-sensitive calls to its single thread.
        # asgiref reads the variable with .get(None) and takes None as "no context"; its stub leaves None out.
        context.run(SyncToAsync.thread_sensitive_context.set, None)  # type: ignore[arg-type]
        return await asyncio.get_running_loop().create_task(view(request, *args, **kwargs), context=context)

    return wrapper


@sync_and_async_middleware
def api_calls_share_the_database_thread(get_response: GetResponse) -> GetResponse:
    """Middleware (settings.MIDDLEWARE): an API call that ``shares_the_database_thread``, authentication
    included, runs its view as ``on_the_shared_database_thread`` does. Under WSGI there is no per-request
    thread to leave."""
    if not iscoroutinefunction(get_response):
        return get_response
    return on_the_shared_database_thread(get_response)


class SharedThreadASGIHandler(ASGIHandler):
    """Django's ASGI handler, except that an API call that ``shares_the_database_thread`` gets no
    ThreadSensitiveContext.

    Django's handler gives every request one, and asgiref starts a thread for each (an executor per context)
    to run the request's sync work that the view does not: the request_started and request_finished
    receivers, the response's close. Without it those run on the shared database thread too, as the view
    does (``api_calls_share_the_database_thread``), and the call starts no thread.
    """

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and shares_the_database_thread(scope["method"], scope["path"]):
            await self.handle(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def get_asgi_application() -> SharedThreadASGIHandler:
    """``django.core.asgi.get_asgi_application`` with ``SharedThreadASGIHandler``."""
    django.setup(set_prefix=False)
    return SharedThreadASGIHandler()
