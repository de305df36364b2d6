"""Run services: create, finish, cancel, block, adopt, interrupt, retry. Each writes its audit event.

The status updates themselves are ``models/run_state.py``'s, which a request's door calls too."""

import functools
import json
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from toolnexus.types import JSONSchema

from approvals import events, selectors
from approvals.models import (
    ACTIVE_RUN_STATUSES,
    AuditEvent,
    Request,
    RequestStatus,
    Run,
    RunKind,
    RunStatus,
    TranscriptEntry,
    run_state,
)
from approvals.review import execution, forms
from approvals.review.decisions import DecisionError, resolve_request
from approvals.runs import processes, transcript
from approvals.runs.agent_models import SCRIPTED_MODEL, ModelConfigError, check_model
from approvals.runs.clock import own_seconds_used
from approvals.runs.scripted_model import ScriptError, planned_tools
from approvals.team import policies

logger = logging.getLogger(__name__)

MAX_PROMPT_CHARS = 20_000
# A run's timeout is at most 30 days: long enough to wait out any reviewer's absence, and
# small enough that every clock computing a deadline from it stays exact.
MAX_RUN_TIMEOUT_SECONDS = 30 * 24 * 3600


class RunInputError(ValueError):
    """A run that cannot be started as asked; the message says what to change.

    ``field_errors`` names each argument that does not fit the tool's input schema, as an
    answer's field errors name its fields: argument name (or ``forms.NON_FIELD``) -> messages.
    """

    def __init__(self, message: str, field_errors: dict[str, list[str]] | None = None) -> None:
        super().__init__(message)
        self.field_errors = field_errors or {}


class RunNotFound(LookupError):
    """There is no run with that id."""


def validate_run_input(
    tool: object, args: object, timeout: object, tool_schemas: Mapping[str, JSONSchema | None]
) -> tuple[str, dict[str, Any], float | None]:
    """A tool run's input as the API sent it, checked: (tool, args, timeout), or RunInputError.

    ``tool_schemas`` maps each tool this console serves to its ``input_schema``; the args
    must fit the tool's (:func:`tool_args_errors`), so a run never starts with args its tool
    declared it does not take.
    """
    if not isinstance(tool, str) or not tool:
        raise RunInputError("Choose a tool: 'tool' must be a tool name.")
    if tool not in tool_schemas:
        raise RunInputError(f"Unknown tool {tool!r}. Known tools: {', '.join(sorted(tool_schemas)) or 'none'}.")
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise RunInputError('\'args\' must be a JSON object, e.g. {"service": "web"}.')
    errors = tool_args_errors(tool_schemas[tool], args)
    if errors:
        said = args_errors_in_words(errors)
        raise RunInputError(f"The args do not fit {tool}'s input schema. {said} Fix them and start again.", errors)
    return tool, args, _checked_timeout(timeout)


def tool_args_errors(schema: object, args: dict[str, Any]) -> dict[str, list[str]]:
    """Each argument that does not fit the tool's input ``schema`` (required, type, enum, bounds...), by name;
    empty when they all fit.

    Judged and worded as a reviewer's answer is (``forms.field_errors``: jsonschema, Draft
    2020-12, formats checked). A tool without a schema, or whose schema is not valid JSON
    Schema, is not judged by it: whoever starts the run cannot fix the tool, and the tool
    is left to check its own args.
    """
    if not isinstance(schema, dict) or not _is_json_schema(schema):
        return {}
    return forms.field_errors(schema, args)


def args_errors_in_words(errors: Mapping[str, list[str]]) -> str:
    """``tool_args_errors`` as one sentence per field ("amount: 'lots' is not of type 'number'")."""
    return " ".join(
        " ".join(messages) if name == forms.NON_FIELD else f"{name}: {' '.join(messages)}"
        for name, messages in errors.items()
    )


