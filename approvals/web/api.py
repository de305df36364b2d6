"""JSON API under /api/v1/: a bearer token, or the session login with CSRF. Thin: parse, call, answer.

Refusals are JSON with a message a person can act on; nothing here returns a 500
for bad input. ``approvals/web/openapi.py`` describes every endpoint; keep the two in step.
"""

from collections.abc import Awaitable, Callable, Coroutine
from functools import wraps
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from django.conf import settings
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from approvals import frames, inbox, keyset, selectors, shapes
from approvals.inbox import bulk
from approvals.models import ApiToken, Request, Run
from approvals.review import claims, decisions, intake
from approvals.review.intake import NotJson, parse_json
from approvals.runs import runner, services, shutdown, transcript, waiting
from approvals.runs.services import RunInputError, RunNotFound
from approvals.runs.toolkit import get_toolkit
from approvals.team import lockout, policies, tokens
from approvals.web import openapi

P = ParamSpec("P")
R = TypeVar("R", bound=HttpRequest)


class ApiRequest(HttpRequest):
    """An API call past ``api_auth_required``: who is calling, and how.

    For typing only, like healthchecks' ``ApiRequest``: Django makes the request and the decorator sets
    both fields before the view is called, so a view reads them typed instead of guessing at attributes.
    """

    user: User
    # The bearer token the call was authenticated with; None for the console's session login (with CSRF).
    api_token: ApiToken | None


def error(status: int, code: str, message: str, **extra: Any) -> JsonResponse:
    return JsonResponse({"error": code, "message": message, **extra}, status=status)


def unauthorized(code: str, message: str) -> JsonResponse:
    response = error(401, code, message)
    response["WWW-Authenticate"] = 'Bearer realm="toolnexus console"' + (
        f', error="{code}"' if code == "invalid_token" else ""
    )
    return response


def api_auth_required(
    view: Callable[Concatenate[ApiRequest, P], Awaitable[HttpResponse]],
) -> Callable[Concatenate[HttpRequest, P], Coroutine[Any, Any, HttpResponse]]:
    """Authenticate by ``Authorization: Bearer <token>``, else by the console's session login.

    A call that carries an Authorization header is judged by it alone: it skipped
    the CSRF check (security.bearer_calls_skip_csrf), so it must never fall back
    to the session cookie.
    """

    @wraps(view)
    async def wrapper(request: HttpRequest, *args: P.args, **kwargs: P.kwargs) -> HttpResponse:
        caller = await _caller_of(request)
        if isinstance(caller, JsonResponse):  # refused
            return caller
        # The one place a request becomes an ApiRequest: both of its fields are set here, before the view runs.
        api_request = cast(ApiRequest, request)
        api_request.user, api_request.api_token = caller
        return await view(api_request, *args, **kwargs)

    return wrapper


def _locked_out(exc: lockout.LockedOut) -> JsonResponse:
    """The API's refusal of a locked-out client: 429 ``locked_out`` with Retry-After."""
    response = JsonResponse({"error": "locked_out", "message": str(exc)}, status=429)
    response["Retry-After"] = str(exc.lock.retry_after)
    return response


async def _caller_of(request: HttpRequest) -> tuple[User, ApiToken | None] | JsonResponse:
    """The user and token a call is authenticated as, or the 401 (or 429 when locked out) that refuses it."""
    header = request.headers.get("Authorization")
    if header is not None:
        secret = tokens.bearer_secret(header)
        if secret is None:
            return unauthorized("invalid_token", "Send the token as 'Authorization: Bearer <token>'.")
        try:
            token = await tokens.aauthenticate(secret, client=lockout.client_of_api_call(request))
        except lockout.LockedOut as exc:
            return _locked_out(exc)
        except tokens.TokenError as exc:
            return unauthorized("invalid_token", str(exc))
        return token.user, token
    user = await request.auser()
    if not isinstance(user, User) or not user.is_authenticated:
        return unauthorized(
            "unauthenticated", "Log in first, or send 'Authorization: Bearer <token>' (tokens: /tokens/)."
        )
    return user, None


def json_body(request: HttpRequest) -> dict[str, Any]:
    limit = settings.TOOLNEXUS["MAX_BODY_BYTES"]
    declared = request.headers.get("Content-Length") or "0"
    if (declared.isascii() and declared.isdigit() and int(declared) > limit) or len(request.body) > limit:
        raise BodyTooLarge(f"The body is larger than {limit} bytes ({limit // 1024} KiB); send less data.")
    try:
        body = parse_json(request.body or b"{}")
    except NotJson as exc:
        raise BadJson(f"The body is not JSON the console accepts: {exc}.") from None
    if not isinstance(body, dict):
        raise BadBody("The body must be a JSON object.")
    return body


class BadBody(ValueError):
    pass


class BadJson(BadBody):
    """The body could not be decoded as JSON (``error``: ``bad_json``)."""


class BodyTooLarge(ValueError):
    pass


