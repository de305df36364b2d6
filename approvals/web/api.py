"""JSON API under /api/v1/: a bearer token, or the session login with CSRF. Thin: parse, call, answer.

django-ninja routes the calls, reads each body with ``review/intake.parse_json`` into the strict shape
``approvals/web/schemas.py`` declares, and writes the OpenAPI document from those same declarations.
Refusals are JSON with a message a person can act on (``{"error", "message", "field_errors"?}``); nothing
here returns a 500 for bad input, and no refusal is ninja's own 422 ``{"detail"}``.
"""

import json
from collections.abc import Collection
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.utils.datastructures import MultiValueDict
from ninja import Body, NinjaAPI, Path, Query
from ninja.errors import AuthenticationError, AuthorizationError, HttpError, ValidationError, ValidationErrorContext
from ninja.parser import Parser
from ninja.security.base import AuthBase
from ninja.utils import check_csrf
from pydantic import BaseModel

from approvals import frames, inbox, keyset, selectors, shapes
from approvals.inbox import bulk
from approvals.models import ApiToken, Request, Run
from approvals.review import claims, deadlines, decisions, execution, intake
from approvals.review.intake import NotJson, parse_json
from approvals.runs import runner, services, shutdown, transcript, waiting
from approvals.runs.services import RunInputError, RunNotFound
from approvals.runs.toolkit import get_toolkit
from approvals.signing import keys
from approvals.team import lockout, policies, tokens
from approvals.web import schemas


class ApiRequest(HttpRequest):
    """An API call past authentication: who is calling, and how.

    For typing only, like healthchecks' ``ApiRequest``: Django makes the request and ``BearerAuth`` or
    ``SessionAuth`` sets both fields before the view is called, so a view reads them typed.
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


class Refused(Exception):
    """The call is refused with this response: by authentication (401, 403 for CSRF, 429 when locked out), or
    before its parameters are read (a query parameter given twice)."""

    def __init__(self, response: HttpResponse) -> None:
        super().__init__(response.status_code)
        self.response = response


def _locked_out(exc: lockout.LockedOut) -> JsonResponse:
    """The API's refusal of a locked-out client: 429 ``locked_out`` with Retry-After."""
    response = error(429, "locked_out", str(exc))
    response["Retry-After"] = str(exc.lock.retry_after)
    return response


def _check_csrf(request: HttpRequest) -> None:
    """A call not made with a bearer token passes Django's CSRF check (as every page's form does) or is refused.

    Ninja exempts its views from CsrfViewMiddleware and leaves the check to the authentication; this is it.
    A bearer call was let off by security.bearer_calls_skip_csrf, which CsrfViewMiddleware honours here too.
    """
    refusal = check_csrf(request)
    if refusal is not None:
        raise Refused(refusal)


def _authenticated(request: HttpRequest, user: User, token: ApiToken | None) -> ApiRequest:
    # The one place a request becomes an ApiRequest: both of its fields are set here, before the view runs.
    api_request = cast(ApiRequest, request)
    api_request.user, api_request.api_token = user, token
    return api_request


class BearerAuth(AuthBase):
    """``Authorization: Bearer <token>``. A call that carries an Authorization header is judged by it alone:
    it skipped the CSRF check, so it must never fall back to the session cookie."""

    openapi_type = "http"
    openapi_scheme = "bearer"
    openapi_description = "An API token. Bearer calls need no CSRF token."

    async def __call__(self, request: HttpRequest) -> ApiRequest | None:
        header = request.headers.get("Authorization")
        if header is None:
            return None  # the session's turn
        secret = tokens.bearer_secret(header)
        if secret is None:
            _check_csrf(request)  # not a bearer call: CSRF was not waived, and comes first as for any form
            raise Refused(unauthorized("invalid_token", "Send the token as 'Authorization: Bearer <token>'."))
        try:
            token = await tokens.aauthenticate(secret, client=lockout.client_of_api_call(request))
        except lockout.LockedOut as exc:
            raise Refused(_locked_out(exc)) from None
        except tokens.TokenError as exc:
            raise Refused(unauthorized("invalid_token", str(exc))) from None
        return _authenticated(request, token.user, token)


class SessionAuth(AuthBase):
    """The console's login session; unsafe methods also need the X-CSRFToken header."""

    openapi_type = "apiKey"
    openapi_in = "cookie"
    openapi_description = "The console's login session; unsafe methods also need the X-CSRFToken header."

    def __init__(self) -> None:
        self.openapi_name = settings.SESSION_COOKIE_NAME
        super().__init__()

    async def __call__(self, request: HttpRequest) -> ApiRequest:
        _check_csrf(request)
        user = await request.auser()
        if not isinstance(user, User) or not user.is_authenticated:
            raise Refused(
                unauthorized(
                    "unauthenticated", "Log in first, or send 'Authorization: Bearer <token>' (tokens: /tokens/)."
                )
            )
        return _authenticated(request, user, None)


