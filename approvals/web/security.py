"""Who may open a socket and send an API call: origins, bearer tokens, CSRF; what a page may load: the CSP.

Channels' AllowedHostsOriginValidator compares host names only, so any page served
from another port of the same host would pass. ExactOriginValidator sits inside it
and also requires the exact origin: one listed in CONSOLE_ALLOWED_ORIGINS, or the
console's own (the scheme and Host header the socket was opened with).

The host socket (/ws/host/) is for programs, which send no Origin header: the
token is their credential. A browser always sends one, so a socket that carries
an Origin must pass the same two checks as the dashboard's: a page on another
site cannot use a leaked token against the console.
"""

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qs

from asgiref.sync import iscoroutinefunction
from asgiref.typing import ASGIReceiveCallable, ASGISendCallable
from channels.security.websocket import AllowedHostsOriginValidator, WebsocketDenier
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponseBase, JsonResponse
from django.utils.decorators import sync_and_async_middleware
from django.views import csrf as django_csrf

from approvals.team import lockout, tokens

if TYPE_CHECKING:
    # How Channels' stubs describe a socket's scope: a TypedDict, without the keys TokenAuthMiddleware adds.
    from channels.consumer import _ChannelScope

# A scope as this module reads it: any ASGI scope, with any keys the layers before added.
Scope = Mapping[str, Any]


# A middleware's next step, as Django hands it over: sync or async, told apart with iscoroutinefunction.
GetResponse = Callable[[HttpRequest], HttpResponseBase | Awaitable[HttpResponseBase]]


class SocketApplication(Protocol):
    """The ASGI application a check wraps: a consumer's ``as_asgi()``, or another of Channels' middlewares."""

    def __call__(self, scope: Any, receive: ASGIReceiveCallable, send: ASGISendCallable, /) -> Awaitable[Any]: ...


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin1")
    return None


def origin_allowed(scope: Scope) -> bool:
    origin = _header(scope, b"origin")
    if not origin:
        return False
    if origin in settings.CONSOLE_ALLOWED_ORIGINS:
        return True
    host = _header(scope, b"host")
    if not host:
        return False
    scheme = "https" if scope.get("scheme") == "wss" else "http"
    return origin == f"{scheme}://{host}"


class ExactOriginValidator:
    def __init__(self, application: SocketApplication) -> None:
        self.application = application

    async def __call__(self, scope: "_ChannelScope", receive: ASGIReceiveCallable, send: ASGISendCallable) -> Any:
        if scope["type"] == "websocket" and not origin_allowed(scope):
            denier = WebsocketDenier()
            return await denier(scope, receive, send)
        return await self.application(scope, receive, send)


class HostSocketOriginValidator:
    """No Origin header (a program): let the token decide. An Origin (a browser): the dashboard's exact checks."""

    def __init__(self, application: SocketApplication) -> None:
        self.application = application
        self.browser_checks = AllowedHostsOriginValidator(ExactOriginValidator(application))

    async def __call__(self, scope: "_ChannelScope", receive: ASGIReceiveCallable, send: ASGISendCallable) -> Any:
        if _header(scope, b"origin") is None:
            return await self.application(scope, receive, send)
        return await self.browser_checks(scope, receive, send)


def socket_token(scope: Scope) -> str | None:
    """The token a socket handshake carries: ``Authorization: Bearer``, else the ``token`` query parameter."""
    secret = tokens.bearer_secret(_header(scope, b"authorization"))
    if secret:
        return secret
    query = parse_qs(scope.get("query_string", b"").decode("latin1"))
    return (query.get("token") or [None])[0]


