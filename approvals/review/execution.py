"""The record from an approval to its tool's outcome (issue 36): ``Request.execution_state``, at most once.

An ok answer lets its tool run again once. Before it does, the console marks the request ``executing`` with a
conditional update from null: whichever process, channel or resumer gets there first runs the tool, and a call
that finds the mark taken does not run it (``not_run_again``). After the tool returns, its outcome is recorded
(``succeeded`` unless the result is an error, its output cut to EXECUTION_MESSAGE_CHARS). A tool run's mark is
taken with its resume claim, in the claim's own UPDATE (models/run_state.py, runs/processes.claim_resume) and its outcome
written in its finishing transaction (runs/services.finish_run), so its answer path pays one statement for
this; an agent run's calls use ``mark_executing`` and ``record_outcome``. A request a remote host opened has
no run: it reads "unreported" until the host reports (``report_outcome``, ``POST .../outcome``).

A process that dies while a request is ``executing`` leaves it so: nobody knows whether the tool ran, and no
takeover runs it again (runs/services.takeover_requests interrupts such a run).
"""

from datetime import datetime
from typing import Any, TypedDict

from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from approvals import events
from approvals.hotpath.returning import update_returning
from approvals.models import AuditEvent, ExecutionState, Request, RequestStatus
from approvals.moments import iso_time
from approvals.review.decisions import DecisionError
from approvals.selectors import REQUEST_USERS

# A tool's output is kept this long on its request; the run's own result keeps all of it.
EXECUTION_MESSAGE_CHARS = 2000
# The view's state for a host request approved and not reported (no column: it is what a null means there).
UNREPORTED = "unreported"


class ExecutionView(TypedDict):
    """The request view's ``execution`` key (docs/api.md)."""

    state: str  # executing | succeeded | failed | unreported
    outcome: str | None  # succeeded | failed, once known
    message: str
    at: str | None


def execution_view(request: Request) -> ExecutionView | None:
    """What became of ``request``'s tool after its ok answer; None when it was not approved (or answered)."""
    if request.status != RequestStatus.ANSWERED or not request.answer_ok:
        return None
    state = request.execution_state
    if state is None:
        if request.run_id is not None or request.opened_by_id is None:
            # A run's: the run has not got to it yet (or was stopped before it did). The console's own (asked
            # from inside a call outside any run): nobody reports it. Only a host's request awaits its report.
            return None
        return {"state": UNREPORTED, "outcome": None, "message": "", "at": None}
    done = state in (ExecutionState.SUCCEEDED, ExecutionState.FAILED)
    return {
        "state": state,
        "outcome": state if done else None,
        "message": request.execution_message,
        "at": iso_time(request.execution_at),
    }


def outcome_columns(ok: bool, message: str, at: datetime | None = None) -> dict[str, Any]:
    """The columns an outcome writes: its state, the message cut to EXECUTION_MESSAGE_CHARS, when."""
    return {
        "execution_state": ExecutionState.SUCCEEDED if ok else ExecutionState.FAILED,
        "execution_message": message[:EXECUTION_MESSAGE_CHARS],
        "execution_at": at or timezone.now(),
    }


# How much of the tool's message a card or a list line shows (the request's page shows it whole).
SHOWN_MESSAGE_CHARS = 160


def execution_text(view: ExecutionView | None, *, with_message: bool = True) -> str:
    """The execution in words, as console/verdict.js ``executionText`` says it: "Executing…", "Succeeded: paid 12",
    "Failed: card declined", "Approved, not yet reported"; "" for none. ``with_message``: the tool's message
    after the state, shortened (a page that shows it whole leaves it out)."""
    if not view:
        return ""
    said = f": {_shortened(view['message'])}" if view["message"] and with_message else ""
    return {
        ExecutionState.EXECUTING: "Executing…",
        ExecutionState.SUCCEEDED: f"Succeeded{said}",
        ExecutionState.FAILED: f"Failed{said}",
        UNREPORTED: "Approved, not yet reported",
    }.get(view["state"], "")


def _shortened(text: str, most: int = SHOWN_MESSAGE_CHARS) -> str:
    """Cut at a word when one ends near the limit, as verdict.js ``shortened`` does."""
    flat = " ".join(text.split())
    if len(flat) <= most:
        return flat
    cut = flat[: most - 1]
    space = cut.rfind(" ")
    if space > most * 0.6:
        cut = cut[:space]
    return cut.rstrip() + "…"


def outcome_payload(columns: dict[str, Any]) -> dict[str, Any]:
    """What an outcome's audit event keeps: ``{"outcome": "succeeded" | "failed", "message": ...}``."""
    return {"outcome": columns["execution_state"], "message": columns["execution_message"]}


