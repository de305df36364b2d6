"""Pages: the live dashboard and a run's page. Both render from the database; the socket keeps them current."""
from channels.db import database_sync_to_async
from django.contrib.auth.views import redirect_to_login
from django.http import Http404
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie

from . import selectors
from .models import Run
from .toolkit import tool_catalog

snapshot = database_sync_to_async(selectors.snapshot)


def _login_required(view):
    async def wrapper(request, *args, **kwargs):
        user = await request.auser()
        if not user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        request.user = user  # resolved once here, so templates never touch the ORM from async code
        return await view(request, *args, **kwargs)

    wrapper.__name__ = view.__name__
    return wrapper


@ensure_csrf_cookie
@_login_required
async def dashboard(request):
    return render(
        request,
        "approvals/dashboard.html",
        {"snapshot": await snapshot(), "tools": await tool_catalog()},
    )


@database_sync_to_async
def _run_page_context(run_id):
    try:
        run = Run.objects.select_related("started_by").get(pk=run_id)
    except Run.DoesNotExist:
        raise Http404(f"There is no run {run_id}.") from None
    latest = selectors.latest_request(run)
    return {
        "run": run,
        "run_view": selectors.run_view(run, latest),
        "timeline": selectors.run_timeline(run),
        "requests": list(run.requests.order_by("created_at")),
    }


@ensure_csrf_cookie
@_login_required
async def run_page(request, run_id):
    return render(request, "approvals/run.html", await _run_page_context(run_id))