class TokenAuthMiddleware:
    """Put the token's user in ``scope["user"]`` (AnonymousUser without a valid token) and the row in ``scope["api_token"]``.

    A refused token counts towards its client address's lockout; a locked-out address sets
    ``scope["token_locked_out"]`` and its token is not looked at.
    """

    def __init__(self, application: SocketApplication) -> None:
        self.application = application

    async def __call__(self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> Any:
        scope = dict(scope, user=AnonymousUser(), api_token=None, token_error=None, token_locked_out=False)
        secret = socket_token(scope)
        if secret:
            try:
                row = await tokens.aauthenticate(secret, client=lockout.client_of_socket(scope))
            except lockout.LockedOut as exc:
                scope["token_error"], scope["token_locked_out"] = str(exc), True
            except tokens.TokenError as exc:
                scope["token_error"] = str(exc)
            else:
                scope["user"], scope["api_token"] = row.user, row
        return await self.application(scope, receive, send)


def _is_bearer_api_call(request: HttpRequest) -> bool:
    return request.path.startswith("/api/") and tokens.bearer_secret(request.headers.get("Authorization")) is not None


def _let_bearer_call_skip_csrf(request: HttpRequest) -> None:
    if _is_bearer_api_call(request):
        # CsrfViewMiddleware's own switch (Django's test client sets it too); django-stubs do not declare it.
        request._dont_enforce_csrf_checks = True  # type: ignore[attr-defined]


@sync_and_async_middleware
def bearer_calls_skip_csrf(get_response: GetResponse) -> GetResponse:
    """API calls that carry ``Authorization: Bearer`` skip the CSRF check (the view still refuses a bad token).

    CSRF exists because browsers attach cookies to cross-site requests by
    themselves. They never attach an Authorization header a page chose without
    a CORS preflight, which this console does not grant, so a bearer call cannot
    be forged from another site. Must come before CsrfViewMiddleware.
    """
    if iscoroutinefunction(get_response):

        async def skip_csrf_async(request: HttpRequest) -> HttpResponseBase:
            _let_bearer_call_skip_csrf(request)
            return await get_response(request)

        return skip_csrf_async

    def skip_csrf(request: HttpRequest) -> HttpResponseBase | Awaitable[HttpResponseBase]:
        _let_bearer_call_skip_csrf(request)
        return get_response(request)

    return skip_csrf


def _bad_host_refusal(request: HttpRequest) -> JsonResponse | None:
    """An API call's JSON 400 for a Host header the console does not serve, or None when the host is fine.

    Django's own refusal of such a host is an HTML page (with DEBUG, the debug page): a program
    calling the API could not read it.
    """
    if not request.path.startswith("/api/"):
        return None
    try:
        request.get_host()
    except DisallowedHost as exc:
        return JsonResponse(
            {"error": "bad_request", "message": f"{exc} Call the console by a name it serves."}, status=400
        )
    return None


@sync_and_async_middleware
def api_bad_host_is_json(get_response: GetResponse) -> GetResponse:
    """First in MIDDLEWARE: the host check Django's middleware would fail with an HTML page, done first for /api/."""
    if iscoroutinefunction(get_response):

        async def refuse_bad_host_async(request: HttpRequest) -> HttpResponseBase:
            return _bad_host_refusal(request) or await get_response(request)

        return refuse_bad_host_async

    def refuse_bad_host(request: HttpRequest) -> HttpResponseBase | Awaitable[HttpResponseBase]:
        return _bad_host_refusal(request) or get_response(request)

    return refuse_bad_host


def policy_header(policy: Mapping[str, Sequence[str]]) -> str:
    """SECURE_CSP ({directive: [sources]}) as a header value: ``default-src 'self'; img-src 'self' data:``."""
    return "; ".join(" ".join([directive, *sources]) for directive, sources in policy.items())


def _debug_page(response: HttpResponseBase) -> bool:
    # Django's technical 404 and 500 pages (DEBUG only) are inline styles and scripts; django-csp spares them too.
    return settings.DEBUG and response.status_code in (404, 500)


@sync_and_async_middleware
def content_security_policy(get_response: GetResponse) -> GetResponse:
    """First in MIDDLEWARE: the Content-Security-Policy header from SECURE_CSP on every response.

    Built once, set in place on the event loop. A response that already carries a policy keeps its own.
    """
    value = policy_header(settings.SECURE_CSP)

    def with_policy(response: HttpResponseBase) -> HttpResponseBase:
        if "Content-Security-Policy" not in response and not _debug_page(response):
            response["Content-Security-Policy"] = value
        return response

    if iscoroutinefunction(get_response):

        async def add_policy_async(request: HttpRequest) -> HttpResponseBase:
            return with_policy(await get_response(request))

        return add_policy_async

    def add_policy(request: HttpRequest) -> HttpResponseBase:
        return with_policy(get_response(request))  # type: ignore[arg-type]  # not a coroutine function: get_response returns the response itself

    return add_policy


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponseBase:
    """CSRF_FAILURE_VIEW: an API call refused by the CSRF check gets JSON saying what to send; a page gets
    Django's view, with the console's templates/403_csrf.html (Django's own page is inline styles).

    A program that uses the session cookie could not read Django's HTML refusal,
    and the usual fix for a program is a token, which needs no CSRF at all.
    """
    if not request.path.startswith("/api/"):
        return django_csrf.csrf_failure(request, reason)
    message = (
        f"The CSRF check failed ({reason.rstrip('.')}). A call made with the console's session cookie must "
        "send the csrftoken cookie's value in an X-CSRFToken header; a program should use an API token "
        "instead (Authorization: Bearer <token>, from /tokens/ or manage.py issue_token), which needs no CSRF token."
    )
    return JsonResponse({"error": "csrf_failed", "message": message}, status=403)
