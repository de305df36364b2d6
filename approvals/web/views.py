"""Pages: the live dashboard, a run's page, the API tokens page, and the login page of a locked-out client.

The first two render from the database and the socket keeps them current.
"""

from typing import Any

from axes.helpers import get_credentials
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_http_methods, require_POST

from approvals import frames, keyset
from approvals.models import Run
from approvals.runs import transcript
from approvals.runs.agent_models import model_catalog
from approvals.runs.toolkit import tool_catalog
from approvals.team import lockout, policies, tokens
from approvals.web.decorators import LoggedInRequest, login_required_async


@ensure_csrf_cookie
@login_required_async
async def dashboard(request: LoggedInRequest) -> HttpResponse:
    viewer = await policies.aviewer_of(request.user)
    return render(
        request,
        "approvals/dashboard.html",
        {
            # What this reviewer may answer is part of the first paint, as on the socket; like the
            # socket's, the page's snapshot holds only the first page of open requests and the totals.
            "snapshot": frames.frame_for_user(await frames.asnapshot(viewer), viewer),
            "tools": await tool_catalog(),
            "models": model_catalog(),
        },
    )


def not_found(request: HttpRequest, message: str) -> HttpResponse:
    """The console's own 404 page saying ``message``, under DEBUG too (Django's debug page is for developers)."""
    return render(request, "404.html", {"message": message}, status=404)


async def _run_page_context(run_id: int, viewer: policies.Viewer, requests_after: str | None = None) -> dict[str, Any]:
    """Raises Run.DoesNotExist for a run that is not there."""
    context = await frames.arun_page(run_id, viewer, requests_after)
    context["transcript"] = await transcript.aentries(run_id)
    context["requests_after"] = requests_after
    return context


@never_cache  # live state: Back after a Retry reads the run again ("Retried as run #23"), not a stale copy
@ensure_csrf_cookie
@login_required_async
async def run_page(request: LoggedInRequest, run_id: int) -> HttpResponse:
    """A run's page; ``?requests_after=`` pages its list of requests (a cursor the page itself links to)."""
    viewer = await policies.aviewer_of(request.user)
    try:
        try:
            context = await _run_page_context(run_id, viewer, request.GET.get("requests_after") or None)
            status = 200
        except keyset.CursorError:
            context = await _run_page_context(run_id, viewer)
            context["requests_error"] = (
                "That page of requests is not one this console links to; here are the first ones."
            )
            status = 400
    except Run.DoesNotExist:
        return not_found(request, f"There is no run {run_id}. It may be a mistyped address.")
    return render(request, "approvals/run.html", context, status=status)


@ensure_csrf_cookie
@login_required_async
async def request_page(request: LoggedInRequest, request_id: str) -> HttpResponse:
    """A request's permalink: open or resolved, what was asked, by whom, and what was decided."""
    viewer = await policies.aviewer_of(request.user)
    context = await frames.arequest_page(request_id, viewer)
    if context is None:
        return not_found(request, f"There is no request {request_id!r}. It may be a mistyped address.")
    return render(request, "approvals/request.html", context)


# The browser carries a new token's secret from the POST to the page that shows it, in a signed cookie
# that lives for a minute and is deleted as it is shown: it never touches the database (the session
# table included), and a reload neither issues another token nor shows the secret again.
NEW_TOKEN_COOKIE = "new_token"
NEW_TOKEN_COOKIE_SALT = "approvals.team.tokens.new"
NEW_TOKEN_COOKIE_SECONDS = 60


@never_cache  # the response that shows a new secret must not be kept by any cache
@login_required
@require_http_methods(["GET", "POST"])
def tokens_page(request: LoggedInRequest) -> HttpResponseBase:
    """List the user's tokens. A POST creates one and redirects (post/redirect/get); the next GET shows its secret once."""
    if request.method == "POST":
        _, issued_secret = tokens.issue_token(request.user, request.POST.get("name", ""))
        redirect_response = redirect("tokens")
        redirect_response.set_signed_cookie(
            NEW_TOKEN_COOKIE,
            issued_secret,
            salt=NEW_TOKEN_COOKIE_SALT,
            max_age=NEW_TOKEN_COOKIE_SECONDS,
            path=request.path,
            secure=request.is_secure(),
            httponly=True,
            samesite="Strict",
        )
        return redirect_response
    secret = request.get_signed_cookie(
        NEW_TOKEN_COOKIE, default=None, salt=NEW_TOKEN_COOKIE_SALT, max_age=NEW_TOKEN_COOKIE_SECONDS
    )
    new_token = tokens.own_token_of(request.user, secret) if secret else None
    context = {
        "tokens": tokens.tokens_of(request.user),
        "new_token": new_token,
        "new_secret": secret if new_token else None,
    }
    response = render(request, "tokens/tokens.html", context)
    if NEW_TOKEN_COOKIE in request.COOKIES:
        response.delete_cookie(NEW_TOKEN_COOKIE, path=request.path, samesite="Strict")
    return response


@login_required
@require_POST
def revoke_token_page(request: LoggedInRequest, token_id: int) -> HttpResponseBase:
    try:
        row = tokens.revoke_token(request.user, token_id)
    except tokens.TokenError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Token {row.name or row.prefix} is revoked; it no longer works.")
    return redirect("tokens")


def login_lockout_response(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
    """axes' ``AXES_LOCKOUT_CALLABLE``: the login page again, 429, saying for how long.

    axes passes the credentials positionally in one place and by keyword in another, so they
    are read from the request, where its handler left them.
    """
    credentials = getattr(request, "axes_credentials", None) or get_credentials(request.POST.get("username"))
    lock = lockout.lock_in_force(request, credentials)
    form = AuthenticationForm(request, initial={"username": credentials.get("username") or ""})
    response = render(
        request,
        "registration/login.html",
        {
            "form": form,
            "next": request.POST.get("next", ""),
            "lockout": lock.message("login"),
        },
        status=429,
    )
    response["Retry-After"] = str(lock.retry_after)
    return response