class BadBody(ValueError):
    """The body is JSON but not an object (``error``: ``bad_request``)."""


class BadJson(BadBody):
    """The body could not be decoded as JSON (``error``: ``bad_json``)."""


class BodyTooLarge(ValueError):
    pass


def _too_large_message() -> str:
    limit = settings.TOOLNEXUS["MAX_BODY_BYTES"]
    return f"The body is larger than {limit} bytes ({limit // 1024} KiB); send less data."


class IntakeParser(Parser):
    """Bodies through ``intake.parse_json`` (no NaN, Infinity, lone surrogates, NUL or deep nesting), size first;
    query parameters each given once."""

    def parse_querydict(
        self, data: MultiValueDict[str, Any], list_fields: list[str], request: HttpRequest
    ) -> dict[str, Any]:
        """Django's QueryDict answers the last of a repeated parameter: a call that gives one that is not a list
        twice says two things, and is refused (400 ``bad_request``, the parameter in ``field_errors``)."""
        repeated = {
            key: len(data.getlist(key)) for key in data if key not in list_fields and len(data.getlist(key)) > 1
        }
        if repeated:
            field_errors = {key: [f"Give '{key}' once; it was given {times} times."] for key, times in repeated.items()}
            first = next(iter(field_errors))
            raise Refused(error(400, "bad_request", field_errors[first][0], field=first, field_errors=field_errors))
        return super().parse_querydict(data, list_fields, request)

    def parse_body(self, request: HttpRequest) -> dict[str, Any]:
        limit = settings.TOOLNEXUS["MAX_BODY_BYTES"]
        declared = request.headers.get("Content-Length") or "0"
        if (declared.isascii() and declared.isdigit() and int(declared) > limit) or len(request.body) > limit:
            raise BodyTooLarge(_too_large_message())
        try:
            body = parse_json(request.body)
        except NotJson as exc:
            raise BadJson(f"The body is not JSON the console accepts: {exc}.") from None
        if not isinstance(body, dict):
            raise BadBody("The body must be a JSON object.")
        return body


# A body parameter's default: what the call sent, or an empty object when it sent no body at all. Ninja
# skips the parser for an empty body and would refuse it as a missing ``body``; read as ``{}`` it is judged
# like any other, and the refusal names the field that is missing, as before.
SENT_OR_EMPTY: Any = Body({}, validate_default=True)


def _description_at(model: type[BaseModel], location: tuple[Any, ...]) -> str | None:
    """The declared description of the field at ``location`` (``("body", "ok")``) in a parameter model."""
    current: Any = model
    description = None
    for part in location:
        fields = getattr(current, "model_fields", None)
        if not isinstance(part, str) or not isinstance(fields, dict) or part not in fields:
            return None
        current, description = fields[part].annotation, fields[part].description
    return description


class ConsoleApi(NinjaAPI):
    """NinjaAPI whose validation errors keep each field's declared description, for the refusal's words."""

    def validation_error_from_error_contexts(self, error_contexts: list[ValidationErrorContext]) -> ValidationError:
        refusal = super().validation_error_from_error_contexts(error_contexts)
        locations = [
            (context.model, tuple(problem["loc"]))
            for context in error_contexts
            for problem in context.pydantic_validation_error.errors(include_url=False)
        ]
        for problem, (model, location) in zip(refusal.errors, locations, strict=True):
            problem["description"] = _description_at(model, location)
        return refusal


api = ConsoleApi(
    title="toolnexus console API",
    version="1",
    description=(
        "Runs of server-side tools, and toolnexus §10 requests from any host: open one, long-poll its Answer, "
        "withdraw it. Authenticate with `Authorization: Bearer <token>` (issue one at /tokens/ or with "
        "`manage.py issue_token`), or with the console's session cookie plus `X-CSRFToken`. Answers to a host's "
        "requests are also pushed on the WebSocket /ws/host/ (same token). Bodies are JSON without NaN or "
        "Infinity, and no string in them may hold U+0000 or a lone surrogate (neither can be stored): such a body "
        "is refused with `error` `bad_json`. A body whose fields have the wrong type or break a limit is refused "
        'with `error` `bad_request` and `field_errors`; types are strict (`"1"` is not `true`, `"5"` is not `5`).'
    ),
    servers=[{"url": "/api/v1"}],
    openapi_url=None,
    docs_url=None,
    auth=[BearerAuth(), SessionAuth()],
    parser=IntakeParser(),
    urls_namespace="api-v1",
)


# -- refusals -----------------------------------------------------------------------------------------------------


