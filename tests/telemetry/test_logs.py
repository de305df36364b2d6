"""The console's log format, its background handler and its line per state change (approvals/telemetry/logs.py)."""

import io
import json
import logging
import threading
from types import SimpleNamespace

import pytest

from approvals.telemetry import logs

PLANTED = "planted-answer-value-5d1e"


def event(action="request.answered", **payload):
    return SimpleNamespace(
        pk=7,
        action=action,
        actor="alice",
        run_id=3,
        request_id="req-9",
        tool="refund",
        kind="approval",
        payload=payload,
    )


def record(message="something happened", *, fields=None, exc_info=None, level=logging.INFO):
    line = logging.LogRecord("approvals.test", level, __file__, 1, message, None, exc_info)
    if fields is not None:
        line.fields = fields
    return line


def raised():
    try:
        raise ZeroDivisionError("division by zero")
    except ZeroDivisionError as exc:
        return (type(exc), exc, exc.__traceback__)


def test_a_json_line_is_one_object_with_the_subject_the_request_id_and_the_exception_as_fields():
    token = logs.request_id.set("abc123")
    try:
        line = logs.JsonFormatter().format(
            record(
                "it failed", fields={"run": 3, "request": "req-9", "channel": "api", "empty": None}, exc_info=raised()
            )
        )
    finally:
        logs.request_id.reset(token)
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed["message"] == "it failed"  # the traceback is a field, not part of the message
    assert (parsed["request_id"], parsed["run"], parsed["request"], parsed["channel"]) == ("abc123", 3, "req-9", "api")
    assert "empty" not in parsed
    assert parsed["exception"].startswith("Traceback") and "ZeroDivisionError" in parsed["exception"]
    assert parsed["level"] == "INFO" and parsed["logger"] == "approvals.test" and parsed["time"].endswith("Z")


def test_a_text_line_reads_as_a_sentence_with_its_fields_and_the_traceback_below():
    text = logs.TextFormatter().format(
        record("request.answered", fields={"run": 3, "actor": "alice bob", "outcome": "approved"}, exc_info=raised())
    )
    first, *rest = text.splitlines()
    assert first.endswith('INFO    approvals.test request.answered run=3 actor="alice bob" outcome=approved')
    assert rest[0].startswith("Traceback") and rest[-1].startswith("ZeroDivisionError")


def test_a_text_message_cannot_start_a_line_of_its_own():
    text = logs.TextFormatter().format(record("Not Found: /x\n2026-12-05T00:00:00.000Z INFO forged\r\nmore"))
    assert text.splitlines()[1:] == ["    2026-12-05T00:00:00.000Z INFO forged", "    more"]


def test_console_log_format_json_picks_json_and_anything_else_text():
    assert type(logs.formatter_for("json")) is logs.JsonFormatter
    assert type(logs.formatter_for(" JSON ")) is logs.JsonFormatter
    assert type(logs.formatter_for(None)) is logs.TextFormatter
    assert type(logs.formatter_for("logfmt")) is logs.TextFormatter


def test_an_answer_line_carries_its_subject_outcome_and_channel_and_nothing_of_the_answer():
    fields = logs.event_fields(
        event(ok=True, reason=None, comment=PLANTED, data={"password": PLANTED}, changes={"amount": PLANTED}, via="web")
    )
    assert fields == {
        "run": 3,
        "request": "req-9",
        "tool": "refund",
        "actor": "alice",
        "outcome": "approved",
        "event": 7,
        "channel": "web",
    }


