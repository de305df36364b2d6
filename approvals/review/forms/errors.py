"""JSON -> errors: jsonschema (Draft 2020-12, formats checked) judges an answer; this words its errors
for a reviewer and files each under the field it concerns. Also the rules for an answer to the
builtin ``question`` tool."""

from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError

from approvals.review.forms.schema import Unrenderable, choices_of, schema_problem
from approvals.review.forms.values import (
    NON_FIELD,
    NOT_A_NUMBER,
    NOT_A_WHOLE_NUMBER,
    REQUIRED,
    FieldErrors,
    show_value,
)

FORMAT_CHECKER = FormatChecker()
# The pattern of a string with something in it (not empty, not only spaces), for a tool's schema to use:
# unanchored for JSON Schema, and still right where a browser anchors it (an input's pattern attribute).
# Its refusal says so in words, not as the pattern.
SOME_TEXT = r".*\S.*"


def field_errors(schema: object, value: object) -> FieldErrors:
    """Map of field name -> list of messages; empty when ``value`` satisfies ``schema``.

    Validation is jsonschema's (Draft 2020-12, formats checked); this only words the
    errors for a reviewer and files each under the top-level field it concerns.
    Problems with the whole answer go under ``NON_FIELD``.
    """
    if not isinstance(schema, (dict, bool)):
        return {NON_FIELD: ["The request's schema is not valid JSON Schema: it is not an object."]}
    problem = schema_problem(schema)
    if problem is not None:
        return {NON_FIELD: [f"The request's schema is not valid JSON Schema: {problem[0]}"]}
    return checked_field_errors(schema, value)


def checked_field_errors(schema: dict[str, Any] | bool, value: object) -> FieldErrors:
    """:func:`field_errors` for a schema already known to be valid."""
    if not isinstance(value, dict):
        return {NON_FIELD: ["The answer must be a JSON object of field values."]}
    errors: FieldErrors = {}

    def add(key: str, message: str) -> None:
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
    return in_form_order(schema, errors)


def in_form_order(schema: object, errors: FieldErrors) -> FieldErrors:
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


_TYPE_WORDS = {
    "string": "text",
    "number": "a number",
    "integer": "a whole number",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
}


def _item_needs(schema: Any) -> str:
    """What an object item of a list holds, in words: 'question (text), and may have options (a list)'."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not properties:
        return "its fields"

    def words(name: str) -> str:
        kind = properties[name].get("type") if isinstance(properties[name], dict) else None
        return f"{name} ({_TYPE_WORDS[kind]})" if isinstance(kind, str) and kind in _TYPE_WORDS else name

    required = [n for n in schema.get("required") or [] if n in properties]
    optional = [n for n in properties if n not in required]
    text = ", ".join(map(words, required))
    if optional:
        text += (", and may have " if text else "any of ") + ", ".join(map(words, optional))
    return text


def _message(error: ValidationError) -> str:
    """A reviewer's words for one error; within a list, it names the item ("Item 2 ...")."""
    item = next((p for p in reversed(error.path) if isinstance(p, int)), None)
    if (
        error.validator == "type"
        and error.validator_value == "object"
        and error.path
        and isinstance(error.path[-1], int)
    ):
        return (
            f"Item {error.path[-1] + 1} is not an object: each item is a JSON object with {_item_needs(error.schema)}."
        )
    if error.validator == "required" and item is not None:
        needed: Any = error.validator_value
        given: Any = error.instance if isinstance(error.instance, dict) else {}
        missing = [str(n) for n in needed if n not in given]
        return f"Item {item + 1} needs: " + ", ".join(missing) + "."
    return _plain_message(error)


def _plain_message(error: ValidationError) -> str:
    # Set on every error iter_errors yields (the stubs also allow jsonschema's "unset" marker).
    bound: Any
    instance: Any = error.instance
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
        return f"The only allowed value is {show_value(bound)}."
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
        if bound == SOME_TEXT:
            return "Enter some text (not only spaces)."
        return f"Enter a value matching the pattern {bound}."
    if validator == "minimum":
        return f"Enter a number greater than or equal to {show_value(bound)}."
    if validator == "maximum":
        return f"Enter a number less than or equal to {show_value(bound)}."
    if validator == "exclusiveMinimum":
        return f"Enter a number greater than {show_value(bound)}."
    if validator == "exclusiveMaximum":
        return f"Enter a number less than {show_value(bound)}."
    if validator == "multipleOf":
        return f"Enter a multiple of {show_value(bound)}."
    if validator == "minItems":
        return f"Choose at least {bound}."
    if validator == "maxItems":
        return f"Choose at most {bound}."
    if validator == "uniqueItems":
        return "Choose each option only once."
    if validator == "required":
        return "Fill in: " + ", ".join(str(n) for n in bound if n not in (instance or {})) + "."
    return error.message[:300]


def _labels_of(schema: Any) -> list[str]:
    try:
        return choices_of("", schema)[1]
    except Unrenderable:
        if isinstance(schema, dict) and isinstance(schema.get("enum"), list):
            return [show_value(v) for v in schema["enum"]]
        return [show_value(o.get("const")) for o in schema.get("oneOf", schema.get("anyOf", [])) if isinstance(o, dict)]


# -- the builtin question tool ------------------------------------------------------------


def question_answer_errors(data: object, answer_data: object) -> FieldErrors:
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
    errors: FieldErrors = {}
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