@api.exception_handler(Refused)
def _refused(request: HttpRequest, exc: Refused) -> HttpResponse:
    return exc.response


@api.exception_handler(AuthenticationError)
@api.exception_handler(AuthorizationError)
def _unauthenticated(request: HttpRequest, exc: Exception) -> HttpResponse:
    return unauthorized("unauthenticated", "Log in first, or send 'Authorization: Bearer <token>' (tokens: /tokens/).")


@api.exception_handler(HttpError)
def _unreadable_body(request: HttpRequest, exc: HttpError) -> HttpResponse:
    """Ninja wraps what the parser raised in an HttpError(400); the cause says which refusal it is."""
    cause = exc.__cause__
    if isinstance(cause, BodyTooLarge):
        return error(413, "too_large", str(cause))
    if isinstance(cause, BadJson):
        return error(400, "bad_json", str(cause))
    if isinstance(cause, BadBody):
        return error(400, "bad_request", str(cause))
    return error(exc.status_code, "bad_request", str(exc))


def _field_name(location: tuple[Any, ...]) -> str:
    # Ninja's location: (source, parameter, *path in the body); a body's fields are named from its top.
    source, *rest = location
    path = rest[1:] if source == "body" else rest
    return ".".join(str(part) for part in path) or "body"


def _wording(problem: dict[str, Any]) -> str:
    """One pydantic complaint, worded for a person."""
    kind, context = problem["type"], problem.get("ctx") or {}
    if kind == "missing":
        return f"is required: {problem['description']}" if problem.get("description") else "is required"
    if kind == "extra_forbidden":
        return "is not a field this call takes"
    if kind == "bool_type":
        return "must be true or false"
    if kind in ("string_type", "str_type"):
        return "must be text"
    if kind in ("int_type", "float_type"):
        return "must be a number"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return "must be a JSON object"
    if kind == "list_type":
        return "must be a list"
    if kind == "string_pattern_mismatch" and context.get("pattern") == intake.NOT_BLANK_PATTERN:
        return "must not be blank"
    message = str(problem["msg"])
    return "must be " + message.removeprefix("Input should be ") if message.startswith("Input should be ") else message


