"""Pages: the live dashboard, a run's page, a request's page, and the API tokens page.

The dashboard and the run page render from the database and the socket keeps them current;
a request's page is its permalink, drawn from the database on each visit.
"""

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_http_methods, require_POST

from approvals import keyset, selectors
from approvals.models import Run
from approvals.review import decisions
from approvals.runs import transcript
from approvals.runs.agent_models import model_catalog
from approvals.runs.toolkit import tool_catalog
from approvals.team import policies, tokens
from approvals.web.decorators import login_required_async


@ensure_csrf_cookie
@login_required_async
async def dashboard(request):
    viewer = await policies.aviewer_of(request.user)
    return render(
        request,
        "approvals/dashboard.html",
        {
            # What this reviewer may answer is part of the first paint, as on the socket; like the
            # socket's, the page's snapshot holds only the first page of open requests and the totals.
            "snapshot": selectors.frame_for_user(await selectors.asnapshot(viewer), viewer),
            "tools": await tool_catalog(),
            "models": model_catalog(),
        },
    )


async def _run_page_context(run_id, viewer, requests_after=None):
    try:
        context = await selectors.arun_page(run_id, viewer, requests_after)
    except Run.DoesNotExist:
        raise Http404(f"There is no run {run_id}.") from None
    context["transcript"] = await transcript.aentries(run_id)
    context["requests_after"] = requests_after
    return context


@ensure_csrf_cookie
@login_required_async
async def run_page(request, run_id):
    """A run's page; ``?requests_after=`` pages its list of requests (a cursor the page itself links to)."""
    viewer = await policies.aviewer_of(request.user)
    try:
        context = await _run_page_context(run_id, viewer, request.GET.get("requests_after") or None)
        status = 200
    except keyset.CursorError:
        context = await _run_page_context(run_id, viewer)
        context["requests_error"] = "That page of requests is not one this console links to; here are the first ones."
        status = 400
    return render(request, "approvals/run.html", context, status=status)


# What each button of a request page's plain form sends through the one door: (ok, reason).
PAGE_ANSWERS = {"approve": (True, None), "decline": (False, "declined"), "cancel": (False, "cancelled")}


@ensure_csrf_cookie
@require_http_methods(["GET", "POST"])
@login_required_async
async def request_page(request, request_id):
    """A request's own page (its permalink), open or resolved. An open one's plain form answers it
    through the one door; then the page shows what became of it (post/redirect/get). A refused
    answer shows why and keeps the comment that was typed."""
    viewer = await policies.aviewer_of(request.user)
    error, comment, status = None, "", 200
    if request.method == "POST":
        comment = request.POST.get("comment", "")
        choice = PAGE_ANSWERS.get(request.POST.get("answer", ""))
        if choice is None:
            error, status = "Choose Approve, Decline or Cancel request.", 400
        else:
            ok, reason = choice
            try:
                await decisions.aresolve_request(request_id, ok=ok, reason=reason, comment=comment, user=request.user)
            except decisions.DecisionError as exc:
                if exc.code == "not_found":
                    raise Http404(exc.message) from None
                problems = [" ".join(errors) for errors in exc.field_errors.values()]
                error, status = " ".join([exc.message, *problems]), exc.http_status
            else:
                return redirect("request", request_id=request_id)
    view = selectors.for_user(await selectors.arequest_detail(request_id), viewer)
    if view is None:
        raise Http404(f"There is no request {request_id!r}.")
    data = {key: value for key, value in (view["data"] or {}).items() if key not in ("editable", "assignees")}
    return render(
        request,
        "approvals/request.html",
        {
            "r": view,
            "args_json": json.dumps(view["args"], indent=2, ensure_ascii=False) if view["args"] else "",
            "data_json": json.dumps(data, indent=2, ensure_ascii=False) if data else "",
            "given": selectors.answer_given(view),
            # Approve as asked (an approval) or say done (an authorization); other kinds need their own form.
            "plain_yes": not view["credentials"] and view["kind"] in ("approval", "authorization"),
            "show_form": view["policy"]["may_answer"] or view["policy"]["may_decline"],
            "error": error,
            "comment": comment,
        },
        status=status,
    )


# The browser carries a new token's secret from the POST to the page that shows it, in a signed cookie
# that lives for a minute and is deleted as it is shown: it never touches the database (the session
# table included), and a reload neither issues another token nor shows the secret again.
NEW_TOKEN_COOKIE = "new_token"
NEW_TOKEN_COOKIE_SALT = "approvals.team.tokens.new"
NEW_TOKEN_COOKIE_SECONDS = 60


@never_cache  # the response that shows a new secret must not be kept by any cache
@login_required
@require_http_methods(["GET", "POST"])
def tokens_page(request):
    """List the user's tokens. A POST creates one and redirects (post/redirect/get); the next GET shows its secret once."""
    if request.method == "POST":
        _, secret = tokens.issue_token(request.user, request.POST.get("name", ""))
        response = redirect("tokens")
        response.set_signed_cookie(
            NEW_TOKEN_COOKIE,
            secret,
            salt=NEW_TOKEN_COOKIE_SALT,
            max_age=NEW_TOKEN_COOKIE_SECONDS,
            path=request.path,
            secure=request.is_secure(),
            httponly=True,
            samesite="Strict",
        )
        return response
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
def revoke_token_page(request, token_id):
    try:
        row = tokens.revoke_token(request.user, token_id)
    except tokens.TokenError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Token {row.name or row.prefix} is revoked; it no longer works.")
    return redirect("tokens")
