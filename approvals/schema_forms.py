"""Validate a reviewer's answer against an ``input`` request's ``data.schema``.

The browser builds the form from the same flat JSON Schema (MCP elicitation's
subset); the server is the judge, using the ``jsonschema`` library, and reports
errors per field so the form can show them next to the right input.
"""
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

NON_FIELD = "__all__"


def request_schema(data):
    schema = (data or {}).get("schema")
    return schema if isinstance(schema, dict) else None


def field_errors(schema, value):
    """Map of field name -> list of messages; empty when ``value`` satisfies ``schema``."""
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return {NON_FIELD: [f"The request's schema is not valid JSON Schema: {exc.message}"]}
    if not isinstance(value, dict):
        return {NON_FIELD: ["The answer must be a JSON object of field values."]}
    errors = {}
    validator = Draft202012Validator(schema)
    for error in sorted(validator.iter_errors(value), key=lambda e: list(e.path)):
        if error.validator == "required":
            for name in error.validator_value:
                if isinstance(error.instance, dict) and name not in error.instance:
                    errors.setdefault(str(name), []).append("This field is required.")
        elif error.path:
            errors.setdefault(str(error.path[0]), []).append(_message(error))
        else:
            errors.setdefault(NON_FIELD, []).append(error.message)
    return errors


def _message(error):
    if error.validator == "enum":
        return "Choose one of: " + ", ".join(str(v) for v in error.validator_value) + "."
    if error.validator == "type":
        return f"Enter a value of type {error.validator_value}."
    return error.message[:300]
