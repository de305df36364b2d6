"""Replaces ``MiddlewareMixin.__acall__``'s thread hop per hook: Django's stock middleware with each
hook called on the event loop, unless it would do database work (a modified session, stored messages,
CSRF in sessions), which goes to Django's thread as Django sends it. Measurements: docs/performance.md."""

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.common import CommonMiddleware
from django.middleware.csrf import CsrfViewMiddleware
from django.middleware.security import SecurityMiddleware


async def _call(does_io, hook, *args):
    if does_io:  # Django's own way: in the request's thread
        return await sync_to_async(hook, thread_sensitive=True)(*args)
    return hook(*args)


class HooksOnTheLoop:
    """For a ``MiddlewareMixin`` subclass: in async mode, call its hooks in place unless they say they do I/O."""

    def request_does_io(self, request):
        return False

    def response_does_io(self, request, response):
        return False

    async def __acall__(self, request):
        response = None
        if hasattr(self, "process_request"):
            response = await _call(self.request_does_io(request), self.process_request, request)
        response = response or await self.get_response(request)
        if hasattr(self, "process_response"):
            response = await _call(self.response_does_io(request, response), self.process_response, request, response)
        return response


class Security(HooksOnTheLoop, SecurityMiddleware):
    pass


class Session(HooksOnTheLoop, SessionMiddleware):
    """``process_request`` only makes a lazy store; ``process_response`` writes a modified session."""

    def response_does_io(self, request, response):
        session = getattr(request, "session", None)
        return session is not None and (session.modified or settings.SESSION_SAVE_EVERY_REQUEST)


class Common(HooksOnTheLoop, CommonMiddleware):
    pass


class Csrf(HooksOnTheLoop, CsrfViewMiddleware):
    """``process_view`` reads the token from a header or ``request.POST``, parsed from the body already in
    memory (a file above FILE_UPLOAD_MAX_MEMORY_SIZE would go to disk: the console takes no uploads)."""

    def request_does_io(self, request):
        return settings.CSRF_USE_SESSIONS

    def response_does_io(self, request, response):
        return settings.CSRF_USE_SESSIONS

    async def process_view(self, request, callback, callback_args, callback_kwargs):
        # Django's handler awaits an async process_view as it is (and wraps it for a sync request).
        return await _call(
            settings.CSRF_USE_SESSIONS, super().process_view, request, callback, callback_args, callback_kwargs
        )


class Authentication(HooksOnTheLoop, AuthenticationMiddleware):
    pass


class Messages(HooksOnTheLoop, MessageMiddleware):
    """``process_request`` only makes a lazy storage; ``process_response`` stores messages used or added."""

    def response_does_io(self, request, response):
        storage = getattr(request, "_messages", None)
        return storage is not None and (storage.used or storage.added_new)


class XFrameOptions(HooksOnTheLoop, XFrameOptionsMiddleware):
    pass
