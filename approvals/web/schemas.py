"""The JSON API's shapes, declared once: django-ninja reads the bodies with them and writes the OpenAPI document from them.

Bodies (``NewRun``, ``NewRequest``, ``AnswerBody``, ``BulkBody``, ``HandBody``) are strict: ``"1"`` is not
``true`` and ``"5"`` is not ``5``. What a body's values mean (an unknown tool, a cursor this console did not
make, a policy it lacks) is judged by the services the views call, which word each refusal.

Query strings are text by nature, so their parameters are read by the inbox's own parser (the dashboard's
too): the query schemas here state what it takes, with the limits it enforces.

Replies are built by ``approvals.shapes`` (the one module that turns a row into JSON, for the sockets as
well) and sent as they are; the reply schemas here describe them, and tests/web/test_openapi.py holds the
live API to them with schemathesis.
"""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, WithJsonSchema
from pydantic.json_schema import SkipJsonSchema
from typing_extensions import TypedDict

from approvals import inbox, selectors
from approvals.inbox import bulk
from approvals.models import DecidedBy, RequestStatus, RunStatus
from approvals.review import deadlines, execution, intake, outcomes
from approvals.runs import services


def judged_by_service(declared: Any) -> Any:
    """A field whose values the service judges, in its own words: the document states ``declared``."""
    return WithJsonSchema(TypeAdapter(declared).json_schema())


class Body(BaseModel):
    """A JSON body: strict types, checked as sent; keys it does not name are left to the service."""

    model_config = ConfigDict(strict=True, regex_engine="python-re")


class Reply(BaseModel):
    """A reply's shape, for the document: the views send shapes.py's JSON as it is."""


# -- errors ----------------------------------------------------------------------------------------------------


class Error(Reply):
    """Every refusal: a code a program can branch on and a message a person can act on."""

    error: str = Field(
        description="unauthenticated | invalid_token | csrf_failed | bad_json | bad_request | too_large | invalid | "
        "not_found | not_open | not_finished | conflict | forbidden | locked_out | shutting_down"
    )
    message: str = Field(description="What went wrong, worded for a person.")
    field: str | SkipJsonSchema[None] = Field(
        default=None, description="The parameter or body field at fault, when one is."
    )
    field_errors: dict[str, list[str]] | SkipJsonSchema[None] = Field(
        default=None,
        description="What to fix, per field, each a list of messages: with `error` `invalid`, an answer's fields or "
        "a new run's `args` by argument name, as the tool's `input_schema` judges them (`__all__` holds what concerns "
        "no one field); with `bad_request`, each body field whose type or limit is wrong.",
    )


# -- the wire's shapes -------------------------------------------------------------------------------------------

AnswerReason = Literal["declined", "cancelled", "expired"]


Digest = Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]


class AnswerSignature(Reply):
    """The console's Ed25519 signature on an Answer (docs/signing.md): over the RFC 8785 canonical JSON of the
    Answer's id, ok, data and reason (null when absent) and this object without ``sig``."""

    model_config = ConfigDict(extra="forbid")

    v: Literal[1]
    alg: Literal["Ed25519"]
    kid: str = Field(description="The signing key's id: GET /api/v1/signing-keys lists the keys.")
    call_digest: Digest = Field(description="The digest of the call the request asked for (its tool and args).")
    run_digest: Digest = Field(
        description="The digest of the call that runs after this answer: the args with an approval's edits merged."
    )
    by: str | None = Field(description="The user credited with the decision; null for a timeout or the console.")
    decided_by: Literal["person", "timeout", "console"]
    at: str = Field(description="When it was decided (ISO 8601, UTC), as the request's `answered_at`.")
    sig: str = Field(description="The signature: 64 bytes in unpadded base64url.")


