"""Django's stock middleware whose hooks do no I/O, with those hooks called on the event loop.

Under ASGI, ``MiddlewareMixin`` runs each ``process_request`` and ``process_response`` through
``sync_to_async``, in a thread Django starts for the request: a dozen hops per API call, each a
thread handoff that contends for the GIL with the database thread a run's suspension is being
written on (the run's own ``POST`` answers while its tool suspends). These hooks only read the
request and set headers and cookies, so they run where the request already is. With
``CSRF_USE_SESSIONS`` the CSRF hooks read the session (the database), so they go back to
Django's threads; anything else that touched the database would raise
``SynchronousOnlyOperation`` rather than block the loop.

The session and messages middleware keep Django's own adapter: saving a session, or messages
stored in one, is database work.
"""
from django.conf import settings
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.common import CommonMiddleware
from django.middleware.csrf import CsrfViewMiddleware
from django.middleware.security import SecurityMiddleware


class HooksOnTheLoop:
    """For a ``MiddlewareMixin`` subclass: in async mode, call its hooks directly instead of in a thread."""

    def hooks_do_no_io(self):
        return True

    async def __acall__(self, request):
        if not self.hooks_do_no_io():
            return await super().__acall__(request)
        response = self.process_request(request) if hasattr(self, "process_request") else None
        response = response or await self.get_response(request)
        if hasattr(self, "process_response"):
            response = self.process_response(request, response)
        return response


class Security(HooksOnTheLoop, SecurityMiddleware):
    pass


class Common(HooksOnTheLoop, CommonMiddleware):
    pass


class Csrf(HooksOnTheLoop, CsrfViewMiddleware):
    def hooks_do_no_io(self):
        return not settings.CSRF_USE_SESSIONS  # else the secret lives in the session


class Authentication(HooksOnTheLoop, AuthenticationMiddleware):
    pass


class XFrameOptions(HooksOnTheLoop, XFrameOptionsMiddleware):
    pass
