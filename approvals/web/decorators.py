"""Decorators the pages share, and the typed request they hand their views."""

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeGuard

from django.contrib.auth.models import User
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponseBase

P = ParamSpec("P")


class LoggedInRequest(HttpRequest):
    """A request past ``login_required_async``: ``user`` is the logged-in User, already read from the database.

    For typing only (django-stubs' ``AuthenticatedHttpRequest``): Django makes the request, the decorator
    checks it, and the view's signature says what it may rely on.
    """

    user: User


def has_logged_in_user(request: HttpRequest) -> TypeGuard[LoggedInRequest]:
    """Whether ``request.user`` is a logged-in User rather than AnonymousUser."""
    return isinstance(request.user, User) and request.user.is_authenticated


def login_required_async(
    view: Callable[Concatenate[LoggedInRequest, P], Awaitable[HttpResponseBase]],
) -> Callable[Concatenate[HttpRequest, P], Coroutine[Any, Any, HttpResponseBase]]:
    """An async view for logged-in users only: others are sent to the login page. The user is
    resolved once, here, and set on ``request.user``, so templates never touch the ORM from async code."""

    async def wrapper(request: HttpRequest, *args: P.args, **kwargs: P.kwargs) -> HttpResponseBase:
        request.user = await request.auser()
        if not has_logged_in_user(request):
            return redirect_to_login(request.get_full_path())
        return await view(request, *args, **kwargs)

    wrapper.__name__ = view.__name__
    return wrapper