class Answer(Reply):
    """toolnexus §10 Answer in its wire keys; data and reason are left out when unset. ``signature``, the
    console's, is a key of its own beside them (left out on answers stored before the console signed them)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    ok: bool
    data: dict[str, Any] | SkipJsonSchema[None] = None
    reason: AnswerReason | SkipJsonSchema[None] = None
    signature: AnswerSignature | SkipJsonSchema[None] = None


# A change an approval made: ``from`` is a Python keyword, so the functional form keeps the wire key.
Change = TypedDict("Change", {"field": str, "from": Any, "to": Any})


class RejectOption(Reply):
    """A named reason to decline (a request's policy's `reject_options`, then its own `data.reject_options`)."""

    key: str = Field(description="1-40 characters of a-z, 0-9, _ and -; what an answer's `option` names.")
    label: str = Field(description="What a reviewer reads on the button or in the list.")
    text: str = Field(description="What the model reads after the decline (at most 500 characters).")


class Decision(Reply):
    """What became of a resolved request, in words for a person: "Approved by alice", "Declined by bob: too large",
    "Cancelled by demo", "Expired at 18:31 UTC", "Approved by demo with amount 33 → 4". The tool's own result keeps
    the §10 wording (`declined/expired: <prompt>`)."""

    outcome: Literal[outcomes.OUTCOMES]  # type: ignore[valid-type]  # a tuple of the five outcome words
    decided_by: Literal[tuple(DecidedBy.values)] = Field(  # type: ignore[valid-type]  # the model's values
        description="Who decided: `person` (`by` names them), `timeout` (the deadline passed: an expiry, or an "
        "approval with the request's defaults under a policy's `on_timeout: apply_defaults`) or `console` (its own "
        "act: a stopping process, a run's cancel carried out without a person)."
    )
    by: str | None = Field(
        description="Who decided (for a request withdrawn with its run: who cancelled the run); null for the console "
        "itself (an expiry, a stopping process)."
    )
    at: Annotated[str | None, Field(json_schema_extra={"format": "date-time"})]
    comment: str
    changes: list[Change] = Field(
        description="What an approval changed before approving: each editable argument whose approved value differs "
        "from what the tool asked, in the request's argument order, with both raw values. Empty when nothing was "
        "edited, and for any other outcome."
    )
    response: Literal["respond", "request_changes"] | None = Field(
        default=None,
        description="A decline that answered instead of running the tool (`respond`) or asked for changes "
        "(`request_changes`); null for any other decision.",
    )
    message: str | None = Field(
        default=None, description="With `response`: the reviewer's words to the model (the reply, or the changes)."
    )
    option: RejectOption | None = Field(
        default=None, description="The reject option the reviewer picked, as it was offered; null when none."
    )
    text: str = Field(description="The decision in one line, as the pages show it.")


DateTime = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]
MaybeDateTime = Annotated[str | None, WithJsonSchema({"type": ["string", "null"], "format": "date-time"})]


class PolicyView(Reply):
    """Who may answer a request, under which policy (the same for every viewer), and what you may do with it."""

    name: str = Field(description="The policy that governs it (a settings or an admin policy, or the default).")
    source: str = Field(description="Where the policy is written: `settings`, `database` or `default`.")
    quorum: int = Field(description="How many approvals it takes.")
    approvals: list[str] = Field(description="Who approved so far, in order.")
    users: list[str] = Field(description="The users who may answer (with `groups`; both empty: anyone logged in).")
    groups: list[str] = Field(description="The groups whose members may answer.")
    starter: str | None = Field(description="Who set it going: its run's starter, or who opened it.")
    started: str | None = Field(description="What the starter set going: `run` or `request`.")
    starter_may_answer: bool
    confirm_approval: bool = Field(description="The reviewer is asked once more before an approval is sent.")
    assignees: list[str] = Field(description="Whom it is assigned to (usernames, or group:<name>).")
    handed_to: str | None = Field(description="A username or group:<name> a reviewer handed it to.")
    reject_options: list[RejectOption] = Field(
        description="What a reviewer may pick when declining: the policy's options, then the request's own "
        "(`data.reject_options`) whose keys the policy does not use."
    )
    may_answer: bool | None = Field(default=None, description="You may answer it now (per viewer).")
    may_decline: bool | None = Field(default=None, description="You may decline it now (per viewer).")
    why_not: str | None = Field(default=None, description="Why you may not answer it, and what would let you.")
    may_extend: bool | None = Field(default=None, description="You may move its deadline.")
    assigned_to_me: bool | None = Field(default=None, description="It is assigned to you.")
    approved_by_me: bool | None = Field(default=None, description="You approved it already (under a quorum).")


class DeadlineFacts(Reply):
    """An open request's deadline beyond ``expiresAt``: how far answerers moved it and may still move it."""

    extended_minutes: int = Field(description="How far its deadline has been moved so far, in minutes.")
    room_minutes: int = Field(description="How much further it may move (0: not at all, or it is resolved).")
    step_minutes: int = Field(description="How far one extension moves it unless `minutes` says.")
    reminded: bool = Field(description="Its policy's reminder went out for the deadline it has now.")


