"""Password reset by email: offered only when the console has a mail server to send it with.

Django's reset views are used as they are. Without ``CONSOLE_EMAIL_HOST`` (settings'
``PASSWORD_RESET_BY_EMAIL``) the login page has no "Forgot your password?" link and the reset
pages say who can set a new password instead, rather than claiming to have sent an email
nobody could send. With one, a send that fails (the server down) is logged by Django and the
page says the same as for an unknown address, so it tells no one which addresses have accounts.
"""

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase
from django.shortcuts import render

View = Callable[..., HttpResponseBase]


def offered() -> bool:
    return bool(settings.PASSWORD_RESET_BY_EMAIL)


def context(request: HttpRequest) -> dict[str, Any]:
    """Template context processor: whether to show the "Forgot your password?" link."""
    return {"password_reset_offered": offered()}


def offered_only(view: View) -> View:
    """The reset view when email is configured; otherwise a 404 page saying how to get a new password."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not offered():
            return render(request, "registration/password_reset_unavailable.html", status=404)
        return view(request, *args, **kwargs)

    return wrapper
