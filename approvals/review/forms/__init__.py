"""Turn a request's flat JSON Schema into a form, and the form's values back into JSON.

An ``input`` request carries a JSON Schema in ``data.schema`` (MCP elicitation's
flat subset). The browser draws a form from :func:`describe_form`, sends back raw
form values (strings, bools, choice keys), and the server converts them with
:func:`values_from_form` and judges them with the ``jsonschema`` library
(:func:`field_errors`, Draft 2020-12 with a ``FormatChecker``), so errors come back
per field and land next to the right input. The server is always the judge: the
form's hints (``min``, ``pattern``...) only help the reviewer.

§10's trust boundary says ``input`` and ``question`` must never collect
credentials; :func:`credential_refusal` spots requests that try.

Plain functions, no Django: this module is pure and tested on its own.
"""

import copy
import functools
import json
import math
import re
from decimal import Decimal, InvalidOperation

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError

NON_FIELD = "__all__"

FORMAT_CHECKER = FormatChecker()

WIDGETS = ("text", "email", "url", "date", "datetime", "number", "integer", "checkbox", "select", "multiselect")
FORMAT_WIDGETS = {"email": "email", "uri": "url", "date": "date", "date-time": "datetime"}

REQUIRED = "This field is required."
NOT_A_NUMBER = "Enter a number."
NOT_A_WHOLE_NUMBER = "Enter a whole number."

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
_NUMBER_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_INT_RE = re.compile(r"[+-]?\d+", re.ASCII)
_KEY_RE = re.compile(r"0|[1-9]\d*", re.ASCII)
_MAX_NUMBER_TEXT = 100  # longer number text is refused rather than parsed


class _Unrenderable(Exception):
    """Raised while analysing a schema; its message is the reason shown to the reviewer."""


class _Invalid(Exception):
    """A raw form value that cannot be converted; its message is the field error."""


_EMPTY = object()  # an empty form value: omitted, or "This field is required."


# -- schema -> form -----------------------------------------------------------------------


def request_schema(data):
    """The ``schema`` of an input request's ``data``, or None when there is none."""
    schema = data.get("schema") if isinstance(data, dict) else None
    return schema if isinstance(schema, dict) else None


def describe_form(schema):
    """What the browser needs to draw a form for ``schema``, or why it cannot.

    Returns ``{"renderable": True, "fields": [...]}`` (one field per property, in
    properties order) or ``{"renderable": False, "reason": "..."}``, the reason being a
    sentence for the reviewer that names the field at fault. A schema asking for a
    credential is never renderable (§10).
    """
    try:
        specs = _analyse(schema)
    except _Unrenderable as exc:
        return {"renderable": False, "reason": str(exc)}
    return {"renderable": True, "fields": [spec["field"] for spec in specs]}


def _analyse(schema):
    """The fields of a renderable schema, each with the choice values behind its keys."""
    if not isinstance(schema, dict):
        raise _Unrenderable("The request has no schema describing its fields, so no form can be shown.")
    problem = _schema_problem(schema)
    if problem is not None:
        message, path = problem
        where = f'Field "{path[1]}"' if len(path) > 1 and path[0] == "properties" else "The request's schema"
        raise _Unrenderable(f"{where} is not valid JSON Schema ({message}), so no form can be shown.")
    if schema.get("type") != "object" or not isinstance(schema.get("properties"), dict):
        raise _Unrenderable(
            'The request\'s schema is not an object with "properties"; this form shows only flat fields.'
        )
    for keyword in _ROOT_STRUCTURAL:
        if keyword in schema:
            raise _Unrenderable(
                f'The request\'s schema uses "{keyword}" at the top level; this form shows only flat fields.'
            )
    refusal = credential_refusal("input", {"schema": schema})
    if refusal:
        raise _Unrenderable(refusal)
    properties = schema["properties"]
    required = schema.get("required") or []
    for name in required:
        if name not in properties:
            raise _Unrenderable(
                f'Field "{name}" is required but not described in the schema, so this form cannot fill it in.'
            )
    specs = []
    for name, prop in properties.items():
        if name == NON_FIELD:
            raise _Unrenderable(f'A field is named "{NON_FIELD}", a name this form keeps for itself.')
        specs.append(_field_spec(name, prop, name in required))
    return specs


