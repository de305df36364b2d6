"""Form -> JSON: the browser's raw form values (strings, booleans, choice keys) converted to typed
JSON for the request's schema (``values_from_form``), then judged with it (``answer_errors``)."""

import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from toolnexus.types import JSONSchema

from approvals.review.forms.errors import checked_field_errors, in_form_order
from approvals.review.forms.schema import Unrenderable, analyse
from approvals.review.forms.values import NON_FIELD, NOT_A_NUMBER, NOT_A_WHOLE_NUMBER, REQUIRED, FieldErrors

_NUMBER_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_INT_RE = re.compile(r"[+-]?\d+", re.ASCII)
_KEY_RE = re.compile(r"0|[1-9]\d*", re.ASCII)
_MAX_NUMBER_TEXT = 100  # longer number text is refused rather than parsed


class _Invalid(Exception):
    """A raw form value that cannot be converted; its message is the field error."""


_EMPTY = object()  # an empty form value: omitted, or "This field is required."


def values_from_form(schema: JSONSchema, raw: object) -> tuple[dict[str, Any], FieldErrors]:
    """Convert the browser's raw form values into typed JSON for ``schema``.

    Returns ``(data, errors)``. Empty values ("" / None / [] / a missing key) are left
    out of ``data``, or are "This field is required." for a required field, because a
    browser cannot tell "empty" from "not given". Keys that are not fields are ignored.
    Defaults are not filled in here: the form was pre-filled with them.
    """
    try:
        specs = analyse(schema)
    except Unrenderable as exc:
        return {}, {NON_FIELD: [str(exc)]}
    if not isinstance(raw, dict):
        return {}, {NON_FIELD: ["The form values must be a JSON object of field values."]}
    data: dict[str, Any] = {}
    errors: FieldErrors = {}
    for spec in specs:
        field = spec["field"]
        name = field["name"]
        try:
            value = _convert(spec, raw.get(name))
        except _Invalid as exc:
            errors[name] = [str(exc)]
            continue
        if value is _EMPTY:
            if field["required"]:
                errors[name] = [REQUIRED]
            continue
        data[name] = value
    return data, errors


def _convert(spec: dict[str, Any], raw: Any) -> Any:
    widget = spec["field"]["widget"]
    if raw is None:
        return _EMPTY
    if widget in ("text", "email", "url", "date", "datetime"):
        if not isinstance(raw, str):
            raise _Invalid("Enter text.")
        return raw if raw != "" else _EMPTY
    if widget == "number":
        return _to_number(raw)
    if widget == "integer":
        return _to_integer(raw)
    if widget == "checkbox":
        if not isinstance(raw, bool):
            raise _Invalid("Tick or untick the box.")
        return raw
    if widget == "select":
        if raw == "":
            return _EMPTY
        return spec["values"][_index(spec, raw)]
    if widget == "multiselect":
        if not isinstance(raw, list):
            raise _Invalid(_choose_one_of(spec["field"]["choices"]))
        if not raw:
            return _EMPTY
        return [spec["values"][_index(spec, key)] for key in raw]
    raise _Invalid("This field cannot be filled in.")  # pragma: no cover - every widget is handled above


def _index(spec: dict[str, Any], key: object) -> int:
    choices = spec["field"]["choices"]
    if isinstance(key, str) and _KEY_RE.fullmatch(key) and int(key) < len(choices):
        return int(key)
    raise _Invalid(_choose_one_of(choices))


def _choose_one_of(choices: list[dict[str, Any]]) -> str:
    return "Choose one of: " + ", ".join(c["label"] for c in choices) + "."


def _number_text(raw: object, message: str) -> Any:
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        raise _Invalid(message)
    if not isinstance(raw, str):
        if isinstance(raw, float) and not math.isfinite(raw):
            raise _Invalid(message)
        return raw
    text = raw.strip()
    if text == "":
        return _EMPTY
    if len(text) > _MAX_NUMBER_TEXT or not _NUMBER_RE.fullmatch(text):
        raise _Invalid(message)
    return text


def _to_number(raw: object) -> Any:
    """Float, but an integer text stays an int so 3 round-trips as 3, not 3.0."""
    text = _number_text(raw, NOT_A_NUMBER)
    if text is _EMPTY or not isinstance(text, str):
        return text
    if _INT_RE.fullmatch(text):
        return int(text)
    value = float(text)
    if not math.isfinite(value):
        raise _Invalid(NOT_A_NUMBER)
    return value


def _to_integer(raw: object) -> Any:
    """An int. "3", "3.0" and "3e2" are whole numbers and accepted; "3.5" is not."""
    text = _number_text(raw, NOT_A_WHOLE_NUMBER)
    if text is _EMPTY:
        return text
    if not isinstance(text, str):
        if float(text).is_integer():
            return int(text)
        raise _Invalid(NOT_A_WHOLE_NUMBER)
    try:
        number = Decimal(text)
    except InvalidOperation:  # pragma: no cover - the pattern above already refused it
        raise _Invalid(NOT_A_WHOLE_NUMBER) from None
    if number.adjusted() > _MAX_NUMBER_TEXT or number != number.to_integral_value():
        raise _Invalid(NOT_A_WHOLE_NUMBER)
    return int(number)


def answer_errors(schema: JSONSchema, raw: object) -> tuple[dict[str, Any], FieldErrors]:
    """Convert raw form values and validate them: ``(data, errors)``, one dict of errors.

    A field whose raw value could not be converted keeps only that message (the
    schema's own complaint about the missing value would only repeat it).
    """
    data, errors = values_from_form(schema, raw)
    if NON_FIELD in errors:
        return data, errors
    for name, messages in checked_field_errors(schema, data).items():  # analyse checked the schema
        if name not in errors:
            errors[name] = messages
    return data, in_form_order(schema, errors)
