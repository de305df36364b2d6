"""Replaces ``MiddlewareMixin.__acall__``'s thread hop per hook: Django's stock middleware with each
hook called on the event loop, unless it would do database work (a modified session, stored messages,
CSRF in sessions), which goes to Django's thread as Django sends it. Measurements: docs/performance.md."""

from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware
from django.http import HttpRequest, HttpResponseBase
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.common import CommonMiddleware
from django.middleware.csrf import CsrfViewMiddleware
from django.middleware.security import SecurityMiddleware
from django.utils.deprecation import MiddlewareMixin

T = TypeVar("T")


async def _call(does_io: bool, hook: Callable[..., T], *args: Any) -> T:
    if does_io:  # Django's own way: in the request's thread
        return await sync_to_async(hook, thread_sensitive=True)(*args)
    return hook(*args)


class HooksOnTheLoop(MiddlewareMixin):
    """Before a ``MiddlewareMixin`` subclass: in async mode, call its hooks in place unless they say they do I/O."""

    def request_does_io(self, request: HttpRequest) -> bool:
        return False

    def response_does_io(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        return False

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        response: HttpResponseBase | None = None
        if hasattr(self, "process_request"):
            response = await _call(self.request_does_io(request), self.process_request, request)
        if response is None:
            following = self.get_response(request)
            assert not isinstance(following, HttpResponseBase), "in async mode the next step is a coroutine"
            response = await following
        if not hasattr(self, "process_response"):
            return response
        return await _call(self.response_does_io(request, response), self.process_response, request, response)


class Security(HooksOnTheLoop, SecurityMiddleware):
    pass


class Session(HooksOnTheLoop, SessionMiddleware):
    """``process_request`` only makes a lazy store; ``process_response`` writes a modified session."""

    def response_does_io(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        session = getattr(request, "session", None)
        return session is not None and (session.modified or settings.SESSION_SAVE_EVERY_REQUEST)


class Common(HooksOnTheLoop, CommonMiddleware):
    pass


class Csrf(HooksOnTheLoop, CsrfViewMiddleware):
    """``process_view`` reads the token from a header or ``request.POST``, parsed from the body already in
    memory (a file above FILE_UPLOAD_MAX_MEMORY_SIZE would go to disk: the console takes no uploads)."""

    def request_does_io(self, request: HttpRequest) -> bool:
        return settings.CSRF_USE_SESSIONS

    def response_does_io(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        return settings.CSRF_USE_SESSIONS

    # Async where Django's is sync: Django's handler awaits an async process_view (see below), which the
    # stubs' signature for CsrfViewMiddleware cannot say.
    async def process_view(  # type: ignore[override]
        self,
        request: HttpRequest,
        callback: Callable[..., Any],
        callback_args: tuple[Any, ...],
        callback_kwargs: dict[str, Any],
    ) -> HttpResponseBase | None:
        # Django's handler awaits an async process_view as it is (and wraps it for a sync request).
        return await _call(
            settings.CSRF_USE_SESSIONS, super().process_view, request, callback, callback_args, callback_kwargs
        )


class Authentication(HooksOnTheLoop, AuthenticationMiddleware):
    pass


class Messages(HooksOnTheLoop, MessageMiddleware):
    """``process_request`` only makes a lazy storage; ``process_response`` stores messages used or added."""

    def response_does_io(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        storage = getattr(request, "_messages", None)
        return storage is not None and (storage.used or storage.added_new)


class XFrameOptions(HooksOnTheLoop, XFrameOptionsMiddleware):
    pass
