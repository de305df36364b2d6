"""Schema -> form: what the browser needs to draw a form for a request's flat JSON Schema, one field
per property with its widget, bounds and choices, or why no form can show it (naming the field at fault)."""

import functools
import json
import math
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from toolnexus.types import JSONSchema

from approvals.review.forms.credentials import credential_refusal
from approvals.review.forms.values import NON_FIELD, show_value

WIDGETS = ("text", "email", "url", "date", "datetime", "number", "integer", "checkbox", "select", "multiselect")
FORMAT_WIDGETS: dict[Any, str] = {"email": "email", "uri": "url", "date": "date", "date-time": "datetime"}

# Keywords that give a property structure a flat form cannot show. Any other keyword
# (const, multipleOf, minLength on a select...) is fine: the server checks it and the
# error lands next to the field.
_STRUCTURAL = (
    "$ref",
    "$dynamicRef",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "properties",
    "patternProperties",
    "additionalProperties",
    "unevaluatedProperties",
    "propertyNames",
    "dependentRequired",
    "dependentSchemas",
    "minProperties",
    "maxProperties",
    "prefixItems",
    "contains",
    "minContains",
    "maxContains",
    "unevaluatedItems",
)
# The same, at the root (where properties/additionalProperties are expected).
_ROOT_STRUCTURAL = tuple(k for k in _STRUCTURAL if k not in ("properties", "additionalProperties")) + (
    "oneOf",
    "anyOf",
    "enum",
    "const",
)
_SCALAR_TYPES = ("string", "number", "integer", "boolean", "null")


class Unrenderable(Exception):
    """Raised while analysing a schema; its message is the reason shown to the reviewer."""


def describe_form(schema: object) -> dict[str, Any]:
    """What the browser needs to draw a form for ``schema``, or why it cannot.

    Returns ``{"renderable": True, "fields": [...]}`` (one field per property, in
    properties order) or ``{"renderable": False, "reason": "..."}``, the reason being a
    sentence for the reviewer that names the field at fault. A schema asking for a
    credential is never renderable (§10).
    """
    try:
        specs = analyse(schema)
    except Unrenderable as exc:
        return {"renderable": False, "reason": str(exc)}
    return {"renderable": True, "fields": [spec["field"] for spec in specs]}


def analyse(schema: object) -> list[dict[str, Any]]:
    """The fields of a renderable schema, each with the choice values behind its keys."""
    if not isinstance(schema, dict):
        raise Unrenderable("The request has no schema describing its fields, so no form can be shown.")
    problem = schema_problem(schema)
    if problem is not None:
        message, path = problem
        where = f'Field "{path[1]}"' if len(path) > 1 and path[0] == "properties" else "The request's schema"
        raise Unrenderable(f"{where} is not valid JSON Schema ({message}), so no form can be shown.")
    if schema.get("type") != "object" or not isinstance(schema.get("properties"), dict):
        raise Unrenderable(
            'The request\'s schema is not an object with "properties"; this form shows only flat fields.'
        )
    for keyword in _ROOT_STRUCTURAL:
        if keyword in schema:
            raise Unrenderable(
                f'The request\'s schema uses "{keyword}" at the top level; this form shows only flat fields.'
            )
    refusal = credential_refusal("input", {"schema": schema})
    if refusal:
        raise Unrenderable(refusal)
    properties = schema["properties"]
    required = schema.get("required") or []
    for name in required:
        if name not in properties:
            raise Unrenderable(
                f'Field "{name}" is required but not described in the schema, so this form cannot fill it in.'
            )
    specs = []
    for name, prop in properties.items():
        if name == NON_FIELD:
            raise Unrenderable(f'A field is named "{NON_FIELD}", a name this form keeps for itself.')
        specs.append(_field_spec(name, prop, name in required))
    return specs