def handles_bad_input(
    view: Callable[Concatenate[R, P], Awaitable[HttpResponse]],
) -> Callable[Concatenate[R, P], Coroutine[Any, Any, HttpResponse]]:
    @wraps(view)
    async def wrapper(request: R, *args: P.args, **kwargs: P.kwargs) -> HttpResponse:
        try:
            return await view(request, *args, **kwargs)
        except BodyTooLarge as exc:
            return error(413, "too_large", str(exc))
        except BadJson as exc:
            return error(400, "bad_json", str(exc))
        except (BadBody, intake.IntakeError) as exc:
            return error(400, "bad_request", str(exc))
        except decisions.DecisionError as exc:
            return JsonResponse(exc.as_dict(), status=exc.http_status)
        except (inbox.QueryError, bulk.BulkError) as exc:
            return error(400, "bad_request", exc.message, field=exc.field)
        except keyset.CursorError as exc:
            return error(400, "bad_request", str(exc), field="after")
        except shutdown.ShuttingDown as exc:
            response = error(503, "shutting_down", str(exc))
            response["Retry-After"] = "1"
            return response

    return wrapper


@require_POST
@api_auth_required
@handles_bad_input
async def create_run(request: ApiRequest) -> HttpResponse:
    """``{tool, args?, timeout?}`` runs one tool; ``{agent: {prompt, model?}, timeout?}`` runs an agent loop."""
    body = json_body(request)
    try:
        run = await _start(body, user=request.user)
    except RunInputError as exc:
        return run_input_refused(exc)
    return created(run)


def run_input_refused(exc: RunInputError, prefix: str = "") -> JsonResponse:
    """400: args that do not fit the tool's schema are ``invalid`` with ``field_errors`` naming each
    (the shape an answer's field errors take); any other input is a ``bad_request``."""
    if exc.field_errors:
        return error(400, "invalid", prefix + str(exc), field_errors=exc.field_errors)
    return error(400, "bad_request", prefix + str(exc))


def created(run: Run) -> JsonResponse:
    """201 with the run as it was created (its task has not run yet, so it has asked nothing):
    no read-back on the database thread the run's first steps are queued behind."""
    view = shapes.run_view(run, open_requests=())
    if view["cancel"] is not None:  # the caller started it, and a run's starter may always cancel it
        view["cancel"] = {**view["cancel"], "may_cancel": True, "why_not": None}
    return JsonResponse(view, status=201)


async def _start(body: dict[str, Any], *, user: User, retry_of: int | None = None) -> Run:
    if "agent" in body:
        if body.get("tool") is not None:
            raise RunInputError("Send either 'tool' (one tool call) or 'agent' (an agent loop), not both.")
        if body.get("args") is not None:
            raise RunInputError("An agent run takes no 'args': its model chooses each tool's arguments.")
        return await runner.start_agent_run(
            agent=body["agent"], timeout=body.get("timeout"), user=user, retry_of=retry_of
        )
    return await runner.start_run(
        tool=body.get("tool"), args=body.get("args"), timeout=body.get("timeout"), user=user, retry_of=retry_of
    )


@require_POST
@api_auth_required
@handles_bad_input
async def retry_run(request: ApiRequest, run_id: int) -> HttpResponse:
    """Start a finished run again as a new run (same tool and args, or same prompt and model), linked to it."""
    try:
        again = await services.aretry_input(run_id)
    except RunNotFound as exc:
        return error(404, "not_found", str(exc))
    except RunInputError as exc:
        return error(409, "not_finished", str(exc))
    try:
        run = await _start(again, user=request.user, retry_of=run_id)
    except RunInputError as exc:
        return run_input_refused(exc, prefix=f"Run {run_id} cannot be started again as it was: ")
    return created(run)


@require_GET
@api_auth_required
async def get_transcript(request: ApiRequest, run_id: int) -> HttpResponse:
    """The run's transcript so far: prompt, model turns, tool calls and results, requests, where it stopped."""
    if not await selectors.arun_exists(run_id):
        return error(404, "not_found", f"There is no run with id {run_id}.")
    return JsonResponse({"run": run_id, "entries": await transcript.aentries(run_id)})


@require_GET
@api_auth_required
async def get_run(request: ApiRequest, run_id: int) -> HttpResponse:
    """The run as this caller sees it: with ``may_cancel`` and ``why_not`` for them (shapes.run_for_user)."""
    try:
        run = await frames.arun_detail(run_id)
    except Run.DoesNotExist:
        return error(404, "not_found", f"There is no run with id {run_id}.")
    return JsonResponse(shapes.run_for_user(run, await policies.aviewer_of(request.user)))


@require_POST
@api_auth_required
@handles_bad_input
async def cancel_run(request: ApiRequest, run_id: int) -> HttpResponse:
    """Its starter, staff, or whoever may answer what it waits on; a token only its own user's runs (403 otherwise)."""
    run = await runner.cancel_run(run_id, user=request.user, by_token=request.api_token is not None)
    return JsonResponse({"id": run.pk, "cancel_requested": True}, status=202)


