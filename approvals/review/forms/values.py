"""What the form's parts share: the schema an ``input`` request carries, the words for a missing or
mistyped value, and JSON values as a reviewer reads them."""

from typing import Any

from toolnexus.types import JSONSchema

NON_FIELD = "__all__"
# Field name (or NON_FIELD) -> the messages shown beside that field.
FieldErrors = dict[str, list[str]]
REQUIRED = "This field is required."
NOT_A_NUMBER = "Enter a number."
NOT_A_WHOLE_NUMBER = "Enter a whole number."


def request_schema(data: object) -> JSONSchema | None:
    """The ``schema`` of an input request's ``data``, or None when there is none."""
    schema = data.get("schema") if isinstance(data, dict) else None
    return schema if isinstance(schema, dict) else None


def show_value(value: Any) -> str:
    """A JSON value as a reviewer reads it: strings bare, numbers without a needless .0."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)