class Execution(Reply):
    """What became of an approved request's tool (review/execution.py): the console's runs record it; a remote
    host reports it (``POST /api/v1/requests/{id}/outcome``)."""

    state: Literal["executing", "succeeded", "failed", "unreported"] = Field(
        description="`executing`: the tool runs again with the answer (a console that died meanwhile leaves it so: "
        "nobody knows, and it never runs again); `succeeded` or `failed`: how it ended; `unreported`: a host's "
        "request approved and not yet reported."
    )
    outcome: Literal["succeeded", "failed"] | None = Field(description="How it ended, once known.")
    message: str = Field(
        description=f"The tool's output (or the host's message), at most {execution.EXECUTION_MESSAGE_CHARS} characters."
    )
    at: MaybeDateTime = Field(description="When it began executing, or when its outcome was recorded.")


class RequestView(Reply):
    """A stored request: the §10 wire fields (id, kind, prompt, url, data, expiresAt) and the console's own."""

    id: str
    kind: str
    prompt: str
    url: str | None
    data: dict[str, Any] | None
    expiresAt: str | None = Field(description="As sent, or the console's per-kind default.")  # noqa: N815  # wire key
    status: Literal[tuple(RequestStatus.values)]  # type: ignore[valid-type]  # built from the model's values: pydantic reads it, mypy wants literals
    run: int | None = Field(description="The console run that raised it; null for a host's request.")
    tool: str
    args: dict[str, Any]
    call_digest: Digest | None = Field(
        default=None,
        description='`sha256:<hex>` over the RFC 8785 canonical JSON of `{"args": args, "tool": tool}`: the '
        "call this request asks about. Send it back as an answer's `digest` so the answer is refused if the id "
        "asks for another call by then (docs/signing.md); null only for an old request whose args have no "
        "canonical form.",
    )
    arg_order: list[str] = Field(
        description="The names in `args` in the order to show them: the tool's input schema's order, then any others "
        "as sent (a JSON object's key order is not kept)."
    )
    host: str | None = Field(description="The remote host that opened it, as it named itself.")
    opened_by: str | None = Field(description="The user whose token opened it.")
    requester: str | None = Field(description="Who opened it (as `opened_by`).")
    starter: str | None = Field(
        description="Who set it going: the starter of its run, or for a host's request, who opened it."
    )
    created_at: DateTime
    answer: Answer | None
    comment: str
    answered_by: str | None
    answered_at: MaybeDateTime
    claimed_by: str | None = Field(default=None, description="The reviewer working on it.")
    claimed_at: MaybeDateTime = None
    handed_to: str | None = Field(default=None, description="A username or group:<name> it was handed to.")
    decided_by: Literal[tuple(DecidedBy.values)] | None = Field(  # type: ignore[valid-type]  # the model's values
        default=None, description="Who decided it (as `decision.decided_by`); null while it is open."
    )
    escalations: int = Field(
        default=0,
        description="How many times its deadline passed and its policy escalated it (`on_timeout: escalate`): from 1 "
        "on, the policy's fallback answerers may answer it too, and `expiresAt` is the moved deadline.",
    )
    kept_open: bool = Field(
        default=False,
        description="Its deadline (`expiresAt`) passed and its policy keeps it open (`on_timeout: keep_open`): it is "
        "still answerable, and nothing expires it.",
    )
    deadline_note: str | None = Field(
        default=None,
        description='What its passed deadline did to it while it stays open, in words: "Escalated to bob until 20:14 '
        'UTC" or "Deadline passed at 20:14 UTC, kept open"; null otherwise.',
    )
    deadline: DeadlineFacts | None = Field(default=None, description="Null when it has no deadline.")
    policy: PolicyView
    form: dict[str, Any] | None = Field(description="How the dashboard renders the answer form.")
    credentials: str | None = Field(description="Why it may only be declined (it asks for a secret).")
    responses: list[Literal["respond", "request_changes"]] = Field(
        default_factory=list,
        description="What a reviewer may answer instead of running the tool: `respond` (an approval, an input or a "
        "question), `request_changes` (an approval); neither for an authorization, a request for a secret or one "
        "asked from inside a running call. Empty once resolved.",
    )
    decision: Decision | None
    execution: Execution | None = Field(
        default=None,
        description="What became of its tool after an ok answer; null when it was not approved (or answered), or "
        "a run has not got to it.",
    )


