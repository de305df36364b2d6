"""Replaces Django's thread per async view on SQLite: an API call's database work runs on the one
thread (and connection) the runs and sockets share, so concurrent writers queue instead of sleeping
in SQLite's busy handler, and no thread is started for the call (``SharedThreadASGIHandler``).
PostgreSQL keeps Django's way. Measurements: docs/performance.md."""

import asyncio
import contextvars
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


def shares_the_database_thread() -> bool:
    return connections["default"].vendor == "sqlite"


def on_the_shared_database_thread(
    view: Callable[Concatenate[HttpRequest, P], Coroutine[Any, Any, Response]],
) -> Callable[Concatenate[HttpRequest, P], Coroutine[Any, Any, Response]]:
    """Run an async view outside its request's thread: its sync calls go to the process's one database thread."""

    @wraps(view)
    async def wrapper(request: HttpRequest, *args: P.args, **kwargs: P.kwargs) -> Response:
        if not shares_the_database_thread():
            return await view(request, *args, **kwargs)
        context = contextvars.copy_context()
        # Without a ThreadSensitiveContext, asgiref sends thread-sensitive calls to its single thread.
        # asgiref reads the variable with .get(None) and takes None as "no context"; its stub leaves None out.
        context.run(SyncToAsync.thread_sensitive_context.set, None)  # type: ignore[arg-type]
        return await asyncio.get_running_loop().create_task(view(request, *args, **kwargs), context=context)

    return wrapper


@sync_and_async_middleware
def api_calls_share_the_database_thread(get_response: GetResponse) -> GetResponse:
    """Middleware (settings.MIDDLEWARE): a call under /api/, authentication included, runs its view as
    ``on_the_shared_database_thread`` does. Under WSGI there is no per-request thread to leave."""
    if not iscoroutinefunction(get_response):
        return get_response
    shared = on_the_shared_database_thread(get_response)

    async def middleware(request: HttpRequest) -> HttpResponseBase:
        if request.path.startswith("/api/"):
            return await shared(request)
        return await get_response(request)

    return middleware


class SharedThreadASGIHandler(ASGIHandler):
    """Django's ASGI handler, except that on SQLite a call under /api/ gets no ThreadSensitiveContext.

    Django's handler gives every request one, and asgiref starts a thread for each (an executor per context)
    to run the request's sync work that the view does not: the request_started and request_finished
    receivers, the response's close. Without it those run on the shared database thread too, as the view
    does (``api_calls_share_the_database_thread``), and the call starts no thread.
    """

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/api/") and shares_the_database_thread():
            await self.handle(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def get_asgi_application() -> SharedThreadASGIHandler:
    """``django.core.asgi.get_asgi_application`` with ``SharedThreadASGIHandler``."""
    django.setup(set_prefix=False)
    return SharedThreadASGIHandler()
