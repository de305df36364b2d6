"""What a remote host may send as a §10 Request, checked before anything is stored.

The limits keep one host from filling the dashboard or the database: a long
prompt is unreadable, a deeply nested ``data`` is unrenderable, and an id is used
in URLs, so it is kept to URL-safe characters.
"""

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeGuard

from toolnexus import Request

from approvals.models.team import reject_options_refusal

MAX_ID_CHARS = 200
MAX_KIND_CHARS = 100
MAX_PROMPT_CHARS = 4000
MAX_LABEL_CHARS = 200  # host and tool
MAX_EXPIRES_AT_CHARS = 64  # Request.expires_at_wire keeps expiresAt as sent
MAX_DATA_DEPTH = 10  # an object is depth 1, an object inside it depth 2, ...
MAX_WAIT_SECONDS = 60  # a long-poll holds at most this long; proxies commonly cut idle calls soon after
ID_PATTERN = re.compile(r"[A-Za-z0-9._:-]{1,%d}" % MAX_ID_CHARS)
# "Not blank" as the server judges it (``str.strip``), spelled out for the OpenAPI document: a
# schema's ``\S`` is ECMA-262's, which counts U+001C-U+001F and U+0085 as text, and Python does not.
NOT_BLANK_PATTERN = r"[^\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


class IntakeError(ValueError):
    """A request a host sent that cannot be opened; the message says what to change."""


@dataclass
class HostRequest:
    wire: Request
    host: str
    tool: str
    args: dict[str, Any]


def depth_of(value: object) -> int:
    """How deeply JSON containers nest in ``value`` (a scalar is 0, ``{}`` and ``[]`` are 1)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in children)
    return deepest


def is_valid_request_id(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and ID_PATTERN.fullmatch(value) is not None


def _optional_text(body: dict[str, Any], key: str, limit: int) -> str:
    value = body.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise IntakeError(f"'{key}' must be a string, or left out.")
    if len(value) > limit:
        raise IntakeError(f"'{key}' is {len(value)} characters long; at most {limit} are allowed.")
    return value


def _json_object(body: dict[str, Any], key: str, *, meaning: str = "a JSON object") -> dict[str, Any] | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise IntakeError(f"'{key}' must be {meaning}, or left out.")
    depth = depth_of(value)
    if depth > MAX_DATA_DEPTH:
        raise IntakeError(f"'{key}' nests {depth} levels deep; at most {MAX_DATA_DEPTH} are allowed.")
    return value


def parse_expires_at(value: Any) -> datetime:
    """An RFC 3339 date-time with an offset (``2030-01-01T12:00:00Z``) as an aware datetime in UTC, or IntakeError.

    The one parser of ``expiresAt``, for a host's request and a tool's alike. A moment that
    UTC cannot hold (``9999-12-31T23:59:59-23:59`` is in the year 10000) is refused too.
    """
    problem = f"'expiresAt' must be an RFC 3339 date-time with a time zone, e.g. 2030-01-01T12:00:00Z; got {value!r}."
    match = RFC3339.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise IntakeError(problem)
    if len(value) > MAX_EXPIRES_AT_CHARS:  # RFC 3339 allows any number of fractional digits
        raise IntakeError(f"'expiresAt' is {len(value)} characters long; at most {MAX_EXPIRES_AT_CHARS} are allowed.")
    text = value.upper()
    if text[17:19] == "60":  # a leap second: RFC 3339 allows it, Python's datetime does not
        text = text[:17] + "59" + text[19:]
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise IntakeError(problem) from None
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise IntakeError(
            f"'expiresAt' {value!r} is outside the years 0001 to 9999 once converted to UTC; send a nearer date-time."
        ) from None


def wait_seconds(text: str | None) -> float:
    """A long-poll's ``wait`` query parameter as seconds (0 when absent), or IntakeError saying what is allowed."""
    if text is None:
        return 0.0
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds <= MAX_WAIT_SECONDS:  # also refuses nan
        raise IntakeError(f"'wait' must be a number of seconds from 0 to {MAX_WAIT_SECONDS}; got {text!r}.")
    return seconds