@pytest.mark.parametrize(
    ("action", "payload", "outcome"),
    [
        ("request.answered", {"ok": True}, "answered"),  # an input request, answered
        ("request.declined", {"ok": False, "reason": "declined"}, "declined"),
        ("request.cancelled", {"ok": False, "reason": "cancelled"}, "cancelled"),
        ("request.expired", {"ok": False, "reason": "expired"}, "expired"),
        ("run.finished", {"status": "failed", "output": PLANTED, "is_error": True}, "failed"),
        ("run.interrupted", {"previous_status": "running"}, "interrupted"),
        ("run.cancel_refused", {"rule": "owner_only"}, "refused"),
        ("request.answer_refused", {"ok": True, "code": "forbidden"}, "refused"),  # asked to approve, refused
        ("run.started", {"tool": "refund", "args": {"note": PLANTED}}, None),
    ],
)
def test_each_state_change_has_its_outcome(action, payload, outcome):
    kind = "input" if payload == {"ok": True} else "approval"
    fields = logs.event_fields(SimpleNamespace(**{**vars(event(action, **payload)), "kind": kind}))
    assert fields["outcome"] == outcome
    assert PLANTED not in json.dumps(fields)


def test_an_action_the_logs_do_not_know_is_logged_with_its_allowed_fields(caplog):
    """The retention helper's audit.archived, or any action added later: a line with the generic fields."""
    caplog.set_level(logging.INFO, logger="approvals.changes")
    archived = event("audit.archived", first=1, last=40, events=40, file="audit-1-40.jsonl.gz", sha256="ab" * 32)
    archived.run_id = archived.request_id = None
    logs.log_event(archived)
    (line,) = [r for r in caplog.records if r.name == "approvals.changes"]
    assert line.getMessage() == "audit.archived"
    assert line.fields["first"] == 1 and line.fields["file"] == "audit-1-40.jsonl.gz" and line.fields["events"] == 40


def test_a_lockout_is_a_warning_naming_what_was_refused(caplog):
    caplog.set_level(logging.INFO, logger="approvals.changes")
    logs.log_event(event("auth.locked_out", locked="address", via="api token", address="10.0.0.7", failures=5))
    (line,) = [r for r in caplog.records if r.name == "approvals.changes"]
    assert line.levelno == logging.WARNING
    assert (line.fields["channel"], line.fields["address"], line.fields["locked"]) == (
        "api token",
        "10.0.0.7",
        "address",
    )


class BlockedStream(io.StringIO):
    """A stream whose writes wait until it is released: stderr piped to a stalled log collector."""

    def __init__(self):
        super().__init__()
        self.released = threading.Event()

    def write(self, text):
        self.released.wait(10)
        return super().write(text)


def test_logging_returns_while_the_stream_is_blocked_and_flush_writes_it_all():
    stream = BlockedStream()
    handler = logs.BackgroundHandler(stream)
    handler.setFormatter(logs.TextFormatter())
    logger = logging.getLogger("approvals.test.background")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        caller = threading.Thread(target=lambda: [logger.warning("line %d", n) for n in range(3)])
        caller.start()
        caller.join(5)
        assert not caller.is_alive(), "a log call waited for the stream"
        assert stream.getvalue() == ""  # nothing written yet: the listener waits on the stream
        stream.released.set()
        assert logs.flush(5)
        assert [line.split()[-2:] for line in stream.getvalue().splitlines()] == [
            ["line", "0"],
            ["line", "1"],
            ["line", "2"],
        ]
    finally:
        stream.released.set()
        logger.removeHandler(handler)
        logger.propagate = True
        handler.close()


def test_a_record_keeps_the_request_id_of_the_thread_that_logged_it():
    stream = io.StringIO()
    handler = logs.BackgroundHandler(stream)
    handler.setFormatter(logs.JsonFormatter())
    logger = logging.getLogger("approvals.test.request_id")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        token = logs.request_id.set("from-the-caller")
        try:
            logger.warning("hello")
        finally:
            logs.request_id.reset(token)
        assert logs.flush(5)
        assert json.loads(stream.getvalue())["request_id"] == "from-the-caller"
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
        handler.close()


def test_the_console_logs_through_one_background_handler_on_the_root_logger():
    """daphne's basicConfig handler, Django's console handler and approvals' own used to write each line twice."""
    root = logging.getLogger()
    assert [type(h) for h in root.handlers if not type(h).__module__.startswith("_pytest")] == [logs.BackgroundHandler]
    assert logging.getLogger("approvals").handlers == []
    assert logging.getLogger("django").handlers == []