class SigningKey(Reply):
    """A public key answers are signed with (docs/signing.md)."""

    kid: str = Field(description="Its key id, 16 hex digits: what an answer's `signature.kid` names.")
    alg: Literal["Ed25519"]
    public_key: str = Field(description="The raw 32-byte public key in unpadded base64url.")
    pem: str = Field(description="The same key as a SubjectPublicKeyInfo PEM (`-----BEGIN PUBLIC KEY-----`).")
    current: bool = Field(description="Whether this console signs new answers with it now.")
    created_at: MaybeDateTime = Field(
        description="When a console first registered it (at start-up); null for the current key if its "
        "registration is not in the database (restored from before it started)."
    )


class SigningKeys(Reply):
    """The keys that verify this console's answers: the current one first, then those rotated away, newest first."""

    keys: list[SigningKey]


class RunResult(Reply):
    output: str
    is_error: bool


class AgentInput(Reply):
    prompt: str
    model: str


class CancelFacts(Reply):
    """Who may cancel an active run: its starter, and the facts of each open request it waits on."""

    run: int
    starter: str | None
    requests: list[dict[str, Any]]


class Run(Reply):
    id: int
    tool: str
    args: dict[str, Any]
    timeout: float | None
    timeout_counts_waiting: bool = Field(
        description="Whether `timeout` counts the waits for a person (the old wall clock) or only the run's own time."
    )
    status: Literal[tuple(RunStatus.values)]  # type: ignore[valid-type]  # built from the model's values: pydantic reads it, mypy wants literals
    status_label: str | SkipJsonSchema[None] = Field(
        default=None,
        description="The status for people: a tool run a person's refusal ended reads `declined`, `cancelled` or "
        "`expired`, not `failed`.",
    )
    outcome_text: str | None = Field(
        default=None,
        description="What became of a finished run, for people: the decision in words (`Declined by alice: too "
        "risky`) when a refusal ended it, else its result; null while active.",
    )
    result: RunResult | None
    started_by: str | None
    cancel_requested: bool
    created_at: DateTime
    finished_at: MaybeDateTime
    request: RequestView | None
    kind: Literal["tool", "agent"] | SkipJsonSchema[None] = None
    label: str | SkipJsonSchema[None] = Field(default=None, description="The tool's name, or `agent (<model>)`.")
    agent: AgentInput | None = None
    retry_of: int | None = Field(default=None, description="The run this one retries.")
    owner: str | SkipJsonSchema[None] = Field(
        default=None,
        description="The console process executing it (`host:pid:id`; `host:pid:id:released` once a stopping "
        "console handed it over, until another adopts it).",
    )
    cancel: CancelFacts | None = None


TranscriptKind = Literal[
    "prompt", "thinking", "assistant", "tool_result", "pending", "asked", "waiting", "answer", "resumed", "stopped",
    "finished",
]  # fmt: skip


class TranscriptEntry(Reply):
    seq: int = Field(ge=1)
    kind: TranscriptKind
    turn: int | None
    text: str
    call_id: str | None
    tool: str | None
    args: dict[str, Any] | None
    is_error: bool | None
    request: str | None = Field(description="The request a pending/asked/waiting/answer entry is about.")
    data: dict[str, Any] | None
    at: DateTime
    decision: Decision | None = Field(
        description="An answer entry's request, decided: who, when, in words. Null for other entries."
    )


class Transcript(Reply):
    run: int
    entries: list[TranscriptEntry]


class CancelRequested(Reply):
    id: int
    cancel_requested: Literal[True]


class ApprovalRecorded(Reply):
    id: str
    status: Literal["open"]
    approvals: list[str] = Field(description="Who approved, in order.")
    quorum: int = Field(description="How many different reviewers must approve.")
    message: str