def host_request(body: dict[str, Any]) -> HostRequest:
    """Check a POST /api/v1/requests body; returns a HostRequest or raises IntakeError."""
    request_id = body.get("id")
    if not is_valid_request_id(request_id):
        raise IntakeError(
            f"'id' must be 1–{MAX_ID_CHARS} characters of letters, digits and . _ : - (it is used in URLs); "
            f"got {request_id!r}."
        )
    kind = body.get("kind")
    if not isinstance(kind, str) or not kind.strip():
        raise IntakeError('\'kind\' is required: a non-empty string such as "approval", "input" or "authorization".')
    if len(kind) > MAX_KIND_CHARS:
        raise IntakeError(f"'kind' is {len(kind)} characters long; at most {MAX_KIND_CHARS} are allowed.")
    prompt = body.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise IntakeError("'prompt' is required: the question the reviewer sees, as a non-empty string.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise IntakeError(f"'prompt' is {len(prompt)} characters long; at most {MAX_PROMPT_CHARS} are allowed.")
    url = body.get("url")
    if url is not None and not isinstance(url, str):
        raise IntakeError("'url' must be a string, or left out.")
    data = _json_object(body, "data")
    refused = reject_options_problem(data)
    if refused:
        raise IntakeError(refused)
    expires_at = body.get("expiresAt")
    if expires_at is not None:
        parse_expires_at(expires_at)
    args = _json_object(body, "args", meaning="a JSON object of the tool's arguments") or {}
    return HostRequest(
        wire=Request(id=request_id, kind=kind, prompt=prompt, url=url, data=data, expiresAt=expires_at),
        host=_optional_text(body, "host", MAX_LABEL_CHARS),
        tool=_optional_text(body, "tool", MAX_LABEL_CHARS),
        args=args,
    )


def reject_options_problem(data: object) -> str | None:
    """What is wrong with a request's ``data.reject_options`` (the reasons a reviewer may pick when declining),
    or None when it has none or they are well formed; checked whenever a request is opened."""
    if not isinstance(data, dict) or "reject_options" not in data:
        return None
    refused = reject_options_refusal(data["reject_options"])
    return f"data.{refused}" if refused else None


# -- JSON from outside -----------------------------------------------------------------


def _not_a_json_number(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is not a finite number")
    return number


class NotJson(ValueError):
    """Text the console will not decode as JSON; the message says what is wrong with it."""


def _unstorable_text(value: object) -> str | None:
    """Why a decoded JSON value cannot be stored as text, naming the string, or None when it can.

    JSON's ``\\ud800`` escape decodes to a lone surrogate, which has no UTF-8 encoding
    (neither the database nor a browser can hold it); ``\\u0000`` decodes to NUL, which
    PostgreSQL's text and jsonb columns refuse.
    """
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return f"the string {item[:40]!r} holds the NUL character (\\u0000), which the database cannot store"
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return (
                    f"the string {item[:40]!r} holds a lone surrogate (a \\uD800-\\uDFFF escape without its pair), "
                    "which is not text UTF-8 can encode; send valid Unicode"
                )
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def parse_json(text: str | bytes) -> Any:
    """Decode JSON text (str, or UTF-8 bytes) from outside: the API's bodies and the sockets' frames.

    Refuses with NotJson what is not JSON or could not be stored: malformed text, NaN,
    Infinity and numbers that overflow a float, nesting too deep to decode, and strings
    with a lone surrogate (no UTF-8 encoding exists for them) or a NUL character.
    """
    try:
        value = json.loads(text, parse_constant=_not_a_json_number, parse_float=_not_a_json_number)
    except RecursionError:
        raise NotJson("it nests too deeply to decode") from None
    except ValueError as exc:  # JSONDecodeError, a non-finite number, an integer of more than 4300 digits
        raise NotJson(str(exc)) from None
    problem = _unstorable_text(value)
    if problem is not None:
        raise NotJson(problem)
    return value
