"""The console's log lines: one format for every logger, a correlation id, and a handler off the event loop.

``CONSOLE_LOG_FORMAT=json`` writes one JSON object per line, anything else readable text
(``TextFormatter``); both carry the same fields. ``toolnexus_site/settings.py`` (``LOGGING``) puts
``BackgroundHandler`` on the root logger, so daphne's, Django's and the console's loggers write alike
and once. docs/operations.md, "Logs", is the operator's account of them.

A record's structured fields travel in ``extra={"fields": {...}}``; the HTTP or socket request it was
written under is named by ``request_id`` (a context variable the access log sets, approvals/telemetry/access.py).

What a committed audit event says goes through ``log_event`` (an observer handed to ``events`` by
``ApprovalsConfig.ready``): one line per state change, after its commit, with only the payload's keys
named in ``EVENT_FIELDS``. Never a password, a token, a secret or an answer's data: those keys are
not in it, and no other part of a payload is read.
"""

import contextvars
import copy
import datetime
import json
import logging
import logging.handlers
import queue
import re
import secrets
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from typing import IO, Any, Protocol

# The HTTP request or socket a line was written under: its X-Request-ID (from a trusted proxy) or one made here.
request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)

changes = logging.getLogger("approvals.changes")

# The order of the fields that name what a line is about, in both formats.
SUBJECT = ("run", "request", "tool", "actor", "outcome", "channel")


def new_request_id() -> str:
    """A fresh correlation id: 16 hex digits, enough to tell a day's requests apart."""
    return secrets.token_hex(8)


# -- formats ---------------------------------------------------------------------------------------


def _fields_of(record: logging.LogRecord, *, told: Iterable[str] = ()) -> dict[str, Any]:
    """The record's structured fields in a stable order (the subject first), without empty ones nor ``told``."""
    given: Mapping[str, Any] = getattr(record, "fields", None) or {}
    ordered = {name: given[name] for name in SUBJECT if name in given}
    ordered.update((name, value) for name, value in given.items() if name not in ordered)
    return {name: value for name, value in ordered.items() if value is not None and value != "" and name not in told}


def _exception_of(record: logging.LogRecord, formatter: logging.Formatter) -> str | None:
    if record.exc_info and not record.exc_text:
        record.exc_text = formatter.formatException(record.exc_info)
    return record.exc_text or None


def _time_of(record: logging.LogRecord) -> str:
    """UTC, to the millisecond, as logging itself stamps records (``moments`` sits above this layer)."""
    moment = datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC).replace(tzinfo=None)
    return moment.isoformat(timespec="milliseconds") + "Z"


def _request_id_of(record: logging.LogRecord) -> str | None:
    return getattr(record, "request_id", None) or request_id.get()


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request_id, the fields, exception."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": _time_of(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        correlation = _request_id_of(record)
        if correlation:
            line["request_id"] = correlation
        line.update(_fields_of(record))
        exception = _exception_of(record, self)
        if exception:
            line["exception"] = exception
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, default=str)


CONTINUED = re.compile(r"\r\n|\r|\n")


def _text_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return json.dumps(text, ensure_ascii=False) if not text or any(c in text for c in ' "=\n') else text


class TextFormatter(logging.Formatter):
    """Readable: ``time LEVEL logger [request id] message key=value ...``, a traceback on the lines below.

    Fields the message already says (a record's ``told``, as the access log's method, path and status) are not
    repeated after it; the JSON format keeps them as fields.
    """

    def format(self, record: logging.LogRecord) -> str:
        correlation = _request_id_of(record)
        parts = [_time_of(record), f"{record.levelname:<7}", record.name]
        if correlation:
            parts.append(f"[{correlation}]")
        # A message's later lines (a path or a name someone typed may hold a newline) are indented: only a
        # record starts a line with a time.
        parts.append(CONTINUED.sub("\n    ", record.getMessage()))
        told = getattr(record, "told", ())
        parts.extend(f"{name}={_text_value(value)}" for name, value in _fields_of(record, told=told).items())
        text = " ".join(parts)
        exception = _exception_of(record, self)
        if exception:
            text = f"{text}\n{exception}"
        if record.stack_info:
            text = f"{text}\n{self.formatStack(record.stack_info)}"
        return text


def formatter_for(name: str | None) -> logging.Formatter:
    """The formatter ``CONSOLE_LOG_FORMAT`` names: JSON for "json", readable text otherwise (``LOGGING``'s factory)."""
    return JsonFormatter() if (name or "").strip().lower() == "json" else TextFormatter()


# -- the handler -----------------------------------------------------------------------------------

_listeners: list[logging.handlers.QueueListener] = []
_listeners_lock = threading.Lock()