class OpenStatus(Reply):
    model_config = ConfigDict(extra="forbid")

    id: str
    status: Literal["open"]


class RequestGroup(Reply):
    """One row of a grouped list: a run's requests, or requests with identical tool and args."""

    key: str = Field(description="`run:<id>`, `run:none` (a host's requests) or `alike:<digest>`.")
    count: int = Field(ge=1, description="How many requests the group holds.")
    request: RequestView
    ids: list[str] = Field(
        max_length=inbox.GROUP_IDS,
        description=f"Its requests' ids in the list's order, the first {inbox.GROUP_IDS} at most.",
    )
    hosts: list[str] = Field(
        max_length=inbox.GROUP_ORIGINS,
        description=f"The hosts its requests came from, sorted, the first {inbox.GROUP_ORIGINS} at most.",
    )
    host_count: int = Field(ge=0, description="How many hosts it came from.")
    requesters: list[str] = Field(
        max_length=inbox.GROUP_ORIGINS,
        description="Who opened its requests that came from no host, sorted, as many at most.",
    )
    requester_count: int = Field(ge=0, description="How many requesters.")


class RequestsPage(Reply):
    requests: list[RequestView] = Field(description="The page's requests; grouped, each group's first.")
    count: int = Field(ge=0, description="How many requests match the filter, on every page.")
    next: str | None = Field(description="Pass as 'after' for the next page; null on the last page.")
    groups: list[RequestGroup] | SkipJsonSchema[None] = Field(
        default=None, description="With `group` only: the page's groups."
    )


class Skipped(Reply):
    id: str
    reason: str


class BulkOutcome(Reply):
    dry_run: bool
    matched: int = Field(ge=0, description="How many requests the call named.")
    tools: dict[str, int] = Field(description="How many of those answered or recorded (or that would be) per tool.")
    answered: list[str] = Field(description="Answered (or would be).")
    recorded: list[str] = Field(description="Approvals counted towards a quorum: these stay open for more reviewers.")
    skipped: list[Skipped] = Field(
        description="Not answered, each with why: not yours to answer, or (a yes to any kind but an approval) it "
        "needs its own answer."
    )
    closed: list[str] = Field(description="Already closed.")


# -- bodies ------------------------------------------------------------------------------------------------------

# "Not blank" as the server judges it: intake.NOT_BLANK_PATTERN, not JSON Schema's \S (see its comment).
NOT_BLANK = Field(min_length=1, pattern=intake.NOT_BLANK_PATTERN)


class AgentBody(Body):
    prompt: str = Field(min_length=1, max_length=services.MAX_PROMPT_CHARS)
    model: str | SkipJsonSchema[None] = Field(
        default=None, description="A name in TOOLNEXUS['MODELS'], or `scripted` (the default)."
    )


class NewRun(Body):
    """Either `tool` (one tool call with `args`) or `agent` (an agent loop), not both."""

    # The runner judges every field (runs/services.py: strict, and it names the limit a value breaks).
    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [
                {"required": ["tool"]},
                {"required": ["agent"], "properties": {"args": {"type": "null"}}},  # an agent's model picks args
            ]
        }
    )

    # The document lists the served tools as this field's choices (api.document): they change with the settings.
    tool: Annotated[Any, judged_by_service(str)] = Field(default=None, description="A tool this console serves.")
    args: Annotated[Any, judged_by_service(dict[str, Any] | None)] = None
    agent: Annotated[Any, judged_by_service(AgentBody)] = None
    timeout: Annotated[
        Any, judged_by_service(Annotated[float | None, Field(gt=0, le=services.MAX_RUN_TIMEOUT_SECONDS)])
    ] = Field(
        default=None,
        description=f"Seconds of the run's own time (the tool's and the model's), at most "
        f"{services.MAX_RUN_TIMEOUT_SECONDS // 86400} days; a wait for a person does not count.",
    )
    timeout_counts_waiting: Annotated[Any, judged_by_service(bool | None)] = Field(
        default=None,
        description="`true`: the old wall clock, where the time a request waits for a person counts against "
        "`timeout` and the run's deadline also ends that wait. Left out: human-aware time.",
    )