def schema_problem(schema: dict[str, Any] | bool) -> tuple[str, tuple[str | int, ...]] | None:
    """``(message, path)`` of the schema's first metaschema error, or None when it is valid.

    Checking against the metaschema is the slow part of every call, and the same
    request schema is checked on each render and answer, so results are cached by
    the schema's JSON text.
    """
    try:
        text = json.dumps(schema, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return _check_schema(schema)
    return _cached_schema_problem(text)


@functools.lru_cache(maxsize=512)
def _cached_schema_problem(text: str) -> tuple[str, tuple[str | int, ...]] | None:
    return _check_schema(json.loads(text))


def _check_schema(schema: dict[str, Any] | bool) -> tuple[str, tuple[str | int, ...]] | None:
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return exc.message, tuple(exc.path)
    return None


def _field_spec(name: str, prop: object, required: bool) -> dict[str, Any]:
    if not isinstance(prop, dict):
        raise Unrenderable(f'Field "{name}" is not described by a schema object; this form shows only flat fields.')
    kind = prop.get("type")
    if kind == "object":
        raise Unrenderable(f'Field "{name}" is an object; this form shows only flat fields.')
    for keyword in _STRUCTURAL:
        if keyword in prop:
            raise Unrenderable(f'Field "{name}" uses "{keyword}"; this form shows only flat fields.')
    field: dict[str, Any] = {
        "name": name,
        "label": prop["title"] if isinstance(prop.get("title"), str) and prop["title"] else name,
        "description": prop["description"] if isinstance(prop.get("description"), str) else None,
        "required": required,
        "widget": None,
        "default": None,
        "choices": None,
        "min": None,
        "max": None,
        # A number's bound that is itself refused (exclusiveMinimum/Maximum): "greater than 0", not "at least 0".
        "min_exclusive": False,
        "max_exclusive": False,
        "min_length": None,
        "max_length": None,
        "pattern": None,
        "step": None,
    }
    spec: dict[str, Any] = {"field": field, "values": None}
    values: list[Any] | None
    labels: list[str] | None
    if isinstance(kind, list):
        raise Unrenderable(
            f'Field "{name}" allows several types ({", ".join(map(str, kind))}); this form needs exactly one.'
        )
    if kind == "array":
        values, labels = choices_of(name, prop.get("items"), of_list=True)
        field.update(widget="multiselect", min=prop.get("minItems"), max=prop.get("maxItems"))
    elif "enum" in prop or "oneOf" in prop or "anyOf" in prop:
        if kind is not None and kind not in _SCALAR_TYPES:
            raise Unrenderable(f'Field "{name}" is of type "{kind}"; this form shows only flat fields.')
        values, labels = choices_of(name, prop)
        field["widget"] = "select"
    elif kind == "string":
        field.update(
            widget=FORMAT_WIDGETS.get(prop.get("format"), "text"),
            min_length=prop.get("minLength"),
            max_length=prop.get("maxLength"),
            pattern=prop.get("pattern"),
        )
        values = labels = None
    elif kind in ("number", "integer"):
        low, high = _bounds(prop, integer=kind == "integer")
        field.update(
            widget=kind,
            min=low,
            max=high,
            step="1" if kind == "integer" else "any",
            min_exclusive=kind == "number" and low is not None and low == prop.get("exclusiveMinimum"),
            max_exclusive=kind == "number" and high is not None and high == prop.get("exclusiveMaximum"),
        )
        values = labels = None
    elif kind == "boolean":
        field["widget"] = "checkbox"
        values = labels = None
    elif kind is None:
        raise Unrenderable(f'Field "{name}" has no type, so this form does not know how to show it.')
    else:
        raise Unrenderable(f'Field "{name}" is of type "{kind}", which this form cannot show.')
    if values is not None and labels is not None:
        spec["values"] = values
        field["choices"] = [{"key": str(i), "label": label} for i, label in enumerate(labels)]
    if "default" in prop:
        field["default"] = _raw_for(spec, prop["default"])
    return spec


def choices_of(name: str, schema: object, of_list: bool = False) -> tuple[list[Any], list[str]]:
    """The values and labels of an enum, or of a oneOf/anyOf of consts."""
    what = "a list" if of_list else "a choice"
    if not isinstance(schema, dict):
        raise Unrenderable(
            f'Field "{name}" is a list of free values; this form shows lists only as a choice of options.'
        )
    if of_list:
        for keyword in _STRUCTURAL:
            if keyword in schema:
                raise Unrenderable(f'Field "{name}" has items that use "{keyword}"; this form shows only flat fields.')
    if "enum" in schema:
        values = schema["enum"]
        names = schema.get("enumNames")
        names = names if isinstance(names, list) else []
        labels = [
            names[i] if i < len(names) and isinstance(names[i], str) and names[i] else show_value(v)
            for i, v in enumerate(values)
        ]
    else:
        options = schema.get("oneOf", schema.get("anyOf"))
        if options is None:
            raise Unrenderable(
                f'Field "{name}" is a list of free values; this form shows lists only as a choice of options.'
            )
        if not all(isinstance(o, dict) and "const" in o for o in options):
            raise Unrenderable(
                f'Field "{name}" combines alternatives that are not fixed values; this form cannot show it.'
            )
        values = [o["const"] for o in options]
        labels = [
            o["title"] if isinstance(o.get("title"), str) and o["title"] else show_value(o["const"]) for o in options
        ]
    if not values:
        raise Unrenderable(f'Field "{name}" is {what} with no options to choose from.')
    if not all(v is None or isinstance(v, (str, int, float, bool)) for v in values):
        raise Unrenderable(
            f'Field "{name}" offers options that are objects or lists; this form shows only plain values.'
        )
    kind = schema.get("type")
    if kind is not None:
        checker = Draft202012Validator({"type": kind})
        if not all(checker.is_valid(v) for v in values):
            raise Unrenderable(f'Field "{name}" offers options that are not of its own type "{kind}".')
    return values, labels


def _bounds(prop: JSONSchema, integer: bool) -> tuple[float | None, float | None]:
    """The inclusive min/max the browser can enforce (the server checks the exact rule).

    For an integer the exclusive bounds become the nearest whole numbers inside them.
    """
    lows: list[float] = []
    highs: list[float] = []
    if _is_number(prop.get("minimum")):
        lows.append(math.ceil(prop["minimum"]) if integer else prop["minimum"])
    if _is_number(prop.get("exclusiveMinimum")):
        lows.append(math.floor(prop["exclusiveMinimum"]) + 1 if integer else prop["exclusiveMinimum"])
    if _is_number(prop.get("maximum")):
        highs.append(math.floor(prop["maximum"]) if integer else prop["maximum"])
    if _is_number(prop.get("exclusiveMaximum")):
        highs.append(math.ceil(prop["exclusiveMaximum"]) - 1 if integer else prop["exclusiveMaximum"])
    return (max(lows) if lows else None), (min(highs) if highs else None)


def _raw_for(spec: dict[str, Any], value: Any) -> Any:
    """The raw form value that stands for ``value`` in this field, or None if none does."""
    widget = spec["field"]["widget"]
    if widget in ("text", "email", "url", "date", "datetime"):
        return value if isinstance(value, str) else None
    if widget in ("number", "integer"):
        if not _is_number(value):
            return None
        if widget == "integer" and float(value).is_integer():
            return str(int(value))
        return repr(value)
    if widget == "checkbox":
        return value if isinstance(value, bool) else None
    if widget == "select":
        return _key_of(spec["values"], value)
    if widget == "multiselect":
        if not isinstance(value, list):
            return None
        keys = [_key_of(spec["values"], v) for v in value]
        return None if None in keys else keys
    return None


def _key_of(values: list[Any], value: Any) -> str | None:
    for i, candidate in enumerate(values):
        if _same(candidate, value):
            return str(i)
    return None


def _same(a: Any, b: Any) -> bool:
    """JSON equality: true is not 1, but 1 is 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    return type(a) is type(b) and a == b


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