class BackgroundHandler(logging.handlers.QueueHandler):
    """Queue each record and write it from a thread of its own, so a slow stderr never blocks the event loop.

    The record is prepared on the caller's thread (its message, its exception as text, its request
    id read there, where the context variable is set); a ``QueueListener`` started with the handler
    writes it to ``stream`` (stderr) with this handler's formatter. The root logger has one, so a
    process has one listener thread. ``close`` (``logging.shutdown`` at exit, or the logging configured
    again) writes what is queued and stops the thread; ``flush`` waits for the queue to drain.
    """

    def __init__(self, stream: IO[str] | None = None) -> None:
        super().__init__(queue.Queue())
        self.target = logging.StreamHandler(stream or sys.stderr)
        self.listener = logging.handlers.QueueListener(self.queue, self.target)
        self.listener.start()
        with _listeners_lock:
            _listeners.append(self.listener)

    def setFormatter(self, fmt: logging.Formatter | None) -> None:  # noqa: N802  (logging's name)
        super().setFormatter(fmt)
        self.target.setFormatter(fmt)

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        prepared = copy.copy(record)
        prepared.message = record.getMessage()
        prepared.msg, prepared.args = prepared.message, None
        if record.exc_info and not record.exc_text:
            prepared.exc_text = (self.formatter or logging.Formatter()).formatException(record.exc_info)
        prepared.exc_info = None
        if getattr(record, "request_id", None) is None:
            prepared.request_id = request_id.get()
        return prepared

    def flush(self) -> None:
        """Wait until every queued record is written (at most two seconds)."""
        flush(2.0)

    def close(self) -> None:
        with _listeners_lock:
            if self.listener in _listeners:
                _listeners.remove(self.listener)
                self.listener.stop()  # writes what is queued, then the thread ends
        super().close()


def flush(timeout: float = 2.0) -> bool:
    """Wait up to ``timeout`` seconds for the queued log records to be written; True when they all were."""
    deadline = time.monotonic() + timeout
    for listener in list(_listeners):
        waiting: Any = listener.queue
        with waiting.all_tasks_done:
            while waiting.unfinished_tasks:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                waiting.all_tasks_done.wait(left)
    return True


# -- state changes ---------------------------------------------------------------------------------


class CommittedEvent(Protocol):
    """What ``log_event`` reads of an audit event (``approvals.models.AuditEvent``)."""

    pk: Any
    action: str
    actor: str
    run_id: int | None
    request_id: str | None
    tool: str
    kind: str
    payload: Any


# The payload keys a line may carry, under the name it gives them. Nothing else of a payload is read: an
# answer's data, a run's args and output, comments and prompts stay in the audit trail.
EVENT_FIELDS = {
    "via": "channel",
    "reason": "reason",
    "is_error": "is_error",
    "rule": "rule",
    "policy": "policy",
    "quorum": "quorum",
    "locked": "locked",
    "username": "account",
    "address": "address",
    "failures": "failures",
    "until": "until",
    "previous_owner": "previous_owner",
    "previous_status": "previous_status",
    "retry_of": "retry_of",
    "first": "first",
    "last": "last",
    "events": "events",
    "file": "file",
    "sha256": "sha256",
    "checkpoint": "checkpoint",
}
# Refusals and lockouts are what on-call looks for; each transcript entry is detail under a run.
EVENT_LEVELS = {
    "run.transcript": logging.DEBUG,
    "run.cancel_refused": logging.WARNING,
    "request.answer_refused": logging.WARNING,
    "request.credentials_refused": logging.WARNING,
    "auth.locked_out": logging.WARNING,
}


def _outcome(event: CommittedEvent, payload: Mapping[str, Any]) -> str | None:
    if event.action.endswith("_refused"):  # a refused answer carries the "ok" it asked for: it decided nothing
        return "refused"
    if event.action.startswith("request.") and "ok" in payload:
        if payload["ok"]:
            return "approved" if event.kind == "approval" else "answered"
        return str(payload.get("reason") or "declined")
    if event.action == "run.finished":
        return str(payload.get("status") or "") or None
    if event.action == "run.interrupted":
        return "interrupted"
    return None


def event_fields(event: CommittedEvent) -> dict[str, Any]:
    """The fields of an event's line: its subject, outcome, channel and the allowed payload keys."""
    payload: Mapping[str, Any] = event.payload if isinstance(event.payload, Mapping) else {}
    fields: dict[str, Any] = {
        "run": event.run_id,
        "request": event.request_id,
        "tool": event.tool or None,
        "actor": event.actor,
        "outcome": _outcome(event, payload),
        "event": event.pk,
    }
    for key, name in EVENT_FIELDS.items():
        value = payload.get(key)
        if value is not None and name not in fields and isinstance(value, str | int | float | bool):
            fields[name] = value
    if event.action == "auth.locked_out":  # its "via" is what was refused (login, API or socket token)
        fields["channel"] = payload.get("via")
    return fields


def log_event(event: CommittedEvent) -> None:
    """One line for a committed audit event (``events.Publishing.observers``): the action, then its fields."""
    level = EVENT_LEVELS.get(event.action, logging.INFO)
    if changes.isEnabledFor(level):
        changes.log(level, event.action, extra={"fields": event_fields(event)})