def finish_execution(request_id: str, ok: bool, message: str) -> Request | None:
    """A tool run's outcome, written in the run's finishing transaction (runs/services.finish_run): the request
    as the update left it (its users loaded, for the run's ``run.finished`` frame), or None when it was not
    executing. One statement (hotpath/returning.py)."""
    return update_returning(
        Request,
        request_id,
        outcome_columns(ok, message),
        only_if=("execution_state", (ExecutionState.EXECUTING,)),
        related=_FRAME_USERS,
    )


def not_run_again(state: str | None) -> str:
    """The result of a call that found its approval already executed: the tool was not run for it."""
    return f"not run again: this approval was already executed ({state or 'executing'})"


# The request's users, loaded with the row an update hands back: its frame names them without a read.
_FRAME_USERS = {"answered_by": ("username",), "opened_by": ("username",), "claimed_by": ("username",)}


def mark_executing(request_id: str, *, actor: str = "system") -> bool:
    """Take the one execution of ``request_id``'s ok answer: True when this call took it (null -> executing),
    False when someone already had (or it is not an ok answer). Dashboards hear of it (``request.executing``)."""
    with transaction.atomic():
        taken = Request.objects.filter(
            pk=request_id, status=RequestStatus.ANSWERED, answer_ok=True, execution_state__isnull=True
        ).update(execution_state=ExecutionState.EXECUTING, execution_at=timezone.now())
        if not taken:
            return False
        request = Request.objects.select_related(*REQUEST_USERS).get(pk=request_id)
        events.record(
            AuditEvent.Action.REQUEST_EXECUTING, actor=actor, run=request.run, request=request, rows_current=True
        )
    return True


amark_executing = database_sync_to_async(mark_executing)


def execution_state_of(request_id: str) -> str | None:
    """The request's execution state as stored now (None: not marked, or no such request)."""
    return Request.objects.filter(pk=request_id).values_list("execution_state", flat=True).first()


aexecution_state_of = database_sync_to_async(execution_state_of)


def record_outcome(request_id: str, ok: bool, message: str, *, actor: str = "system") -> bool:
    """How the tool that ``mark_executing`` let run ended: executing -> succeeded | failed; False when the request
    was not executing (its outcome is recorded already). Dashboards hear of it (``request.executed``)."""
    columns = outcome_columns(ok, message)
    with transaction.atomic():
        request = update_returning(
            Request, request_id, columns, only_if=("execution_state", (ExecutionState.EXECUTING,)), related=_FRAME_USERS
        )
        if request is None:
            return False
        events.record(
            AuditEvent.Action.REQUEST_EXECUTED,
            actor=actor,
            run=_run_of(request),
            request=request,
            payload=outcome_payload(columns),
            rows_current=True,
        )
    return True


arecord_outcome = database_sync_to_async(record_outcome)


def _run_of(request: Request) -> Any:
    return request.run if request.run_id is not None else None


def report_outcome(request_id: str, *, user: User, ok: bool, message: str) -> tuple[Request, bool]:
    """A remote host says how its tool ended after the approval of ``request_id``: (the request, whether this
    report was recorded now). The first report wins; the same report again changes nothing.

    Raises DecisionError: ``not_found``; ``forbidden`` unless ``user`` opened it (the token's user); ``not_open``
    (409) for a request not approved (or answered), one a console run executes itself, or one already reported
    otherwise."""
    with transaction.atomic():
        request = Request.objects.select_for_update().filter(pk=request_id).first()
        if request is None:
            raise DecisionError("not_found", f"There is no request with id {request_id!r}.")
        if request.opened_by_id != user.pk:
            raise DecisionError("forbidden", "Only the token that opened a request may report its outcome.")
        if request.run_id is not None:
            raise DecisionError("not_open", "This request belongs to a console run: the console records its outcome.")
        if request.status != RequestStatus.ANSWERED or not request.answer_ok:
            raise DecisionError(
                "not_open", f"Request {request_id} was not approved ({request.status}): there is no outcome to report."
            )
        columns = outcome_columns(ok, message)
        if request.execution_state is not None:
            if (request.execution_state, request.execution_message) == (
                columns["execution_state"],
                columns["execution_message"],
            ):
                return request, False  # the same report again: already recorded
            raise DecisionError(
                "not_open",
                f"Request {request_id} was already reported {request.execution_state}; the first report stands.",
            )
        Request.objects.filter(pk=request_id, execution_state__isnull=True).update(
            execution_state=columns["execution_state"],
            execution_message=columns["execution_message"],
            execution_at=columns["execution_at"],
        )
        for name, value in columns.items():
            setattr(request, name, value)
        events.record(
            AuditEvent.Action.REQUEST_EXECUTED,
            actor=events.actor_name(user),
            actor_user=user,
            request=request,
            payload={**outcome_payload(columns), "via": "api"},
        )
    return request, True


areport_outcome = database_sync_to_async(report_outcome)