def _schema_problem(schema):
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
def _cached_schema_problem(text):
    return _check_schema(json.loads(text))


def _check_schema(schema):
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return exc.message, tuple(exc.path)
    return None


def _field_spec(name, prop, required):
    if not isinstance(prop, dict):
        raise _Unrenderable(f'Field "{name}" is not described by a schema object; this form shows only flat fields.')
    kind = prop.get("type")
    if kind == "object":
        raise _Unrenderable(f'Field "{name}" is an object; this form shows only flat fields.')
    for keyword in _STRUCTURAL:
        if keyword in prop:
            raise _Unrenderable(f'Field "{name}" uses "{keyword}"; this form shows only flat fields.')
    field = {
        "name": name,
        "label": prop["title"] if isinstance(prop.get("title"), str) and prop["title"] else name,
        "description": prop["description"] if isinstance(prop.get("description"), str) else None,
        "required": required,
        "widget": None,
        "default": None,
        "choices": None,
        "min": None,
        "max": None,
        "min_length": None,
        "max_length": None,
        "pattern": None,
        "step": None,
    }
    spec = {"field": field, "values": None}
    if isinstance(kind, list):
        raise _Unrenderable(
            f'Field "{name}" allows several types ({", ".join(map(str, kind))}); this form needs exactly one.'
        )
    if kind == "array":
        values, labels = _choices(name, prop.get("items"), of_list=True)
        field.update(widget="multiselect", min=prop.get("minItems"), max=prop.get("maxItems"))
    elif "enum" in prop or "oneOf" in prop or "anyOf" in prop:
        if kind is not None and kind not in _SCALAR_TYPES:
            raise _Unrenderable(f'Field "{name}" is of type "{kind}"; this form shows only flat fields.')
        values, labels = _choices(name, prop)
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
        field.update(widget=kind, min=low, max=high, step="1" if kind == "integer" else "any")
        values = labels = None
    elif kind == "boolean":
        field["widget"] = "checkbox"
        values = labels = None
    elif kind is None:
        raise _Unrenderable(f'Field "{name}" has no type, so this form does not know how to show it.')
    else:
        raise _Unrenderable(f'Field "{name}" is of type "{kind}", which this form cannot show.')
    if values is not None:
        spec["values"] = values
        field["choices"] = [{"key": str(i), "label": label} for i, label in enumerate(labels)]
    if "default" in prop:
        field["default"] = _raw_for(spec, prop["default"])
    return spec


def _choices(name, schema, of_list=False):
    """The values and labels of an enum, or of a oneOf/anyOf of consts."""
    what = "a list" if of_list else "a choice"
    if not isinstance(schema, dict):
        raise _Unrenderable(
            f'Field "{name}" is a list of free values; this form shows lists only as a choice of options.'
        )
    if of_list:
        for keyword in _STRUCTURAL:
            if keyword in schema:
                raise _Unrenderable(f'Field "{name}" has items that use "{keyword}"; this form shows only flat fields.')
    if "enum" in schema:
        values = schema["enum"]
        names = schema.get("enumNames")
        names = names if isinstance(names, list) else []
        labels = [
            names[i] if i < len(names) and isinstance(names[i], str) and names[i] else _show(v)
            for i, v in enumerate(values)
        ]
    else:
        options = schema.get("oneOf", schema.get("anyOf"))
        if options is None:
            raise _Unrenderable(
                f'Field "{name}" is a list of free values; this form shows lists only as a choice of options.'
            )
        if not all(isinstance(o, dict) and "const" in o for o in options):
            raise _Unrenderable(
                f'Field "{name}" combines alternatives that are not fixed values; this form cannot show it.'
            )
        values = [o["const"] for o in options]
        labels = [o["title"] if isinstance(o.get("title"), str) and o["title"] else _show(o["const"]) for o in options]
    if not values:
        raise _Unrenderable(f'Field "{name}" is {what} with no options to choose from.')
    if not all(v is None or isinstance(v, (str, int, float, bool)) for v in values):
        raise _Unrenderable(
            f'Field "{name}" offers options that are objects or lists; this form shows only plain values.'
        )
    kind = schema.get("type")
    if kind is not None:
        checker = Draft202012Validator({"type": kind})
        if not all(checker.is_valid(v) for v in values):
            raise _Unrenderable(f'Field "{name}" offers options that are not of its own type "{kind}".')
    return values, labels