class NewRequest(Body):
    """toolnexus §10 Request in its wire keys, plus host, tool and args for display. `data` and `args` may nest at most
    10 levels."""

    # review/intake.host_request judges every field (strict, each refusal in its own words).
    model_config = ConfigDict(json_schema_extra={"required": ["id", "kind", "prompt"]})

    id: Annotated[Any, judged_by_service(Annotated[str, Field(pattern=f"^{intake.ID_PATTERN.pattern}$")])] = None
    kind: Annotated[Any, judged_by_service(Annotated[str, NOT_BLANK, Field(max_length=intake.MAX_KIND_CHARS)])] = None
    prompt: Annotated[Any, judged_by_service(Annotated[str, NOT_BLANK, Field(max_length=intake.MAX_PROMPT_CHARS)])] = (
        None
    )
    url: Annotated[Any, judged_by_service(str | None)] = None
    data: Annotated[Any, judged_by_service(dict[str, Any] | None)] = None
    expiresAt: Annotated[  # the §10 wire key
        Any,
        judged_by_service(
            Annotated[
                str | None, Field(max_length=intake.MAX_EXPIRES_AT_CHARS, json_schema_extra={"format": "date-time"})
            ]
        ),
    ] = Field(default=None, description="RFC 3339 date-time with a time zone, e.g. 2030-01-01T12:00:00Z.")
    host: Annotated[Any, judged_by_service(Annotated[str | None, Field(max_length=intake.MAX_LABEL_CHARS)])] = None
    tool: Annotated[Any, judged_by_service(Annotated[str | None, Field(max_length=intake.MAX_LABEL_CHARS)])] = None
    args: Annotated[Any, judged_by_service(dict[str, Any] | None)] = None


class AnswerBody(Body):
    """``data`` and ``reason`` are judged by the one door (review/decisions.py), which answers ``invalid`` with
    ``field_errors`` as for the dashboard's form: their schemas here say what it takes."""

    ok: bool = Field(description="true to approve or answer, false to decline.")
    data: Annotated[Any, WithJsonSchema({"type": ["object", "null"]})] = Field(
        default=None,
        description="Checked against the request's own schema. An approval's carries only `comment` and, under "
        "`args`, the arguments the request marks editable.",
    )
    reason: Annotated[Any, WithJsonSchema({"type": ["string", "null"], "enum": ["declined", "cancelled", None]})] = (
        Field(default=None, description="`expired` is the console's alone, given when a request's deadline passes.")
    )
    # Its type is checked here (strict); its length by the door, in its own words (field_errors.comment).
    comment: Annotated[str | None, judged_by_service(Annotated[str | None, Field(max_length=4000)])] = Field(
        default=None,
        description="Free text a person adds, at most 4000 characters; on a decline the model reads it too (in "
        "quotes), except with `respond`, where the model reads only the reply.",
    )
    response: Annotated[Any, judged_by_service(Literal["respond", "request_changes"] | None)] = Field(
        default=None,
        description="With `ok` false: `respond` sends `message` back instead of running the tool (the model reads "
        "it as the call's result); `request_changes` declines with `message` as the changes to make. Both are "
        'refusals (`reason` `"declined"`), so a host never runs the tool for them.',
    )
    message: Annotated[Any, judged_by_service(Annotated[str | None, Field(max_length=4000)])] = Field(
        default=None, description="Required (not blank) with `response`, at most 4000 characters."
    )
    option: Annotated[Any, judged_by_service(Annotated[str | None, Field(pattern=r"^[a-z0-9_-]{1,40}$")])] = Field(
        default=None,
        description="With a decline or `request_changes`: the key of one of the request's reject options "
        "(`policy.reject_options` in its view); an unknown key is refused (`field_errors.option`).",
    )
    digest: str | None = Field(
        default=None,
        max_length=200,
        description="The `call_digest` of the request view this answer was made on. When the request asks for "
        "another call now (its id was used again after the old one was pruned, say), the answer is refused with "
        "409 `conflict` and nothing is stored. Left out, the answer is not checked against the call "
        "(docs/signing.md).",
    )