@require_http_methods(["GET", "POST"])
@api_auth_required
@handles_bad_input
async def requests_collection(request: ApiRequest) -> HttpResponse:
    """GET: one page of the inbox query in the query string (approvals/inbox/); POST: a host opens a request."""
    if request.method == "POST":
        return await _open_request(request)
    # Without status=, every request (open and resolved); the dashboard asks for status=open.
    query = inbox.InboxQuery.from_params(request.GET, default_status="all")
    viewer = await policies.aviewer_of(request.user)
    page = await inbox.ainbox_page(query, viewer)
    page["requests"] = [shapes.for_user(view, viewer) for view in page["requests"]]
    for group in page.get("groups", ()):
        group["request"] = shapes.for_user(group["request"], viewer)
    return JsonResponse(page)


@require_POST
@api_auth_required
@handles_bad_input
async def bulk_answer(request: ApiRequest) -> HttpResponse:
    """Approve or decline many requests, by ids or by filter; ``dry_run`` only says what would happen."""
    ask = bulk.bulk_ask(json_body(request))
    outcome = await bulk.aanswer_in_bulk(ask, user=request.user)
    return JsonResponse(outcome.as_dict())


@require_GET
@api_auth_required
async def get_request(request: ApiRequest, request_id: str) -> HttpResponse:
    """The request as this caller sees it now (shapes.for_user): status, decision, claim, policy."""
    view = await frames.arequest_detail(request_id)
    if view is None:
        return error(404, "not_found", f"There is no request with id {request_id!r}.")
    return JsonResponse(shapes.for_user(view, await policies.aviewer_of(request.user)))


async def _open_request(request: ApiRequest) -> HttpResponse:
    """A remote host opens a §10 Request: 201 when new, 200 when this exact request was already sent."""
    asked = intake.host_request(json_body(request))
    row, created = await decisions.aopen_host_request(
        asked.wire, user=request.user, host=asked.host, tool=asked.tool, args=asked.args
    )
    return JsonResponse(await frames.arequest_detail(row.pk), status=201 if created else 200)


@require_http_methods(["GET", "POST"])
@api_auth_required
@handles_bad_input
async def request_answer(request: ApiRequest, request_id: str) -> HttpResponse:
    """GET long-polls for the Answer (a host waiting); POST answers the request (a reviewer)."""
    if request.method == "POST":
        return await answer_request(request, request_id)
    wait = intake.wait_seconds(request.GET.get("wait"))
    if not await selectors.arequest_exists(request_id):
        return error(404, "not_found", f"There is no request with id {request_id!r}.")
    await runner.ensure_started()  # the supervisor wakes the long-poll (started already behind the ASGI stack)
    answer = await waiting.answer_within(request_id, wait)
    if answer is None:
        return JsonResponse({"id": request_id, "status": "open"}, status=202)
    return JsonResponse(shapes.wire_answer(answer))


async def answer_request(request: ApiRequest, request_id: str) -> HttpResponse:
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
        via="api",
    )
    if isinstance(answer, decisions.ApprovalRecorded):  # counted towards the policy's quorum; still open
        return JsonResponse(answer.as_dict(), status=202)
    return JsonResponse(shapes.wire_answer(answer))


@require_POST
@api_auth_required
@handles_bad_input
async def cancel_request(request: ApiRequest, request_id: str) -> HttpResponse:
    """The host that opened a request withdraws it; the stored Answer is ok=false, reason cancelled."""
    answer = await decisions.awithdraw_host_request(request_id, user=request.user)
    return JsonResponse(shapes.wire_answer(answer))


async def _claim_view(request: ApiRequest, row: Request) -> HttpResponse:
    viewer = await policies.aviewer_of(request.user)
    return JsonResponse(shapes.for_user(await frames.arequest_detail(row.pk), viewer))


@require_POST
@api_auth_required
@handles_bad_input
async def claim_request(request: ApiRequest, request_id: str) -> HttpResponse:
    """Take an open request ("bob is on it"); 409 while someone else holds it."""
    return await _claim_view(request, await claims.aclaim(request_id, user=request.user))


@require_POST
@api_auth_required
@handles_bad_input
async def release_request(request: ApiRequest, request_id: str) -> HttpResponse:
    """Let go of a claimed request; its claimant or staff."""
    return await _claim_view(request, await claims.arelease(request_id, user=request.user))


@require_POST
@api_auth_required
@handles_bad_input
async def hand_request(request: ApiRequest, request_id: str) -> HttpResponse:
    """Hand an open request to a user or a group: ``{"to": "alice"}`` or ``{"to": "group:ops"}``."""
    body = json_body(request)
    return await _claim_view(request, await claims.ahand(request_id, user=request.user, to=body.get("to")))


@require_GET
async def openapi_document(request: HttpRequest) -> HttpResponse:
    """The OpenAPI 3.1 description of this API; public, like any API reference."""
    toolkit = await get_toolkit()
    return JsonResponse(openapi.document(tool_names=[tool.name for tool in toolkit.tools()]))


async def no_such_endpoint(request: HttpRequest) -> HttpResponse:
    return error(404, "not_found", f"There is no API endpoint at {request.path}; see /api/v1/openapi.json.")
