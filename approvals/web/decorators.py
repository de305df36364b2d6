"""Decorators the pages share."""

from django.contrib.auth.views import redirect_to_login


def login_required_async(view):
    """An async view for logged-in users only: others are sent to the login page. The user is
    resolved once, here, and set on ``request.user``, so templates never touch the ORM from async code."""

    async def wrapper(request, *args, **kwargs):
        user = await request.auser()
        if not user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        request.user = user
        return await view(request, *args, **kwargs)

    wrapper.__name__ = view.__name__
    return wrapper