class OutcomeBody(Body):
    """A remote host's report of how its tool ended after the approval (review/execution.report_outcome)."""

    ok: bool = Field(description="true: the tool succeeded; false: it failed.")
    message: str | None = Field(
        default=None,
        max_length=execution.EXECUTION_MESSAGE_CHARS,
        description="The tool's output or error, as people should read it.",
    )


class ExtendBody(Body):
    # review/deadlines judges it: `invalid`, with field_errors naming a bad number of minutes.
    minutes: Annotated[
        Any, judged_by_service(Annotated[int | None, Field(ge=1, le=max(1, deadlines.max_minutes()))])
    ] = Field(default=None, description="How many minutes later (default `CONSOLE_EXTEND_STEP_MINUTES`, 60).")


class HandBody(Body):
    # review/claims judges it: `invalid`, with field_errors naming an unknown user or group.
    model_config = ConfigDict(json_schema_extra={"required": ["to"]})

    to: Annotated[Any, judged_by_service(Annotated[str, NOT_BLANK])] = Field(
        default=None, description="A username, or group:<name>."
    )


Flag = Literal[tuple(inbox.FLAG_WORDS)]  # type: ignore[valid-type]  # built from the model's values: pydantic reads it, mypy wants literals
Sort = Literal[(*inbox.SORTS, "")]  # type: ignore[valid-type]  # built from the model's values: pydantic reads it, mypy wants literals


class BulkFilter(Body):
    """The list's filters (and sort): every request they match at the time of the call, at most 500.
    `status` is `open` unless given."""

    model_config = ConfigDict(extra="forbid")

    q: str | None = Field(default=None, max_length=inbox.TEXT_LIMITS["q"])
    status: Literal[(*inbox.STATUS_CHOICES, "")] | None = None  # type: ignore[valid-type]  # built from the model's values: pydantic reads it, mypy wants literals
    kind: (
        Annotated[str, Field(max_length=inbox.MAX_KIND_TEXT)]
        | Annotated[
            list[Annotated[str, Field(max_length=inbox.MAX_KIND_TEXT)]], Field(max_length=inbox.MAX_KIND_VALUES)
        ]
        | None
    ) = None
    tool: str | None = Field(default=None, max_length=inbox.TEXT_LIMITS["tool"])
    host: str | None = Field(default=None, max_length=inbox.TEXT_LIMITS["host"])
    policy: str | None = Field(default=None, max_length=inbox.TEXT_LIMITS["policy"])
    starter: str | None = Field(default=None, max_length=inbox.TEXT_LIMITS["starter"])
    assigned: Literal["me", ""] | None = None
    may_answer: bool | Flag | None = None  # type: ignore[valid-type]  # built from the model's values: pydantic reads it, mypy wants literals
    expiring: bool | Flag | None = None  # type: ignore[valid-type]  # built from the model's values: pydantic reads it, mypy wants literals
    sort: Sort | None = None


class BulkBody(Body):
    """Approve or decline the requests named by `ids`, by `filter`, or by both: those ids, each only while the filter
    still matches it."""

    # inbox/bulk.bulk_ask judges every field, unknown ones included (a misspelt filter must not widen what is
    # answered), and names the one at fault: the declarations here are what the document states.
    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "required": ["ok"],
            "additionalProperties": False,
            "anyOf": [{"required": ["ids"]}, {"required": ["filter"]}],
        },
    )

    ok: Annotated[Any, judged_by_service(bool)] = Field(
        default=None, description="true approves each request as it asked; false declines."
    )
    comment: Annotated[Any, judged_by_service(Annotated[str | None, Field(max_length=4000)])] = Field(
        default=None, description="Sent with every answer; at most 4000 characters."
    )
    ids: Annotated[
        Any,
        judged_by_service(
            Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1, max_length=bulk.MAX_REQUESTS)]
        ),
    ] = Field(
        default=None,
        description="The requests to answer. After a dry run, its `answered` and `recorded`: exactly what it named, "
        "never a request that arrived meanwhile.",
    )
    filter: Annotated[Any, judged_by_service(BulkFilter)] = None
    dry_run: Annotated[Any, judged_by_service(bool)] = Field(
        default=False, description="true: answer nothing, say what would happen."
    )


# -- query strings -----------------------------------------------------------------------------------------------