def _is_json_schema(schema: JSONSchema) -> bool:
    try:
        text = json.dumps(schema, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return _is_json_schema_text(text)


@functools.lru_cache(maxsize=256)
def _is_json_schema_text(text: str) -> bool:
    """Checked once per schema: its metaschema check is the slow part, and a tool's schema does not change."""
    try:
        Draft202012Validator.check_schema(json.loads(text))
    except SchemaError as exc:
        logger.warning("a tool's input schema is not valid JSON Schema (%s); its args are not checked", exc.message)
        return False
    return True


def _checked_timeout(timeout: object) -> float | None:
    """``timeout`` as float seconds in (0, MAX_RUN_TIMEOUT_SECONDS], None when unset, or RunInputError."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise RunInputError("'timeout' must be a number of seconds, or left out.")
    if timeout <= 0:
        raise RunInputError("'timeout' must be more than 0 seconds.")
    if timeout > MAX_RUN_TIMEOUT_SECONDS:  # compared before float(): a 400-digit integer overflows a float
        raise RunInputError(
            f"'timeout' may be at most {MAX_RUN_TIMEOUT_SECONDS} seconds (30 days); leave it out for no limit."
        )
    return float(timeout)


def checked_counts_waiting(value: object) -> bool:
    """``timeout_counts_waiting`` as a bool (False when left out), or RunInputError."""
    if value is None:
        return False
    if not isinstance(value, bool):
        raise RunInputError("'timeout_counts_waiting' must be true or false, or left out.")
    return value


def validate_agent_input(agent: object, timeout: object, known_tools: Collection[str]) -> tuple[str, str, float | None]:
    """``{"prompt", "model"?}`` -> (prompt, model, timeout), or RunInputError saying what to change.

    With the scripted model the prompt is its script, so it is read now: a typo in a
    tool name or in the JSON arguments is refused before the run starts.
    """
    if not isinstance(agent, dict):
        raise RunInputError('\'agent\' must be an object such as {"prompt": "call deploy", "model": "scripted"}.')
    prompt = agent.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise RunInputError("Write a prompt: 'agent.prompt' must be non-empty text.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise RunInputError(f"The prompt is too long: at most {MAX_PROMPT_CHARS} characters.")
    model = agent.get("model", SCRIPTED_MODEL)
    if not isinstance(model, str):
        raise RunInputError("'agent.model' must be a model name such as \"scripted\", or left out.")
    model = model or SCRIPTED_MODEL  # the dashboard's form sends "" for the default
    try:
        check_model(model)
    except ModelConfigError as exc:
        raise RunInputError(str(exc)) from None
    if model == SCRIPTED_MODEL:
        try:
            unknown = [name for name in planned_tools(prompt) if name not in known_tools]
        except ScriptError as exc:
            raise RunInputError(f"The scripted model cannot follow this prompt: {exc}") from None
        if unknown:
            raise RunInputError(
                f"The scripted model would call {', '.join(repr(n) for n in unknown)}, which "
                f"{'is not a tool' if len(unknown) == 1 else 'are not tools'} here. "
                f"Known tools: {', '.join(sorted(known_tools)) or 'none'}."
            )
    return prompt, model, _checked_timeout(timeout)


def create_run(
    *,
    tool: str = "",
    args: dict[str, Any] | None = None,
    timeout: float | None,
    user: User | None,
    owner: str,
    agent_prompt: str = "",
    agent_model: str = "",
    retry_of: int | None = None,
    timeout_counts_waiting: bool = False,
) -> Run:
    """A run starts executing as soon as it is created (its task is spawned with it), so it is born running.

    With ``agent_prompt`` it is an agent run (no tool of its own: the model picks them).
    ``timeout_counts_waiting``: the old wall clock (the wait for a person counts against ``timeout``).
    """
    kind = RunKind.AGENT if agent_prompt else RunKind.TOOL
    args = args or {}
    with transaction.atomic():
        run = Run.objects.create(
            kind=kind,
            status=RunStatus.RUNNING,
            tool=tool,
            args=args,
            timeout=float(timeout) if timeout is not None else None,  # as the column gives it back
            timeout_counts_waiting=timeout_counts_waiting,
            agent_prompt=agent_prompt,
            agent_model=agent_model,
            retry_of_id=retry_of,
            started_by=user if user is not None and user.is_authenticated else None,
            owner=owner,
        )
        payload: dict[str, Any] = {"tool": tool, "args": args, "timeout": timeout}
        if kind == RunKind.AGENT:
            payload = {"agent": {"prompt": agent_prompt, "model": agent_model}, "timeout": timeout}
        if retry_of is not None:
            payload["retry_of"] = retry_of
        if timeout_counts_waiting:
            payload["timeout_counts_waiting"] = True
        events.record(
            AuditEvent.Action.RUN_STARTED,
            actor=events.actor_name(user),
            actor_user=run.started_by,
            run=run,
            payload=payload,
            rows_current=True,  # the run as just created: its frame needs no read-back
        )
    return run


acreate_run = database_sync_to_async(create_run)


def retry_input(run_id: int) -> dict[str, Any]:
    """What "Retry" starts again: the same tool and args, or the same prompt and model (and timeout).

    Only a finished run can be retried; an active one is still doing the work.
    """
    run = Run.objects.filter(pk=run_id).first()
    if run is None:
        raise RunNotFound(f"There is no run with id {run_id}.")
    if run.is_active:
        raise RunInputError(f"Run {run_id} is still {run.status}; only a finished run can be retried.")
    again: dict[str, Any] = {"timeout": run.timeout}
    if run.timeout_counts_waiting:
        again["timeout_counts_waiting"] = True
    if run.kind == RunKind.AGENT:
        return {"agent": {"prompt": run.agent_prompt, "model": run.agent_model}, **again}
    return {"tool": run.tool, "args": run.args, **again}


aretry_input = database_sync_to_async(retry_input)


def _approvals_of_executed(request: Request | None) -> list[str] | None:
    """The approvers the finish frame shows: none under a quorum of one (no approval is stored for it), else
    None (read at the commit)."""
    if request is None:
        return None
    rule = policies.rule_for(request.tool, request.kind)
    return [] if rule.quorum <= 1 else None


def finish_run(
    run_id: int,
    status: str,
    output: str,
    is_error: bool,
    *,
    executed: str | None = None,
    executed_output: str | None = None,
) -> bool:
    """An active run ends with ``status`` and its result. ``executed``: the request whose approved retry gave the
    result (review/execution.py), whose outcome is written in the same transaction and shown in the same event:
    ``executed_output``, the tool's own output (the run's result may go on with words for the model), else
    ``output``."""
    with transaction.atomic():
        run = run_state.finish(run_id, status, output, is_error)
        if run is None:
            return False
        request = (
            execution.finish_execution(executed, not is_error, output if executed_output is None else executed_output)
            if executed
            else None
        )
        if request is not None:
            request.run = run  # the frame's request view names its run's starter, loaded with the run
        events.record(
            AuditEvent.Action.RUN_FINISHED,
            actor=f"tool:{run.tool}" if run.kind == RunKind.TOOL else f"model:{run.agent_model}",
            run=run,
            request=request,
            payload={
                "status": status,
                "output": output,
                "is_error": is_error,
                **({"execution": request.execution_state} if request is not None else {}),
            },
            rows_current=True,  # as the update left it (RETURNING)
            approvals=_approvals_of_executed(request),
        )
    return True


afinish_run = database_sync_to_async(finish_run)


def check_may_cancel(run: Run, user: User | None, *, by_token: bool = False) -> policies.Refusal | None:
    """Why ``user`` may not cancel ``run`` (a policies.Refusal), or None; read fresh, as the one door reads.

    No user is the console itself (a stopping process, a script): it may cancel any run.
    """
    if user is None or not user.is_authenticated:
        return None
    facts = policies.run_facts(run, selectors.open_requests_of(run), fresh=True)
    return policies.cancel_refusal(facts, policies.viewer_of(user), by_token=by_token)


def request_cancel_run(run_id: int, *, user: User | None = None, by_token: bool = False) -> Run:
    """Record that someone pressed "Cancel run"; the owning process trips the token when it hears of it.

    Who may: see ``policies.cancel_refusal`` (``by_token``: the call came with an API
    token). A refused attempt is recorded (``run.cancel_refused``) and raised as "forbidden".
    """
    user = user if user is not None and user.is_authenticated else None
    with transaction.atomic():
        run = Run.objects.select_related("started_by").filter(pk=run_id).first()
        if run is None:
            raise DecisionError("not_found", f"There is no run with id {run_id!r}.")
        refused = check_may_cancel(run, user, by_token=by_token)
        if refused is None:
            changed = Run.objects.filter(pk=run_id, status__in=ACTIVE_RUN_STATUSES, cancel_requested=False).update(
                cancel_requested=True,
                cancel_requested_by=user,
            )
            if not changed:
                run.refresh_from_db()
                if run.cancel_requested and run.is_active:
                    return run
                raise DecisionError(
                    "not_open", f"Run {run_id} has already finished ({run.status}); there is nothing to cancel."
                )
            run.cancel_requested, run.cancel_requested_by = True, user
            events.record(
                AuditEvent.Action.RUN_CANCEL_REQUESTED, actor=events.actor_name(user), actor_user=user, run=run
            )
            return run
        events.record(
            AuditEvent.Action.RUN_CANCEL_REFUSED,
            actor=events.actor_name(user),
            actor_user=user,
            run=run,
            payload={"rule": refused.rule, "reason": refused.message, "by_token": by_token},
        )
    raise DecisionError("forbidden", refused.message)


arequest_cancel_run = database_sync_to_async(request_cancel_run)


def block_on_request(run_id: int, request_id: str, messages: list[dict[str, Any]], **entry: Any) -> bool:
    """An agent loop blocks on a reviewer: the run is waiting, its messages are the resume point.

    The run only turns ``waiting`` while the request is still open (an answer that
    won the race leaves it running), and the saved messages are what another console
    process resumes the loop from after a restart (§10 durability).
    """
    with transaction.atomic():
        still_open = Request.objects.filter(pk=request_id, status=RequestStatus.OPEN).exists()
        Run.objects.filter(pk=run_id).update(agent_messages=messages)
        if still_open:
            run_state.block_on_reviewer(run_id)
            transcript.record(run_id, TranscriptEntry.Kind.WAITING, request_id=request_id, **entry)
    return still_open


ablock_on_request = database_sync_to_async(block_on_request)


def unblock(run_id: int) -> int:
    """The loop has its answer and goes on: waiting -> running (resolve_request may have done it already)."""
    return run_state.resume(run_id)


aunblock = database_sync_to_async(unblock)


@dataclass
class Recovery:
    adopted: list[int] = field(default_factory=list)  # run ids this process now owns and resumes
    interrupted: list[int] = field(default_factory=list)  # run ids marked interrupted
    forgotten: list[str] = field(default_factory=list)  # dead processes whose rows were dropped


def takeover_requests(run: Run) -> list[Request] | None:
    """What a process taking over ``run`` from a dead owner resumes: its §10 suspensions nobody has resumed
    (open, or answered and never acted on), oldest first; None when something was executing, so the run
    cannot be resumed and is interrupted. docs/operations.md, "When a console dies", lists each case.

    Whatever status the door left the run in: an answer moves a waiting run to running before its owner
    resumes it, and an owner that dies in between has run nothing. Past ``claim_resume`` the retry (or
    the rest of an agent's turn) executes, so a suspension some process resumed means work in flight,
    unless an agent's transcript has that call's result.
    """
    requests = list(Request.objects.filter(run=run).order_by("created_at"))
    if any(r.status == RequestStatus.OPEN and not r.resumable for r in requests):
        return None  # asked from inside a call that was executing
    unresumed = [r for r in requests if r.resumable and not r.resumed_by]
    if not unresumed:
        return None  # the first call, the retry, or the model was executing
    if run.kind == RunKind.TOOL:
        return None if any(r.resumable and r.resumed_by for r in requests) else unresumed
    return unresumed if _agent_turn_is_settled(run, unresumed) else None


def _agent_turn_is_settled(run: Run, unresumed: Sequence[Request]) -> bool:
    """Every call of the agent's last turn returned (a result, or a suspension nobody has resumed): the
    loop was only waiting on reviewers, and the halted turn can be rebuilt (agent_runner.resume_halted_turn)."""
    last_turn = TranscriptEntry.objects.filter(run=run, kind=TranscriptEntry.Kind.ASSISTANT).order_by("-seq").first()
    if last_turn is None:
        return False
    this_turn = list(TranscriptEntry.objects.filter(run=run, seq__gt=last_turn.seq))
    if any(e.kind == TranscriptEntry.Kind.THINKING for e in this_turn):
        return False  # the model was asked for its next turn
    waiting_on = {r.pk for r in unresumed}
    settled = {e.call_id for e in this_turn if e.kind == TranscriptEntry.Kind.TOOL_RESULT}
    settled |= {e.call_id for e in this_turn if e.kind == TranscriptEntry.Kind.PENDING and e.request_id in waiting_on}
    calls = (last_turn.data or {}).get("tool_calls") or []
    return bool(calls) and all(call.get("id") in settled for call in calls)


def recover_orphaned_runs(current_owner: str) -> Recovery:
    """Runs a dead console process left active: adopt the ones that were only waiting, interrupt the rest.

    A process is dead when it stopped beating (approvals/runs/processes.py); the runs of
    live processes, this one's and other cluster members', are never touched.

    A run with §10 suspensions nobody has resumed and nothing executing (``takeover_requests``) is
    adopted: this process owns it now and resumes it with the stored answers, or when the open
    suspensions are answered (``claim_resume`` keeps that exactly-once). A run that was executing
    (a tool, its retry, the model, a call that asked from inside) cannot be resumed: it is marked
    interrupted, its open requests are withdrawn, and Retry starts it again.
    """
    recovery = Recovery()
    dead = processes.dead_owners(current_owner)
    for run_id, owner in Run.objects.filter(status__in=ACTIVE_RUN_STATUSES, owner__in=dead).values_list("pk", "owner"):
        with transaction.atomic():
            # Its requests' rows, then its own, in the order the doors take them (an answer, a suspension
            # opening, a resume claim): one under way commits first and what follows reads it; one that
            # comes after finds the run taken over (adopted, or interrupted with its requests withdrawn).
            list(Request.objects.select_for_update().filter(run_id=run_id).order_by("pk").values_list("pk"))
            run = Run.objects.select_for_update().filter(pk=run_id, owner=owner, status__in=ACTIVE_RUN_STATUSES).first()
            if run is None:
                continue  # finished, or taken over by another process, since the first read
            resumable = takeover_requests(run)
            if resumable is None:
                if _interrupt(run):
                    recovery.interrupted.append(run.pk)
            elif _adopt(run, resumable, current_owner):
                recovery.adopted.append(run.pk)
    recovery.forgotten = processes.forget_dead_processes(current_owner)
    return recovery


arecover_orphaned_runs = database_sync_to_async(recover_orphaned_runs)


def released_owner(process_id: str) -> str:
    """The owner a stopping process gives the runs it hands over: no process beats under it, so the next
    live process's heartbeat adopts them (``recover_orphaned_runs``), and ``run.adopted`` says who let go."""
    return f"{process_id}:released"


def release_run(run_id: int, process_id: str) -> bool:
    """Hand a waiting run of ``process_id`` over to whichever live process beats next; True if it was.

    Only a run ``recover_orphaned_runs`` would adopt (§10 suspensions nobody has resumed, nothing
    executing) is released, read under the same locks in the same order; the releasing process must
    stop its own task without touching the database (``Supervisor.relinquish``). An answer that comes
    meanwhile is kept: its resume claim needs the run's owner, which is no longer this process.
    """
    with transaction.atomic():
        list(Request.objects.select_for_update().filter(run_id=run_id).order_by("pk").values_list("pk"))
        run = (
            Run.objects.select_for_update().filter(pk=run_id, owner=process_id, status__in=ACTIVE_RUN_STATUSES).first()
        )
        if run is None or takeover_requests(run) is None:
            return False
        return bool(Run.objects.filter(pk=run_id, owner=process_id).update(owner=released_owner(process_id)))


arelease_run = database_sync_to_async(release_run)


def _adopt(run: Run, resumable: list[Request], current_owner: str) -> bool:
    """Own ``run`` from now on, to resume it on ``resumable`` (its suspensions nobody resumed)."""
    # No resume claimed since the read: an owner taken for dead that woke up to go on keeps the run. Only the
    # suspensions read as unresumed count: an agent's earlier calls were resumed long ago, and are done.
    claimed = Request.objects.filter(pk__in=[r.pk for r in resumable], run_id=OuterRef("pk")).exclude(resumed_by="")
    if not Run.objects.filter(~Exists(claimed), pk=run.pk).update(owner=current_owner):
        return False
    events.record(
        AuditEvent.Action.RUN_ADOPTED,
        actor="system",
        run=run,
        payload={"previous_owner": run.owner, "requests": [r.pk for r in resumable]},
    )
    return True


def _interrupt(run: Run) -> bool:
    """Withdraw ``run``'s open requests and mark it interrupted: something was executing when its owner died."""
    open_requests = Request.objects.filter(run=run, status=RequestStatus.OPEN).values_list("pk", flat=True)
    for request_id in list(open_requests):
        try:
            resolve_request(
                request_id,
                ok=False,
                reason="cancelled",
                actor="system",
                comment="The console stopped while this run was executing; retry the run to ask again.",
            )
        except DecisionError:
            pass
    if not run_state.interrupt(run.pk):
        return False
    events.record(
        AuditEvent.Action.RUN_INTERRUPTED,
        actor="system",
        run=run,
        payload={"previous_owner": run.owner, "previous_status": run.status},
    )
    return True


def resume_point(run_id: int, claimed_by: str | None = None) -> tuple[Run, list[Request]]:
    """What a process adopting a run needs: the run and its resumable requests nobody has resumed (open, or
    answered with the answer stored), oldest first.

    ``claimed_by``: also those whose resume that process claimed. The takeover makes a dead process's runs this
    one's before it adopts them one by one; an answer given here in between claims the resume for this process
    in the answer's own transaction (``run_state.claim_resume_here``), and no task of this process went on
    with it yet: the adoption is the one that does."""
    run = Run.objects.get(pk=run_id)
    unclaimed = Q(resumed_by="") | (Q(resumed_by=claimed_by) if claimed_by else Q())
    requests = list(Request.objects.filter(unclaimed, run_id=run_id, resumable=True).order_by("created_at"))
    return run, requests


aresume_point = database_sync_to_async(resume_point)


def time_used(run: Run) -> float:
    """The seconds of its ``timeout`` a run has used, for a process resuming it after a restart: its wall time
    under the old clock (``timeout_counts_waiting``), else its own time, the wall time less its waits for a
    person (each request's opening to its answer; overlapping waits count once)."""
    now = timezone.now()
    if run.timeout_counts_waiting:
        return max(0.0, (now - run.created_at).total_seconds())
    waits = Request.objects.filter(run_id=run.pk).values_list("created_at", "answered_at")
    return own_seconds_used(run.created_at, now, list(waits))


atime_used = database_sync_to_async(time_used)