def _bounds(prop, integer):
    """The inclusive min/max the browser can enforce (the server checks the exact rule).

    For an integer the exclusive bounds become the nearest whole numbers inside them.
    """
    lows, highs = [], []
    if _is_number(prop.get("minimum")):
        lows.append(math.ceil(prop["minimum"]) if integer else prop["minimum"])
    if _is_number(prop.get("exclusiveMinimum")):
        lows.append(math.floor(prop["exclusiveMinimum"]) + 1 if integer else prop["exclusiveMinimum"])
    if _is_number(prop.get("maximum")):
        highs.append(math.floor(prop["maximum"]) if integer else prop["maximum"])
    if _is_number(prop.get("exclusiveMaximum")):
        highs.append(math.ceil(prop["exclusiveMaximum"]) - 1 if integer else prop["exclusiveMaximum"])
    return (max(lows) if lows else None), (min(highs) if highs else None)


def _raw_for(spec, value):
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


def _key_of(values, value):
    for i, candidate in enumerate(values):
        if _same(candidate, value):
            return str(i)
    return None


def _same(a, b):
    """JSON equality: true is not 1, but 1 is 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    return type(a) is type(b) and a == b


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _show(value):
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


# -- form -> JSON -------------------------------------------------------------------------


def values_from_form(schema, raw):
    """Convert the browser's raw form values into typed JSON for ``schema``.

    Returns ``(data, errors)``. Empty values ("" / None / [] / a missing key) are left
    out of ``data``, or are "This field is required." for a required field, because a
    browser cannot tell "empty" from "not given". Keys that are not fields are ignored.
    Defaults are not filled in here: the form was pre-filled with them.
    """
    try:
        specs = _analyse(schema)
    except _Unrenderable as exc:
        return {}, {NON_FIELD: [str(exc)]}
    if not isinstance(raw, dict):
        return {}, {NON_FIELD: ["The form values must be a JSON object of field values."]}
    data, errors = {}, {}
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


def _convert(spec, raw):
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


def _index(spec, key):
    choices = spec["field"]["choices"]
    if isinstance(key, str) and _KEY_RE.fullmatch(key) and int(key) < len(choices):
        return int(key)
    raise _Invalid(_choose_one_of(choices))


def _choose_one_of(choices):
    return "Choose one of: " + ", ".join(c["label"] for c in choices) + "."


def _number_text(raw, message):
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


def _to_number(raw):
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


def _to_integer(raw):
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


def answer_errors(schema, raw):
    """Convert raw form values and validate them: ``(data, errors)``, one dict of errors.

    A field whose raw value could not be converted keeps only that message (the
    schema's own complaint about the missing value would only repeat it).
    """
    data, errors = values_from_form(schema, raw)
    if NON_FIELD in errors:
        return data, errors
    for name, messages in _checked_field_errors(schema, data).items():  # _analyse checked the schema
        if name not in errors:
            errors[name] = messages
    return data, _in_form_order(schema, errors)


# -- JSON -> errors -----------------------------------------------------------------------


def field_errors(schema, value):
    """Map of field name -> list of messages; empty when ``value`` satisfies ``schema``.

    Validation is jsonschema's (Draft 2020-12, formats checked); this only words the
    errors for a reviewer and files each under the top-level field it concerns.
    Problems with the whole answer go under ``NON_FIELD``.
    """
    if not isinstance(schema, (dict, bool)):
        return {NON_FIELD: ["The request's schema is not valid JSON Schema: it is not an object."]}
    problem = _schema_problem(schema)
    if problem is not None:
        return {NON_FIELD: [f"The request's schema is not valid JSON Schema: {problem[0]}"]}
    return _checked_field_errors(schema, value)


def _checked_field_errors(schema, value):
    """:func:`field_errors` for a schema already known to be valid."""
    if not isinstance(value, dict):
        return {NON_FIELD: ["The answer must be a JSON object of field values."]}
    errors = {}

    def add(key, message):
        messages = errors.setdefault(key, [])
        if message not in messages:
            messages.append(message)

    validator = Draft202012Validator(schema, format_checker=FORMAT_CHECKER)
    try:
        found = sorted(validator.iter_errors(value), key=lambda e: [str(p) for p in e.path])
    except Exception as exc:  # e.g. an unresolvable $ref: the schema is at fault, not the reviewer
        return {NON_FIELD: [f"The request's schema could not be applied: {exc}"[:300]]}
    for error in found:
        if error.validator == "required" and isinstance(error.instance, dict) and not error.path:
            for name in error.validator_value:
                if name not in error.instance:
                    add(str(name), REQUIRED)
        elif error.path:
            add(str(error.path[0]), _message(error))
        elif error.validator == "additionalProperties" and isinstance(error.instance, dict):
            known = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
            for name in error.instance:
                if name not in known:
                    add(NON_FIELD, f'Unexpected field "{name}".')
        else:
            add(NON_FIELD, error.message[:300])
    return _in_form_order(schema, errors)


def _in_form_order(schema, errors):
    """Errors ordered as the reviewer reads the form: the whole answer first, then fields."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    order = {NON_FIELD: -1, **{name: i for i, name in enumerate(properties or {})}}
    return dict(sorted(errors.items(), key=lambda item: order.get(item[0], len(order))))


_TYPE_MESSAGES = {
    "string": "Enter text.",
    "number": NOT_A_NUMBER,
    "integer": NOT_A_WHOLE_NUMBER,
    "boolean": "Enter true or false.",
    "array": "Choose from the list.",
    "object": "Enter a group of fields.",
    "null": "Leave this empty.",
}
_FORMAT_MESSAGES = {
    "email": "Enter a valid email address.",
    "uri": "Enter a full URL, such as https://example.com/.",
    "date": "Enter a date as YYYY-MM-DD.",
    "date-time": "Enter a date and time such as 2024-05-01T13:30:00Z.",
}


def _message(error):
    validator, bound, schema = error.validator, error.validator_value, error.schema
    if validator == "enum":
        return "Choose one of: " + ", ".join(_labels_of(schema)) + "."
    if (
        validator in ("oneOf", "anyOf")
        and isinstance(bound, list)
        and all(isinstance(o, dict) and "const" in o for o in bound)
    ):
        return "Choose one of: " + ", ".join(_labels_of(schema)) + "."
    if validator == "const":
        return f"The only allowed value is {_show(bound)}."
    if validator == "type":
        return (
            _TYPE_MESSAGES.get(bound, f"Enter a value of type {bound}.")
            if isinstance(bound, str)
            else ("Enter a value of type " + " or ".join(map(str, bound)) + ".")
        )
    if validator == "format":
        return _FORMAT_MESSAGES.get(bound, f"Enter a valid {bound}.")
    if validator == "minLength":
        return f"Enter at least {bound} character{'s' if bound != 1 else ''}."
    if validator == "maxLength":
        return f"Enter at most {bound} character{'s' if bound != 1 else ''}."
    if validator == "pattern":
        return f"Enter a value matching the pattern {bound}."
    if validator == "minimum":
        return f"Enter a number greater than or equal to {_show(bound)}."
    if validator == "maximum":
        return f"Enter a number less than or equal to {_show(bound)}."
    if validator == "exclusiveMinimum":
        return f"Enter a number greater than {_show(bound)}."
    if validator == "exclusiveMaximum":
        return f"Enter a number less than {_show(bound)}."
    if validator == "multipleOf":
        return f"Enter a multiple of {_show(bound)}."
    if validator == "minItems":
        return f"Choose at least {bound}."
    if validator == "maxItems":
        return f"Choose at most {bound}."
    if validator == "uniqueItems":
        return "Choose each option only once."
    if validator == "required":
        return "Fill in: " + ", ".join(str(n) for n in bound if n not in (error.instance or {})) + "."
    return error.message[:300]


def _labels_of(schema):
    try:
        return _choices("", schema)[1]
    except _Unrenderable:
        if isinstance(schema, dict) and isinstance(schema.get("enum"), list):
            return [_show(v) for v in schema["enum"]]
        return [_show(o.get("const")) for o in schema.get("oneOf", schema.get("anyOf", [])) if isinstance(o, dict)]


# -- the §10 trust boundary ---------------------------------------------------------------

# A name is split into words (snake_case, kebab-case, camelCase, digits: "apiKey2" ->
# api, key, 2). It asks for a credential when a word is one of these...
_SECRET_WORDS = {
    "password",
    "passwords",
    "passwd",
    "passphrase",
    "passcode",
    "secret",
    "secrets",
    "token",
    "credential",
    "credentials",
    "apikey",
    "privatekey",
    "accesskey",
}
# ...or ends in one of these (lower-case compounds such as "authtoken", "clientsecret")...
_SECRET_SUFFIXES = (
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "privatekey",
    "accesskey",
    "credential",
    "credentials",
)
# ...or two neighbouring words make one of these.
_SECRET_PAIRS = {("api", "key"), ("private", "key"), ("access", "key"), ("ssh", "key")}
# "token" next to a word about quantity is the LLM kind ("token_count", "max_token").
_QUANTITY_WORDS = {
    "count",
    "counts",
    "limit",
    "limits",
    "budget",
    "usage",
    "used",
    "total",
    "number",
    "num",
    "max",
    "min",
}
_WORD_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")

_NEVER = "The console never collects credentials; the reviewer can only decline this request."


def looks_like_credential(text):
    """Whether a field name, title or question asks for a password, token, key or secret.

    Word-wise, so "auth_token", "apiKey", "client_secret", "password2" and "What is
    your password?" match while "tokenizer", "max_tokens", "token_count" and
    "secretary" do not.
    """
    if not isinstance(text, str):
        return False
    words = [w.lower() for w in _WORD_RE.findall(text)]
    for i, word in enumerate(words):
        neighbours = set(words[max(i - 1, 0) : i] + words[i + 1 : i + 2])
        if word == "token" and neighbours & _QUANTITY_WORDS:
            continue
        if word in _SECRET_WORDS or word.endswith(_SECRET_SUFFIXES):
            return True
        if i + 1 < len(words) and (word, words[i + 1]) in _SECRET_PAIRS:
            return True
    return False


def credential_refusal(kind, data):
    """Why this request must not be answered with a form (§10), or None when it may.

    ``input``: a property anywhere in ``data.schema`` with ``format: "password"``,
    ``writeOnly: true``, or a name or title that :func:`looks_like_credential`.
    ``question``: a question or header that looks like it asks for a credential.
    Other kinds collect no data from the reviewer and are never refused.
    """
    if kind == "input":
        schema = request_schema(data)
        return _schema_refusal(schema, "") if schema is not None else None
    if kind == "question":
        questions = data.get("questions") if isinstance(data, dict) else None
        for number, question in enumerate(questions if isinstance(questions, list) else [], start=1):
            if not isinstance(question, dict):
                continue
            for key in ("question", "header"):
                text = question.get(key)
                if looks_like_credential(text):
                    return f'Question {number} ("{text}") asks for a credential. {_NEVER}'
    return None


def _schema_refusal(schema, path):
    """Walk a schema and its subschemas for a property that collects a secret."""
    if isinstance(schema, list):
        for item in schema:
            refusal = _schema_refusal(item, path)
            if refusal:
                return refusal
        return None
    if not isinstance(schema, dict):
        return None
    where = f'Field "{path}"' if path else "The request's schema"
    if schema.get("format") == "password":
        return f'{where} is a password field (format "password"). {_NEVER}'
    if schema.get("writeOnly") is True:
        return f"{where} is write-only (writeOnly), which marks a secret. {_NEVER}"
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, sub in properties.items():
            full = f"{path}.{name}" if path else str(name)
            title = sub.get("title") if isinstance(sub, dict) else None
            if looks_like_credential(str(name)) or looks_like_credential(title):
                return f'Field "{full}" asks for a credential (its name or title looks like a password, token or key). {_NEVER}'
            refusal = _schema_refusal(sub, full)
            if refusal:
                return refusal
    for key in ("items", "prefixItems", "additionalProperties", "oneOf", "anyOf", "allOf", "not", "if", "then", "else"):
        refusal = _schema_refusal(schema.get(key), path)
        if refusal:
            return refusal
    for key in ("$defs", "definitions", "patternProperties"):
        group = schema.get(key)
        if isinstance(group, dict):
            refusal = _schema_refusal(list(group.values()), path)
            if refusal:
                return refusal
    return None


# -- the builtin question tool ------------------------------------------------------------


def question_answer_errors(data, answer_data):
    """Errors in an answer to the builtin ``question`` tool; empty when it is good.

    The answer is ``{"answers": [[str, ...], ...]}``, one list per question in order.
    A question without ``multiple`` takes exactly one answer. Any non-empty text is
    allowed, not only the options, because the form always offers "Other".
    Errors are keyed "q0", "q1", ... and ``NON_FIELD``.
    """
    questions = data.get("questions") if isinstance(data, dict) else None
    questions = questions if isinstance(questions, list) else []
    shape = 'The answer must be {"answers": [[...], ...]}, one list of answers per question.'
    if not isinstance(answer_data, dict) or not isinstance(answer_data.get("answers"), list):
        return {NON_FIELD: [shape]}
    errors = {}
    extra = sorted(str(k) for k in answer_data if k != "answers")
    if extra:
        errors[NON_FIELD] = [f'Unexpected key "{k}"; {shape}' for k in extra]
    answers = answer_data["answers"]
    if len(answers) > len(questions):
        errors.setdefault(NON_FIELD, []).append(
            f"There {'is' if len(questions) == 1 else 'are'} {len(questions)} question"
            f"{'' if len(questions) == 1 else 's'} but {len(answers)} answers."
        )
    for i, question in enumerate(questions):
        key = f"q{i}"
        multiple = isinstance(question, dict) and question.get("multiple") is True
        if i >= len(answers):
            errors[key] = ["Answer this question."]
            continue
        entry = answers[i]
        if not isinstance(entry, list) or not all(isinstance(a, str) for a in entry):
            errors[key] = ["The answer must be a list of texts."]
        elif not entry:
            errors[key] = ["Choose at least one answer." if multiple else "Answer this question."]
        elif any(not a.strip() for a in entry):
            errors[key] = ["An answer cannot be empty."]
        elif not multiple and len(entry) > 1:
            errors[key] = ["Choose only one answer."]
        elif len(set(entry)) != len(entry):
            errors[key] = ["Choose each answer only once."]
    return errors


# -- editable approvals -------------------------------------------------------------------


def editable_schema(request_data, tool_input_schema, args):
    """A flat object schema for the arguments a reviewer may change, or None.

    ``request_data["args"] == {"schema": {...}, "values": {...}}`` gives the schema
    outright (its defaults become the values). Otherwise ``request_data["editable"]``
    lists argument names: each property's schema comes from the tool's input schema
    when it has one, else is inferred from the current value's JSON type, and its
    ``default`` is the current value so the form opens showing it.
    """
    request_data = request_data if isinstance(request_data, dict) else {}
    args = args if isinstance(args, dict) else {}
    given = request_data.get("args")
    if isinstance(given, dict) and isinstance(given.get("schema"), dict):
        schema = copy.deepcopy(given["schema"])
        values = given.get("values") if isinstance(given.get("values"), dict) else {}
        properties = schema.get("properties")
        if isinstance(properties, dict):
            for name, value in values.items():
                if isinstance(properties.get(name), dict):
                    properties[name]["default"] = copy.deepcopy(value)
        return schema
    names = request_data.get("editable")
    if not isinstance(names, list):
        return None
    tool_schema = tool_input_schema if isinstance(tool_input_schema, dict) else {}
    tool_properties = tool_schema.get("properties") if isinstance(tool_schema.get("properties"), dict) else {}
    tool_required = tool_schema.get("required") if isinstance(tool_schema.get("required"), list) else []
    properties, required = {}, []
    for name in names:
        if not isinstance(name, str) or name in properties:
            continue
        if isinstance(tool_properties.get(name), dict):
            prop = copy.deepcopy(tool_properties[name])
        elif name in args:
            prop = _inferred(args[name])
        else:
            continue  # neither declared nor given: nothing to show
        if name in args:
            prop["default"] = copy.deepcopy(args[name])
        properties[name] = prop
        if name in tool_required:
            required.append(name)
    if not properties:
        return None
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _inferred(value):
    """The JSON type of a current argument value, as a schema (no guess for null)."""
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, list):
        return {"type": "array"}
    if isinstance(value, dict):
        return {"type": "object"}
    return {}