@api.exception_handler(ValidationError)
def _invalid_shape(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    """A body or parameter of the wrong type or beyond a limit: 400 ``bad_request`` with ``field_errors``."""
    field_errors: dict[str, list[str]] = {}
    for problem in exc.errors:
        name = _field_name(tuple(problem["loc"]))
        wording = f"'{name}' {_wording(problem)}".removesuffix(".") + "."
        if wording not in field_errors.setdefault(name, []):
            field_errors[name].append(wording)
    first = next(iter(field_errors))
    return error(400, "bad_request", field_errors[first][0], field=first, field_errors=field_errors)


@api.exception_handler(decisions.DecisionError)
def _decision_refused(request: HttpRequest, exc: decisions.DecisionError) -> HttpResponse:
    return JsonResponse(exc.as_dict(), status=exc.http_status)


@api.exception_handler(inbox.QueryError)
@api.exception_handler(bulk.BulkError)
def _query_refused(request: HttpRequest, exc: inbox.QueryError | bulk.BulkError) -> HttpResponse:
    return error(400, "bad_request", exc.message, field=exc.field)


@api.exception_handler(keyset.CursorError)
def _cursor_refused(request: HttpRequest, exc: keyset.CursorError) -> HttpResponse:
    return error(400, "bad_request", str(exc), field="after")


@api.exception_handler(shutdown.ShuttingDown)
def _shutting_down(request: HttpRequest, exc: shutdown.ShuttingDown) -> HttpResponse:
    response = error(503, "shutting_down", str(exc))
    response["Retry-After"] = "1"
    return response


@api.exception_handler(Exception)
def _not_ninjas_to_handle(request: HttpRequest, exc: Exception) -> HttpResponse:
    """Anything else is Django's to report, with or without DEBUG, as for every other view."""
    raise exc


@api.exception_handler(RequestDataTooBig)
def _too_large(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    return error(413, "too_large", _too_large_message())


@api.exception_handler(intake.IntakeError)
def _intake_refused(request: HttpRequest, exc: intake.IntakeError) -> HttpResponse:
    return error(400, "bad_request", str(exc))


@api.exception_handler(Http404)
def _no_such_object(request: HttpRequest, exc: Http404) -> HttpResponse:
    return not_found(request)


# -- what the document says of each reply ---------------------------------------------------------------------

UNAUTHORIZED = "No credentials, or a bad, unknown or revoked token (`error` is `unauthenticated` or `invalid_token`)."
LOCKED_OUT = (
    "Too many refused tokens or failed logins from this client address (`error`: `locked_out`): no token is looked "
    "at until the cool-down ends; `Retry-After` says in how many seconds."
)
SHUTTING_DOWN = (
    "This console process is shutting down (SIGTERM) and starts no new runs (`error`: `shutting_down`): send it "
    'again, to another console (docs/operations.md, "Stopping a console").'
)
TOO_LARGE = "The body is larger than the console accepts (`error`: `too_large`)."
NOT_FOUND = "There is no such {}."
HEADERS = {
    401: {"WWW-Authenticate": {"schema": {"type": "string"}, "description": 'Bearer realm="toolnexus console"'}},
    429: {"Retry-After": {"schema": {"type": "string"}, "description": "Seconds until the lockout lifts."}},
    503: {"Retry-After": {"schema": {"type": "string"}, "description": "Seconds: 1."}},
}


def replies(described: dict[int, tuple[Any, str]], *, body: bool = False) -> dict[str, Any]:
    """An operation's ``response`` and ``openapi_extra``: each status with its schema and its words.

    Every call here is authenticated (401, 429); a call with a body may be too large (413).
    """
    every = {**described, 401: (schemas.Error, UNAUTHORIZED), 429: (schemas.Error, LOCKED_OUT)}
    if body:
        every[413] = (schemas.Error, TOO_LARGE)
    every = dict(sorted(every.items()))
    documented: dict[int, Any] = {}
    for status, (_, words) in every.items():
        documented[status] = {"description": words, **({"headers": HEADERS[status]} if status in HEADERS else {})}
    extra: dict[str, Any] = {"responses": documented}
    if body:
        limit = settings.TOOLNEXUS["MAX_BODY_BYTES"]
        extra["requestBody"] = {"required": True, "description": f"JSON, at most {limit} bytes."}
    return {"response": {status: schema for status, (schema, _) in every.items()}, "openapi_extra": extra}


def refusal(words: str) -> tuple[Any, str]:
    return (schemas.Error, words)


# -- runs -----------------------------------------------------------------------------------------------------


@api.post(
    "/runs",
    url_name="api-create-run",
    operation_id="createRun",
    summary="Start a run: one server-side tool, or an agent loop over them.",
    **replies(
        {
            201: (schemas.Run, "The run, already running."),
            400: refusal(
                "Args that do not fit the tool's `input_schema` (required, types, enums, bounds): `error` `invalid`, "
                "with `field_errors` naming each argument; nothing is stored. Otherwise `bad_request`: an unknown tool "
                "or model, args that are not an object, a bad prompt or timeout, a scripted prompt the model cannot "
                "follow, or a body that is not a JSON object."
            ),
            503: refusal(SHUTTING_DOWN),
        },
        body=True,
    ),
)
async def create_run(request: ApiRequest, body: schemas.NewRun = SENT_OR_EMPTY) -> HttpResponse:
    """``{tool, args?, timeout?}`` runs one tool; ``{agent: {prompt, model?}, timeout?}`` runs an agent loop."""
    try:
        run = await _start(body.model_dump(exclude_unset=True), user=request.user)
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
            agent=body["agent"],
            timeout=body.get("timeout"),
            user=user,
            retry_of=retry_of,
            timeout_counts_waiting=body.get("timeout_counts_waiting"),
        )
    return await runner.start_run(
        tool=body.get("tool"),
        args=body.get("args"),
        timeout=body.get("timeout"),
        user=user,
        retry_of=retry_of,
        timeout_counts_waiting=body.get("timeout_counts_waiting"),
    )


@api.get(
    "/runs/{int:run_id}",
    url_name="api-run",
    operation_id="getRun",
    summary="The run as this user sees it, with its latest request and who may cancel it.",
    **replies({200: (schemas.Run, "The run, with its latest request."), 404: refusal(NOT_FOUND.format("run"))}),
)
async def get_run(request: ApiRequest, run_id: Path[schemas.RunId]) -> HttpResponse:
    """The run as this caller sees it: with ``may_cancel`` and ``why_not`` for them (shapes.run_for_user)."""
    try:
        run = await frames.arun_detail(run_id)
    except Run.DoesNotExist:
        return error(404, "not_found", f"There is no run with id {run_id}.")
    return JsonResponse(shapes.run_for_user(run, await policies.aviewer_of(request.user)))


@api.post(
    "/runs/{int:run_id}/cancel",
    url_name="api-cancel-run",
    operation_id="cancelRun",
    summary="Trip the run's cancel token; the run ends `cancelled`.",
    **replies(
        {
            202: (schemas.CancelRequested, "The cancel is recorded."),
            403: refusal(
                "This user may not cancel the run (`error`: `forbidden`): only its starter, staff, or whoever may "
                "answer the requests it waits on; with an API token, only runs the token's user started."
            ),
            404: refusal(NOT_FOUND.format("run")),
            409: refusal("The run has already finished."),
        }
    ),
)
async def cancel_run(request: ApiRequest, run_id: Path[schemas.RunId]) -> HttpResponse:
    """Its starter, staff, or whoever may answer what it waits on; a token only its own user's runs (403 otherwise)."""
    run = await runner.cancel_run(run_id, user=request.user, by_token=request.api_token is not None)
    return JsonResponse({"id": run.pk, "cancel_requested": True}, status=202)


@api.post(
    "/runs/{int:run_id}/retry",
    url_name="api-retry-run",
    operation_id="retryRun",
    summary="Start a finished run again: a new run with the same tool and args, or prompt and model.",
    **replies(
        {
            201: (schemas.Run, "The new run (its `retry_of` is this run), already running."),
            400: refusal(
                "The run's input is no longer valid: its tool is gone, or its args no longer fit the tool's "
                "`input_schema` (`invalid`, with `field_errors`)."
            ),
            404: refusal(NOT_FOUND.format("run")),
            409: refusal("The run is still active (`error`: `not_finished`)."),
            503: refusal(SHUTTING_DOWN),
        }
    ),
)
async def retry_run(request: ApiRequest, run_id: Path[schemas.RunId]) -> HttpResponse:
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


@api.get(
    "/runs/{int:run_id}/transcript",
    url_name="api-run-transcript",
    operation_id="getRunTranscript",
    summary="The run's transcript so far, oldest entry first.",
    **replies({200: (schemas.Transcript, "The entries."), 404: refusal(NOT_FOUND.format("run"))}),
)
async def get_transcript(request: ApiRequest, run_id: Path[schemas.RunId]) -> HttpResponse:
    """The run's transcript so far: prompt, model turns, tool calls and results, requests, where it stopped."""
    if not await selectors.arun_exists(run_id):
        return error(404, "not_found", f"There is no run with id {run_id}.")
    return JsonResponse({"run": run_id, "entries": await transcript.aentries(run_id)})


# -- requests -------------------------------------------------------------------------------------------------


@api.get(
    "/requests",
    url_name="api-requests",
    operation_id="listRequests",
    summary="One page of the inbox: search, filter, sort or group the requests; follow 'next'.",
    description=(
        "Every filter given must hold. Without `status`, requests of every status are listed; the dashboard asks "
        "for `status=open`. Pages follow each other by keyset: a request that closes between two pages shifts no "
        "other into or out of view."
    ),
    **replies(
        {
            200: (schemas.RequestsPage, "One page, with how many requests match in all and the next page's cursor."),
            400: refusal(
                "A parameter it cannot take (`field` names it; `message` says what it takes), an unknown policy, or "
                "an 'after' this console did not give out for this sort."
            ),
        }
    ),
)
async def list_requests(request: ApiRequest, params: Query[schemas.InboxParams]) -> HttpResponse:
    """One page of the inbox query; the query string is read by the inbox's parser, the dashboard's too."""
    # Without status=, every request (open and resolved); the dashboard asks for status=open.
    query = inbox.InboxQuery.from_params(request.GET, default_status="all")
    viewer = await policies.aviewer_of(request.user)
    page = await inbox.ainbox_page(query, viewer)
    page["requests"] = [shapes.for_user(view, viewer) for view in page["requests"]]
    for group in page.get("groups", ()):
        group["request"] = shapes.for_user(group["request"], viewer)
    return JsonResponse(page)


@api.post(
    "/requests",
    url_name="api-requests",
    operation_id="openRequest",
    summary="A remote host opens a §10 Request; it appears on the dashboard and in the audit trail.",
    description=(
        "Idempotent on `id`: sending the same request again returns it with 200 (in its current state, possibly "
        "answered), so a host may retry freely. A different request under a used `id` is 409."
    ),
    **replies(
        {
            201: (schemas.RequestView, "Opened."),
            200: (schemas.RequestView, "This exact request was already opened; here it is."),
            400: refusal(
                "A limit or field is wrong: id (1–200 of A-Z a-z 0-9 . _ : -), kind, prompt (at most "
                f"{intake.MAX_PROMPT_CHARS} characters), data nested deeper than {intake.MAX_DATA_DEPTH}, or "
                "expiresAt not an RFC 3339 date-time."
            ),
            409: refusal("A different request already has this id (`error`: `conflict`); `message` names the fields."),
        },
        body=True,
    ),
)
async def open_request(request: ApiRequest, body: schemas.NewRequest = SENT_OR_EMPTY) -> HttpResponse:
    """A remote host opens a §10 Request: 201 when new, 200 when this exact request was already sent."""
    asked = intake.host_request(body.model_dump(exclude_unset=True))
    row, created = await decisions.aopen_host_request(
        asked.wire, user=request.user, host=asked.host, tool=asked.tool, args=asked.args
    )
    return JsonResponse(await frames.arequest_detail(row.pk), status=201 if created else 200)


@api.post(
    "/requests/bulk",
    url_name="api-bulk-answer",
    operation_id="answerInBulk",
    summary="Approve or decline many requests at once: each through the one door, each audited.",
    description=(
        "Name the requests by `ids` or by the inbox's `filter` (what it matches at the time of the call). With "
        "`dry_run` nothing is answered: the reply says what would happen, for a confirmation; send its `answered` "
        "and `recorded` as `ids` (with the same `filter`, if you like) to answer exactly those. A request this user "
        "may not answer, or that needs more than a yes (any kind but an approval: a form, a question, an "
        "authorization), is skipped with the reason; one already closed is listed as closed. An approval never "
        "carries edited arguments."
    ),
    **replies(
        {
            200: (schemas.BulkOutcome, "What was answered, recorded, skipped and already closed."),
            400: refusal(
                f"A field it cannot take (`field` names it), more than {bulk.MAX_REQUESTS} requests, or an unknown "
                "policy in the filter."
            ),
        },
        body=True,
    ),
)
async def bulk_answer(request: ApiRequest, body: schemas.BulkBody = SENT_OR_EMPTY) -> HttpResponse:
    """Approve or decline many requests, by ids or by filter; ``dry_run`` only says what would happen."""
    ask = bulk.bulk_ask(body.model_dump(exclude_unset=True))
    outcome = await bulk.aanswer_in_bulk(ask, user=request.user)
    return JsonResponse(outcome.as_dict())


@api.get(
    "/requests/{request_id}",
    url_name="api-request",
    operation_id="getRequest",
    summary="The request as this user sees it now: its status, decision, claim and policy.",
    **replies({200: (schemas.RequestView, "The request."), 404: refusal(NOT_FOUND.format("request"))}),
)
async def get_request(request: ApiRequest, request_id: Path[schemas.RequestId]) -> HttpResponse:
    """The request as this caller sees it now (shapes.for_user): status, decision, claim, policy."""
    view = await frames.arequest_detail(request_id)
    if view is None:
        return error(404, "not_found", f"There is no request with id {request_id!r}.")
    return JsonResponse(shapes.for_user(view, await policies.aviewer_of(request.user)))


@api.get(
    "/requests/{request_id}/answer",
    url_name="api-answer",
    operation_id="awaitAnswer",
    summary="Long-poll for the request's Answer.",
    description=(
        "Returns as soon as the request is resolved (answered, declined, cancelled or expired), or after `wait` "
        "seconds with 202 if it is still open. A request past its expiresAt is expired on the way out."
    ),
    **replies(
        {
            200: (schemas.Answer, "The stored Answer."),
            202: (schemas.OpenStatus, "Still open after the wait; ask again."),
            400: refusal(f"`wait` is not a number of seconds from 0 to {intake.MAX_WAIT_SECONDS}."),
            404: refusal(NOT_FOUND.format("request")),
        }
    ),
)
async def await_answer(
    request: ApiRequest, request_id: Path[schemas.RequestId], params: Query[schemas.WaitParams]
) -> HttpResponse:
    """A host waits for the Answer; 202 with the request still open when ``wait`` runs out first."""
    wait = intake.wait_seconds(params.wait)
    if not await selectors.arequest_exists(request_id):
        return error(404, "not_found", f"There is no request with id {request_id!r}.")
    await runner.ensure_started()  # the supervisor wakes the long-poll (started already behind the ASGI stack)
    answer = await waiting.answer_within(request_id, wait)
    if answer is None:
        return JsonResponse({"id": request_id, "status": "open"}, status=202)
    return JsonResponse(shapes.wire_answer(answer))


@api.post(
    "/requests/{request_id}/answer",
    url_name="api-answer",
    operation_id="answerRequest",
    summary="A reviewer answers: approve / answer (ok true), or decline, respond or request changes (ok false).",
    **replies(
        {
            200: (schemas.Answer, "The stored Answer."),
            202: (schemas.ApprovalRecorded, "An approval counted towards the policy's quorum; the request stays open."),
            400: refusal(
                "No boolean `ok`, a bad reason, data that does not fit the request, an unknown reject `option`, or a "
                "`response` without its `message` (`field_errors`)."
            ),
            403: refusal("The request's policy does not let this user answer it (`error`: `forbidden`)."),
            404: refusal(NOT_FOUND.format("request")),
            409: refusal(
                "Already resolved (`message` names who and when), or `digest` names another call than the request "
                "asks for now (`error`: `conflict`)."
            ),
        },
        body=True,
    ),
)
async def answer_request(
    request: ApiRequest, request_id: Path[schemas.RequestId], body: schemas.AnswerBody = SENT_OR_EMPTY
) -> HttpResponse:
    answer = await decisions.aresolve_request(
        request_id,
        ok=body.ok,
        data=body.data,
        reason=body.reason,
        comment=body.comment or "",
        user=request.user,
        via="api",
        response=body.response,
        message=body.message,
        option=body.option,
        digest=body.digest,
    )
    if isinstance(answer, decisions.ApprovalRecorded):  # counted towards the policy's quorum; still open
        return JsonResponse(answer.as_dict(), status=202)
    return JsonResponse(shapes.wire_answer(answer))


@api.post(
    "/requests/{request_id}/cancel",
    url_name="api-cancel-request",
    operation_id="withdrawRequest",
    summary="The host that opened a request withdraws it (ok false, reason cancelled).",
    **replies(
        {
            200: (schemas.Answer, "The stored Answer."),
            403: refusal("Only the user whose token opened the request can withdraw it."),
            404: refusal(NOT_FOUND.format("request")),
            409: refusal("Already resolved; `message` names who and when."),
        }
    ),
)
async def cancel_request(request: ApiRequest, request_id: Path[schemas.RequestId]) -> HttpResponse:
    """The host that opened a request withdraws it; the stored Answer is ok=false, reason cancelled."""
    answer = await decisions.awithdraw_host_request(request_id, user=request.user)
    return JsonResponse(shapes.wire_answer(answer))


@api.post(
    "/requests/{request_id}/outcome",
    url_name="api-request-outcome",
    operation_id="reportOutcome",
    summary="The host that opened an approved request reports how its tool ended: first report wins.",
    **replies(
        {
            200: (schemas.RequestView, "The request as it is now, its `execution` holding the report."),
            400: refusal("No boolean `ok`, or a `message` that is not text or is too long."),
            403: refusal("Only the user whose token opened the request may report its outcome."),
            404: refusal(NOT_FOUND.format("request")),
            409: refusal(
                "Not approved (or answered), a console run's (the console records those), or already reported "
                "otherwise; the same report again is a 200."
            ),
        },
        body=True,
    ),
)
async def report_outcome(
    request: ApiRequest, request_id: Path[schemas.RequestId], body: schemas.OutcomeBody = SENT_OR_EMPTY
) -> HttpResponse:
    """A remote host says whether its tool succeeded after the approval (``{"ok": true, "message": "..."}``)."""
    await execution.areport_outcome(request_id, user=request.user, ok=body.ok, message=body.message or "")
    view = await frames.arequest_detail(request_id)
    return JsonResponse(shapes.for_user(view, await policies.aviewer_of(request.user)))


def _claim_replies(conflict: str, *, body: bool = False) -> dict[str, Any]:
    return replies(
        {
            200: (schemas.RequestView, "The request as it is now."),
            400: refusal("`to` names no active user or existing group (`field_errors`)."),
            403: refusal("Its policy does not let this user decide it, or someone else holds it."),
            404: refusal(NOT_FOUND.format("request")),
            409: refusal(conflict),
        },
        body=body,
    )


async def _claim_view(request: ApiRequest, row: Request) -> HttpResponse:
    viewer = await policies.aviewer_of(request.user)
    return JsonResponse(shapes.for_user(await frames.arequest_detail(row.pk), viewer))


@api.post(
    "/requests/{request_id}/claim",
    url_name="api-claim-request",
    operation_id="claimRequest",
    summary="Take an open request: others see who is on it.",
    **_claim_replies("Someone else holds it (`message` names them), or it is already resolved."),
)
async def claim_request(request: ApiRequest, request_id: Path[schemas.RequestId]) -> HttpResponse:
    """Take an open request ("bob is on it"); 409 while someone else holds it."""
    return await _claim_view(request, await claims.aclaim(request_id, user=request.user))


@api.post(
    "/requests/{request_id}/release",
    url_name="api-release-request",
    operation_id="releaseRequest",
    summary="Let go of a request you hold (staff: anyone's).",
    **_claim_replies("Someone else changed who holds it, or it is already resolved."),
)
async def release_request(request: ApiRequest, request_id: Path[schemas.RequestId]) -> HttpResponse:
    """Let go of a claimed request; its claimant or staff."""
    return await _claim_view(request, await claims.arelease(request_id, user=request.user))


@api.post(
    "/requests/{request_id}/hand",
    url_name="api-hand-request",
    operation_id="handRequest",
    summary="Hand an open request to a user or a group; it shows as assigned to them.",
    **_claim_replies("Someone else holds it or changed it meanwhile, or it is already resolved.", body=True),
)
async def hand_request(
    request: ApiRequest, request_id: Path[schemas.RequestId], body: schemas.HandBody = SENT_OR_EMPTY
) -> HttpResponse:
    """Hand an open request to a user or a group: ``{"to": "alice"}`` or ``{"to": "group:ops"}``."""
    return await _claim_view(request, await claims.ahand(request_id, user=request.user, to=body.to))


@api.post(
    "/requests/{request_id}/extend",
    url_name="api-extend-request",
    operation_id="extendRequest",
    summary="Move an open request's deadline later: by `minutes`, or one step (60); at most 24 h in all.",
    **replies(
        {
            200: (schemas.RequestView, "The request as it is now, its new deadline in `expiresAt`."),
            400: refusal("`minutes` is not a whole number from 1 to the cap (`field_errors`)."),
            403: refusal("Its policy does not let this user answer it, so they may not extend it either."),
            404: refusal(NOT_FOUND.format("request")),
            409: refusal("Already resolved or past its deadline, it has no deadline, or the cap leaves no room."),
        },
        body=True,
    ),
)
async def extend_request(
    request: ApiRequest, request_id: Path[schemas.RequestId], body: schemas.ExtendBody = SENT_OR_EMPTY
) -> HttpResponse:
    """Extend an open request's deadline: ``{}`` for one step, ``{"minutes": 30}`` for half an hour."""
    return await _claim_view(
        request, await deadlines.aextend_request(request_id, user=request.user, minutes=body.minutes)
    )


# -- signing keys ---------------------------------------------------------------------------------------------


@api.get(
    "/signing-keys",
    url_name="api-signing-keys",
    operation_id="listSigningKeys",
    summary="The public keys that verify this console's signed answers: the current one first, then rotated ones.",
    description=(
        "Pin them in the hosts that verify answers (`RemoteWaitFor`); during a rotation pin both the old and the "
        "new. A key stays listed after it is rotated away, so answers it signed keep verifying (docs/signing.md)."
    ),
    **replies({200: (schemas.SigningKeys, "The keys, the current one first.")}),
)
async def list_signing_keys(request: ApiRequest) -> HttpResponse:
    """Every key an answer of this console may be signed with (signing/keys.published_keys)."""
    return JsonResponse(shapes.signing_keys_view(await keys.apublished_keys()))


# -- the document ---------------------------------------------------------------------------------------------


@api.get(
    "/openapi.json",
    url_name="api-openapi",
    operation_id="openapi",
    summary="This document.",
    auth=None,
    response={200: dict[str, Any]},
    openapi_extra={"security": [], "responses": {200: {"description": "The OpenAPI 3.1 document."}}},
)
async def openapi_document(request: HttpRequest) -> HttpResponse:
    """The OpenAPI 3.1 description of this API; public, like any API reference."""
    toolkit = await get_toolkit()
    return JsonResponse(document(tool_names=[tool.name for tool in toolkit.tools()]))


SCHEME_NAMES = {"BearerAuth": "bearerAuth", "SessionAuth": "sessionAuth"}


def document(tool_names: Collection[str] = ()) -> dict[str, Any]:
    """The OpenAPI document ninja generates from the declarations above, with ``tool_names`` (the served
    tools, which change with the settings) as a new run's choices of ``tool``.

    Paths are written relative to the server ``/api/v1``, as the routes in approvals/api_urls.py are.
    """
    spec: dict[str, Any] = json.loads(json.dumps(api.get_openapi_schema(path_prefix="")))  # as a client reads it
    components = spec["components"]
    components["securitySchemes"] = {SCHEME_NAMES[name]: dict(s) for name, s in components["securitySchemes"].items()}
    spec["security"] = [{name: []} for name in SCHEME_NAMES.values()]
    for operations in spec["paths"].values():
        for operation in operations.values():
            if "requestBody" in operation:  # SENT_OR_EMPTY's {} is how no body is read, not a default to send
                content = operation["requestBody"]["content"]["application/json"]
                content["schema"] = content["schema"]["allOf"][0]
            if "security" in operation:
                operation["security"] = [
                    {SCHEME_NAMES.get(name, name): scopes for name, scopes in item.items()}
                    for item in operation["security"]
                ]
    # Ninja also lists the query models, whose fields it writes out as parameters: keep only what is referred to.
    text = json.dumps(spec)
    components["schemas"] = {
        name: schema for name, schema in components["schemas"].items() if f'"#/components/schemas/{name}"' in text
    }
    if tool_names:  # an empty enum is not valid JSON Schema
        components["schemas"]["NewRun"]["properties"]["tool"]["enum"] = sorted(tool_names)
    return spec


def not_found(request: HttpRequest) -> JsonResponse:
    return error(404, "not_found", f"There is no API endpoint at {request.path}; see /api/v1/openapi.json.")


async def no_such_endpoint(request: HttpRequest) -> HttpResponse:
    """Any other path under /api/v1/: a JSON 404, not the HTML page a program cannot read."""
    return not_found(request)