def _text(schema: dict[str, Any]) -> Any:
    """A query parameter read as text by the service's parser; ``schema`` is what the document says it takes."""
    return WithJsonSchema(schema)


FLAG_SCHEMA = {"type": "string", "enum": list(inbox.FLAG_WORDS)}
MINUTES_EXPIRING = int(inbox.EXPIRING_WITHIN.total_seconds() // 60)


class InboxParams(BaseModel):
    """GET /requests: the inbox's filters (all must hold), order, grouping and page (approvals/inbox/)."""

    q: Annotated[str | None, _text({"type": "string", "maxLength": inbox.TEXT_LIMITS["q"]})] = Field(
        default=None, description="Text in the prompt, tool, args, host or requester's username (any case)."
    )
    status: Annotated[str | None, _text({"type": "string", "enum": [*inbox.STATUS_CHOICES, ""]})] = Field(
        default=None, description="open, resolved, all, or one stored status; every status when left out."
    )
    kind: Annotated[
        list[str] | None,
        _text(
            {
                "type": "array",
                "maxItems": inbox.MAX_KIND_VALUES,
                "items": {"type": "string", "maxLength": inbox.MAX_KIND_TEXT},
            }
        ),
    ] = Field(default=None, description="One or more kinds, repeated or comma-separated.")
    tool: Annotated[str | None, _text({"type": "string", "maxLength": inbox.TEXT_LIMITS["tool"]})] = Field(
        default=None, description="The tool's name, exactly."
    )
    host: Annotated[str | None, _text({"type": "string", "maxLength": inbox.TEXT_LIMITS["host"]})] = Field(
        default=None, description="The remote host's name, exactly."
    )
    policy: Annotated[str | None, _text({"type": "string", "maxLength": inbox.TEXT_LIMITS["policy"]})] = Field(
        default=None, description="The name of the policy that governs the request."
    )
    starter: Annotated[str | None, _text({"type": "string", "maxLength": inbox.TEXT_LIMITS["starter"]})] = Field(
        default=None,
        description="Who set it going: its run's starter, or for a request without a run, who opened it.",
    )
    assigned: Annotated[str | None, _text({"type": "string", "enum": ["me", ""]})] = Field(
        default=None, description="`me`: assigned to the caller (by policy, by the request, or handed over)."
    )
    may_answer: Annotated[str | None, _text(FLAG_SCHEMA)] = Field(
        default=None, description="1: only those the caller may answer now."
    )
    expiring: Annotated[str | None, _text(FLAG_SCHEMA)] = Field(
        default=None, description=f"1: open ones whose deadline is within {MINUTES_EXPIRING} minutes."
    )
    sort: Annotated[str | None, _text({"type": "string", "enum": [*inbox.SORTS, ""]})] = Field(
        default=None, description="oldest (default), newest, or deadline (the nearest first, none last)."
    )
    group: Annotated[str | None, _text({"type": "string", "enum": [*inbox.GROUPS, ""]})] = Field(
        default=None, description="One row per run, or per identical tool and args (`groups`)."
    )
    after: Annotated[
        str | None,
        _text({"type": "string", "minLength": 1, "maxLength": 1000, "pattern": "^[A-Za-z0-9_-]+$"}),
    ] = Field(
        default=None,
        description="The 'next' of the page before (of the same sort and group); leave it out for the first page.",
    )
    limit: Annotated[str | None, _text({"type": "integer", "minimum": 1, "maximum": selectors.API_MAX_PAGE_ROWS})] = (
        Field(default=None, description=f"Requests (or groups) per page (default {selectors.API_PAGE_ROWS}).")
    )


class WaitParams(BaseModel):
    wait: Annotated[
        str | None, _text({"type": "number", "minimum": 0, "maximum": intake.MAX_WAIT_SECONDS, "default": 0})
    ] = Field(default=None, description="How long to hold the call open while the request is open.")


# -- path parameters ---------------------------------------------------------------------------------------------

RunId = Annotated[int, WithJsonSchema({"type": "integer", "minimum": 1, "maximum": 2**63 - 1})]
RequestId = Annotated[
    str,
    WithJsonSchema(
        {
            "type": "string",
            "pattern": f"^{intake.ID_PATTERN.pattern}$",
            "description": "The Request id the host or tool chose.",
        }
    ),
]
