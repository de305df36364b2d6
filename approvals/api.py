"""JSON API under /api/v1/: session auth with CSRF. Thin: parse, call runner/decisions, answer.

Refusals are JSON with a message a person can act on; nothing here returns a 500
for bad input.
"""
import json
import math
from functools import wraps

from channels.db import database_sync_to_async
from django.http import JsonResponse
from django.views.decorators.http import require_GET, require_POST

from . import decisions, runner, selectors
from .models import Request, RequestStatus, Run
from .runs import RunInputError

run_detail = database_sync_to_async(selectors.run_detail)


def error(status, code, message, **extra):
    return JsonResponse({"error": code, "message": message, **extra}, status=status)


def api_login_required(view):
    @wraps(view)
    async def wrapper(request, *args, **kwargs):
        user = await request.auser()
        if not user.is_authenticated:
            return error(401, "unauthenticated", "Log in first: this API uses the console's session login.")
        request.user = user
        return await view(request, *args, **kwargs)

    return wrapper


def _not_a_json_number(text):
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is not a finite number")
    return number


def parse_json(text):
    """``json.loads`` that refuses NaN, Infinity and overflowing numbers: not JSON, and not storable.

    Raises ValueError (or RecursionError for nesting too deep to decode).
    """
    return json.loads(text, parse_constant=_not_a_json_number, parse_float=_not_a_json_number)


def json_body(request):
    try:
        body = parse_json(request.body or b"{}")
    except (ValueError, RecursionError) as exc:  # RecursionError: nesting too deep to decode
        raise BadBody(f"The body is not valid JSON: {exc}.") from None
    if not isinstance(body, dict):
        raise BadBody("The body must be a JSON object.")
    return body


class BadBody(ValueError):
    pass


def handles_bad_input(view):
    @wraps(view)
    async def wrapper(request, *args, **kwargs):
        try:
            return await view(request, *args, **kwargs)
        except BadBody as exc:
            return error(400, "bad_request", str(exc))
        except decisions.DecisionError as exc:
            return JsonResponse(exc.as_dict(), status=exc.http_status)

    return wrapper


@require_POST
@api_login_required
@handles_bad_input
async def create_run(request):
    body = json_body(request)
    try:
        run = await runner.start_run(
            tool=body.get("tool"), args=body.get("args"), timeout=body.get("timeout"), user=request.user
        )
    except RunInputError as exc:
        return error(400, "bad_request", str(exc))
    return JsonResponse(await run_detail(run.pk), status=201)


@require_GET
@api_login_required
async def get_run(request, run_id):
    try:
        return JsonResponse(await run_detail(run_id))
    except Run.DoesNotExist:
        return error(404, "not_found", f"There is no run with id {run_id}.")


@require_POST
@api_login_required
@handles_bad_input
async def cancel_run(request, run_id):
    run = await runner.cancel_run(run_id, user=request.user)
    return JsonResponse({"id": run.pk, "cancel_requested": True}, status=202)


@database_sync_to_async
def _requests(status):
    rows = Request.objects.select_related("answered_by").order_by("created_at")
    if status:
        rows = rows.filter(status=status)
    return [selectors.request_view(r) for r in rows[:500]]


@require_GET
@api_login_required
async def list_requests(request):
    status = request.GET.get("status")
    if status and status not in RequestStatus.values:
        return error(400, "bad_request", f"Unknown status {status!r}; use one of {', '.join(RequestStatus.values)}.")
    return JsonResponse({"requests": await _requests(status)})


@require_POST
@api_login_required
@handles_bad_input
async def answer_request(request, request_id):
    body = json_body(request)
    if not isinstance(body.get("ok"), bool):
        return error(400, "bad_request", "'ok' is required: true to approve or answer, false to decline.")
    answer = await decisions.aresolve_request(
        request_id,
        ok=body["ok"],
        data=body.get("data"),
        reason=body.get("reason"),
        comment=str(body.get("comment") or ""),
        user=request.user,
    )
    return JsonResponse(selectors.wire_answer(answer))
