"""schema_forms: a flat JSON Schema becomes a form, raw form values become typed JSON, and
jsonschema is the judge. Pure functions, no database."""

import pytest

from approvals.review.forms import (
    NON_FIELD,
    answer_errors,
    credential_refusal,
    describe_form,
    editable_schema,
    field_errors,
    looks_like_credential,
    question_answer_errors,
    request_schema,
    values_from_form,
)

FIELD_KEYS = {
    "name",
    "label",
    "description",
    "required",
    "widget",
    "default",
    "choices",
    "min",
    "max",
    "min_exclusive",
    "max_exclusive",
    "min_length",
    "max_length",
    "pattern",
    "step",
}


def obj(properties, required=(), **extra):
    return {"type": "object", "properties": properties, "required": list(required), **extra}


def one_field(prop, required=False):
    form = describe_form(obj({"f": prop}, ["f"] if required else []))
    assert form["renderable"] is True, form
    (field,) = form["fields"]
    assert set(field) == FIELD_KEYS
    return field


def reason(schema):
    form = describe_form(schema)
    assert form["renderable"] is False
    assert set(form) == {"renderable", "reason"}
    return form["reason"]


# -- describe_form: widgets ------------------------------------------------------------------


@pytest.mark.parametrize(
    "prop, widget, step",
    [
        ({"type": "string"}, "text", None),
        ({"type": "string", "format": "email"}, "email", None),
        ({"type": "string", "format": "uri"}, "url", None),
        ({"type": "string", "format": "date"}, "date", None),
        ({"type": "string", "format": "date-time"}, "datetime", None),
        ({"type": "string", "format": "hostname"}, "text", None),
        ({"type": "number"}, "number", "any"),
        ({"type": "integer"}, "integer", "1"),
        ({"type": "boolean"}, "checkbox", None),
        ({"type": "string", "enum": ["a", "b"]}, "select", None),
        ({"enum": ["a", 1, None, True]}, "select", None),
        ({"type": "string", "oneOf": [{"const": "a", "title": "A"}]}, "select", None),
        ({"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}, "multiselect", None),
        ({"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}]}}, "multiselect", None),
    ],
)
def test_each_widget(prop, widget, step):
    field = one_field(prop)
    assert field["widget"] == widget
    assert field["step"] == step
    if widget in ("select", "multiselect"):
        assert [c["key"] for c in field["choices"]] == [str(i) for i in range(len(field["choices"]))]
    else:
        assert field["choices"] is None


def test_field_basics_label_description_required_and_order():
    schema = obj(
        {
            "zeta": {"type": "string", "title": "Last one", "description": "Shown under the input."},
            "alpha": {"type": "integer"},
            "mid": {"type": "boolean", "title": ""},
        },
        required=["alpha"],
    )
    fields = describe_form(schema)["fields"]
    assert [f["name"] for f in fields] == ["zeta", "alpha", "mid"]
    assert [f["label"] for f in fields] == ["Last one", "alpha", "mid"]
    assert [f["description"] for f in fields] == ["Shown under the input.", None, None]
    assert [f["required"] for f in fields] == [False, True, False]


def test_string_constraints_are_passed_to_the_form():
    field = one_field({"type": "string", "minLength": 2, "maxLength": 9, "pattern": "^[a-z]+$"})
    assert (field["min_length"], field["max_length"], field["pattern"]) == (2, 9, "^[a-z]+$")
    assert (field["min"], field["max"]) == (None, None)


def test_number_bounds_inclusive_and_exclusive():
    field = one_field({"type": "number", "minimum": 0.5, "maximum": 10})
    assert (field["min"], field["max"]) == (0.5, 10)
    field = one_field({"type": "number", "exclusiveMinimum": 1, "minimum": 0, "exclusiveMaximum": 2})
    assert (field["min"], field["max"]) == (1, 2)  # the browser's bounds; the server checks strictness


def test_integer_bounds_become_the_nearest_whole_numbers_inside():
    field = one_field({"type": "integer", "exclusiveMinimum": 2.5, "exclusiveMaximum": 5})
    assert (field["min"], field["max"]) == (3, 4)
    field = one_field({"type": "integer", "minimum": 0.5, "maximum": 9.9})
    assert (field["min"], field["max"]) == (1, 9)
    field = one_field({"type": "integer", "exclusiveMinimum": 3, "exclusiveMaximum": 4.5})
    assert (field["min"], field["max"]) == (4, 4)


def test_multiselect_item_counts_go_in_min_and_max():
    field = one_field(
        {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 2, "uniqueItems": True}
    )
    assert (field["min"], field["max"]) == (1, 2)


# -- describe_form: choices and defaults -------------------------------------------------------


def test_enum_names_label_the_choices():
    field = one_field({"type": "string", "enum": ["stg", "prd"], "enumNames": ["Staging", "Production"]})
    assert field["choices"] == [{"key": "0", "label": "Staging"}, {"key": "1", "label": "Production"}]


def test_enum_without_names_shows_the_values_and_short_names_lists_fall_back():
    field = one_field({"enum": ["x", 2, 2.5, 3.0, None, False], "enumNames": ["Ex"]})
    assert [c["label"] for c in field["choices"]] == ["Ex", "2", "2.5", "3", "null", "false"]


def test_one_of_titles_label_the_choices():
    field = one_field({"type": "string", "oneOf": [{"const": "stg", "title": "Staging"}, {"const": "prd"}]})
    assert field["choices"] == [{"key": "0", "label": "Staging"}, {"key": "1", "label": "prd"}]


@pytest.mark.parametrize(
    "prop, default",
    [
        ({"type": "string", "default": "hi"}, "hi"),
        ({"type": "string", "format": "date", "default": "2024-05-01"}, "2024-05-01"),
        ({"type": "string", "default": 5}, None),
        ({"type": "number", "default": 2.5}, "2.5"),
        ({"type": "number", "default": 3}, "3"),
        ({"type": "integer", "default": 4}, "4"),
        ({"type": "integer", "default": 4.0}, "4"),
        ({"type": "integer", "default": "4"}, None),
        ({"type": "number", "default": True}, None),
        ({"type": "boolean", "default": True}, True),
        ({"type": "boolean", "default": "yes"}, None),
        ({"type": "string", "enum": ["a", "b"], "default": "b"}, "1"),
        ({"type": "string", "enum": ["a", "b"], "default": "z"}, None),
        ({"enum": [1, True], "default": True}, "1"),  # true is not 1
        ({"enum": [1.0, 2], "default": 1}, "0"),  # but 1 is 1.0
        ({"type": "string", "oneOf": [{"const": "a"}, {"const": "b"}], "default": "b"}, "1"),
        ({"type": "array", "items": {"enum": ["a", "b", "c"]}, "default": ["c", "a"]}, ["2", "0"]),
        ({"type": "array", "items": {"enum": ["a", "b"]}, "default": ["a", "z"]}, None),
        ({"type": "string"}, None),
    ],
)
def test_default_is_the_raw_form_value(prop, default):
    assert one_field(prop)["default"] == default


# -- describe_form: what is not renderable -----------------------------------------------------


@pytest.mark.parametrize(
    "prop, words",
    [
        ({"type": "object", "properties": {"street": {"type": "string"}}}, ["address", "object", "flat"]),
        ({"type": "array", "items": {"type": "string"}}, ["address", "list of free values"]),
        ({"type": "array"}, ["address", "list"]),
        ({"type": "array", "items": {"type": "object", "properties": {}}}, ["address", "properties"]),
        ({"$ref": "#/$defs/x"}, ["address", "$ref"]),
        ({"type": "null"}, ["address", "null"]),
        ({"type": ["string", "null"]}, ["address", "several types"]),
        ({"title": "No type"}, ["address", "no type"]),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, ["address", "alternatives"]),
        ({"enum": []}, ["address", "no options"]),
        ({"enum": [{"a": 1}]}, ["address", "objects or lists"]),
        ({"type": "integer", "enum": ["one"]}, ["address", "not of its own type"]),
        ({"type": "object", "enum": [1]}, ["address", "object"]),
        ({"type": "string", "allOf": [{"minLength": 1}]}, ["address", "allOf"]),
        (True, ["address", "schema object"]),
        ("string", ["address", "not valid JSON Schema"]),
        ({"type": "string", "minLength": -1}, ["address", "not valid JSON Schema"]),
    ],
)
def test_non_renderable_fields_are_named_in_the_reason(prop, words):
    text = reason(obj({"address": prop}))
    for word in words:
        assert word in text
    assert text.endswith(".")


def test_object_reason_reads_as_a_sentence():
    text = reason(obj({"address": {"type": "object"}}))
    assert text == 'Field "address" is an object; this form shows only flat fields.'


@pytest.mark.parametrize(
    "schema, word",
    [
        (None, "no schema"),
        ({"type": "string"}, "not an object"),
        ({"type": "object"}, "not an object"),
        ({"properties": {"a": {"type": "string"}}}, "not an object"),
        ({"type": "object", "properties": {}, "allOf": [{}]}, "allOf"),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}, '"b" is required'),
        ({"type": "object", "properties": {"a": {"type": "string", "minLength": -1}}}, "not valid JSON Schema"),
        ({"type": "object", "properties": {NON_FIELD: {"type": "string"}}}, NON_FIELD),
    ],
)
def test_non_renderable_roots(schema, word):
    assert word in reason(schema)


def test_a_credential_schema_is_never_renderable():
    text = reason(obj({"api_key": {"type": "string"}}))
    assert '"api_key"' in text and "never collects credentials" in text


def test_empty_properties_is_a_form_with_no_fields():
    assert describe_form(obj({})) == {"renderable": True, "fields": []}


def test_annotations_and_vendor_keywords_are_ignored():
    field = one_field({"type": "string", "examples": ["x"], "x-order": 3, "$comment": "c", "deprecated": False})
    assert field["widget"] == "text"


# -- values_from_form: conversion ------------------------------------------------------------


KITCHEN = obj(
    {
        "name": {"type": "string"},
        "when": {"type": "string", "format": "date-time"},
        "price": {"type": "number"},
        "count": {"type": "integer"},
        "ok": {"type": "boolean"},
        "env": {"type": "string", "enum": ["staging", "production"]},
        "size": {"oneOf": [{"const": 1, "title": "Small"}, {"const": 2, "title": "Large"}]},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}},
    }
)


def test_every_widget_converts_to_typed_json():
    raw = {
        "name": "Ada",
        "when": "2024-05-01T13:30:00Z",
        "price": "2.50",
        "count": "3",
        "ok": False,
        "env": "1",
        "size": "0",
        "tags": ["2", "0"],
    }
    data, errors = values_from_form(KITCHEN, raw)
    assert errors == {}
    assert data == {
        "name": "Ada",
        "when": "2024-05-01T13:30:00Z",
        "price": 2.5,
        "count": 3,
        "ok": False,
        "env": "production",
        "size": 1,
        "tags": ["c", "a"],
    }
    assert type(data["count"]) is int


@pytest.mark.parametrize(
    "text, value",
    [("3", 3), ("-3", -3), ("+3", 3), (" 3 ", 3), ("2.5", 2.5), ("1e3", 1000.0), (".5", 0.5), ("3.0", 3.0)],
)
def test_number_text(text, value):
    data, errors = values_from_form(obj({"x": {"type": "number"}}), {"x": text})
    assert errors == {} and data == {"x": value} and type(data["x"]) is type(value)


@pytest.mark.parametrize("text", ["abc", "1,5", "1_000", "nan", "inf", "1e999", "0x10", "3 4", "1" * 101])
def test_not_a_number(text):
    assert values_from_form(obj({"x": {"type": "number"}}), {"x": text}) == ({}, {"x": ["Enter a number."]})


@pytest.mark.parametrize("text, value", [("3", 3), ("3.0", 3), ("-0", 0), ("1e2", 100), ("12.500e1", 125)])
def test_integer_text_accepts_whole_numbers_written_any_way(text, value):
    data, errors = values_from_form(obj({"x": {"type": "integer"}}), {"x": text})
    assert errors == {} and data == {"x": value} and type(data["x"]) is int


@pytest.mark.parametrize("text", ["3.5", "abc", "1e-1", "nan", "1e999999"])
def test_integer_text_refuses_fractions_and_words(text):
    assert values_from_form(obj({"x": {"type": "integer"}}), {"x": text}) == ({}, {"x": ["Enter a whole number."]})


def test_numbers_sent_as_json_numbers_are_accepted_too():
    schema = obj({"x": {"type": "number"}, "n": {"type": "integer"}})
    assert values_from_form(schema, {"x": 1.5, "n": 4.0}) == ({"x": 1.5, "n": 4}, {})
    assert values_from_form(schema, {"x": True, "n": 4.5}) == (
        {},
        {"x": ["Enter a number."], "n": ["Enter a whole number."]},
    )


def test_empty_optional_fields_are_omitted():
    raw = {"name": "", "when": None, "price": "  ", "count": "", "env": "", "size": None, "tags": []}
    assert values_from_form(KITCHEN, raw) == ({}, {})
    assert values_from_form(KITCHEN, {}) == ({}, {})


def test_empty_required_fields_are_required():
    schema = obj(
        {
            "name": {"type": "string"},
            "env": {"enum": ["a"]},
            "tags": {"type": "array", "items": {"enum": ["a"]}},
            "ok": {"type": "boolean"},
        },
        ["name", "env", "tags", "ok"],
    )
    data, errors = values_from_form(schema, {"name": "", "env": "", "tags": []})
    assert data == {}
    assert errors == {name: ["This field is required."] for name in ("name", "env", "tags", "ok")}


def test_an_unticked_required_checkbox_is_an_answer():
    schema = obj({"ok": {"type": "boolean"}}, ["ok"])
    assert answer_errors(schema, {"ok": False}) == ({"ok": False}, {})


def test_text_is_kept_verbatim():
    data, _ = values_from_form(obj({"t": {"type": "string"}}), {"t": "  two  words "})
    assert data == {"t": "  two  words "}


@pytest.mark.parametrize(
    "prop, raw, message",
    [
        ({"type": "string"}, 5, "Enter text."),
        ({"type": "boolean"}, "true", "Tick or untick the box."),
        ({"enum": ["a", "b"]}, "2", "Choose one of: a, b."),
        ({"enum": ["a", "b"]}, "a", "Choose one of: a, b."),
        ({"enum": ["a", "b"]}, "01", "Choose one of: a, b."),
        ({"enum": ["a", "b"]}, 0, "Choose one of: a, b."),
        ({"type": "array", "items": {"enum": ["a", "b"]}}, "0", "Choose one of: a, b."),
        ({"type": "array", "items": {"enum": ["a", "b"]}}, ["0", "7"], "Choose one of: a, b."),
    ],
)
def test_unconvertible_raw_values(prop, raw, message):
    assert values_from_form(obj({"f": prop}), {"f": raw}) == ({}, {"f": [message]})


def test_unknown_raw_keys_are_ignored():
    schema = obj({"a": {"type": "string"}}, additionalProperties=False)
    assert answer_errors(schema, {"a": "x", "b": "y", NON_FIELD: "z"}) == ({"a": "x"}, {})


def test_raw_must_be_an_object_and_the_schema_renderable():
    assert values_from_form(KITCHEN, ["x"]) == (
        {},
        {NON_FIELD: ["The form values must be a JSON object of field values."]},
    )
    data, errors = answer_errors(obj({"a": {"type": "object"}}), {"a": "x"})
    assert data == {} and list(errors) == [NON_FIELD] and '"a"' in errors[NON_FIELD][0]


# -- answer_errors: conversion + validation, one dict ------------------------------------------


def test_conversion_and_schema_errors_are_merged_per_field():
    schema = obj(
        {
            "n": {"type": "integer", "minimum": 1},
            "m": {"type": "integer", "minimum": 1},
            "s": {"type": "string", "minLength": 3},
            "r": {"type": "string"},
        },
        ["r"],
    )
    data, errors = answer_errors(schema, {"n": "2.5", "m": "0", "s": "ab"})
    assert data == {"m": 0, "s": "ab"}
    assert errors == {
        "n": ["Enter a whole number."],
        "m": ["Enter a number greater than or equal to 1."],
        "s": ["Enter at least 3 characters."],
        "r": ["This field is required."],
    }


@pytest.mark.parametrize(
    "prop, raw, message",
    [
        ({"type": "string", "minLength": 1, "maxLength": 2}, "abc", "Enter at most 2 characters."),
        ({"type": "string", "minLength": 2}, "a", "Enter at least 2 characters."),
        ({"type": "string", "maxLength": 1}, "ab", "Enter at most 1 character."),
        ({"type": "string", "pattern": "^[a-z]+$"}, "A1", "Enter a value matching the pattern ^[a-z]+$."),
        ({"type": "number", "maximum": 10}, "10.5", "Enter a number less than or equal to 10."),
        ({"type": "number", "exclusiveMaximum": 10}, "10", "Enter a number less than 10."),
        ({"type": "number", "exclusiveMinimum": 0}, "0", "Enter a number greater than 0."),
        ({"type": "integer", "minimum": 2}, "1", "Enter a number greater than or equal to 2."),
        ({"type": "number", "multipleOf": 0.5}, "0.7", "Enter a multiple of 0.5."),
        ({"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 2}, ["0"], "Choose at least 2."),
        ({"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 1}, ["0", "1"], "Choose at most 1."),
        (
            {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True},
            ["0", "0"],
            "Choose each option only once.",
        ),
    ],
)
def test_each_constraint_has_a_clear_message(prop, raw, message):
    data, errors = answer_errors(obj({"f": prop}), {"f": raw})
    assert errors == {"f": [message]}


@pytest.mark.parametrize(
    "fmt, good, bad, message",
    [
        ("email", "ada@example.com", "ada-at-example", "Enter a valid email address."),
        (
            "uri",
            "https://example.com/a?b=c",
            "example.com/no-scheme",
            "Enter a full URL, such as https://example.com/.",
        ),
        ("date", "2024-02-29", "2023-02-29", "Enter a date as YYYY-MM-DD."),
        (
            "date-time",
            "2024-05-01T13:30:00+02:00",
            "2024-05-01T13:30",
            "Enter a date and time such as 2024-05-01T13:30:00Z.",
        ),
        ("date-time", "2024-05-01T13:30:00Z", "2024-05-01 noon", "Enter a date and time such as 2024-05-01T13:30:00Z."),
    ],
)
def test_formats_are_checked(fmt, good, bad, message):
    schema = obj({"f": {"type": "string", "format": fmt}})
    assert answer_errors(schema, {"f": good}) == ({"f": good}, {})
    assert answer_errors(schema, {"f": bad}) == ({"f": bad}, {"f": [message]})
    assert field_errors(schema, {"f": bad}) == {"f": [message]}


# -- field_errors (decisions.py calls it on JSON answers) ---------------------------------------


DEPLOY = obj({"env": {"type": "string", "title": "Environment", "enum": ["staging", "production"]}}, ["env"])


def test_field_errors_keeps_the_messages_decisions_relies_on():
    assert field_errors(DEPLOY, {"env": "staging"}) == {}
    assert field_errors(DEPLOY, {"env": "moon"}) == {"env": ["Choose one of: staging, production."]}
    assert field_errors(DEPLOY, {}) == {"env": ["This field is required."]}
    assert list(field_errors(DEPLOY, {"env": 7})) == ["env"]
    assert field_errors(DEPLOY, ["staging"]) == {NON_FIELD: ["The answer must be a JSON object of field values."]}


def test_choice_messages_use_the_labels_the_reviewer_saw():
    schema = obj(
        {
            "a": {"enum": ["stg", "prd"], "enumNames": ["Staging", "Production"]},
            "b": {"oneOf": [{"const": 1, "title": "One"}, {"const": 2, "title": "Two"}]},
            "c": {"type": "array", "items": {"anyOf": [{"const": "x", "title": "Ex"}]}},
        }
    )
    assert field_errors(schema, {"a": "x", "b": 3, "c": ["y"]}) == {
        "a": ["Choose one of: Staging, Production."],
        "b": ["Choose one of: One, Two."],
        "c": ["Choose one of: Ex."],
    }


@pytest.mark.parametrize(
    "value, message",
    [("x", "Enter a number."), (1.5, "Enter a whole number."), (1, "Enter text."), ("yes", "Enter true or false.")],
)
def test_type_messages(value, message):
    kind = {"Enter a number.": "number", "Enter a whole number.": "integer", "Enter text.": "string"}.get(
        message, "boolean"
    )
    assert field_errors(obj({"f": {"type": kind}}), {"f": value}) == {"f": [message]}


def test_field_errors_checks_formats_and_files_extra_fields_under_non_field():
    schema = obj({"mail": {"type": "string", "format": "email"}}, additionalProperties=False)
    assert field_errors(schema, {"mail": "nope", "x": 1, "y": 2}) == {
        NON_FIELD: ['Unexpected field "x".', 'Unexpected field "y".'],
        "mail": ["Enter a valid email address."],
    }


def test_an_invalid_schema_is_a_non_field_error():
    errors = field_errors({"type": "object", "properties": {"a": {"type": "nonsense"}}}, {"a": 1})
    assert list(errors) == [NON_FIELD] and "not valid JSON Schema" in errors[NON_FIELD][0]
    assert list(field_errors("nope", {})) == [NON_FIELD]
    errors = field_errors({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}, {"a": 1})
    assert list(errors) == [NON_FIELD]


def test_request_schema():
    assert request_schema({"schema": DEPLOY}) is DEPLOY
    assert request_schema({"schema": "x"}) is None
    assert request_schema(None) is None
    assert request_schema(["schema"]) is None


# -- credentials (§10 trust boundary) -----------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "password",
        "Password",
        "passwd",
        "password2",
        "new_password",
        "userPassword",
        "passphrase",
        "secret",
        "client_secret",
        "clientSecret",
        "token",
        "auth_token",
        "authToken",
        "authtoken",
        "access-token",
        "api_key",
        "apiKey",
        "APIKey",
        "api-key",
        "apikey",
        "X-API-Key",
        "private_key",
        "privateKey",
        "access_key",
        "ssh_key",
        "credential",
        "credentials",
        "aws_credentials",
        "db.password",
    ],
)
def test_credential_names(name):
    assert looks_like_credential(name)
    text = credential_refusal("input", {"schema": obj({name: {"type": "string"}})})
    assert f'Field "{name}"' in text
    assert "never collects credentials" in text and "decline" in text


@pytest.mark.parametrize(
    "name",
    [
        "tokenizer",
        "tokens_used",
        "max_tokens",
        "token_count",
        "tokenLimit",
        "secretary",
        "keyboard",
        "passenger",
        "monkey",
        "key",
        "sort_key",
        "api_url",
        "username",
        "email",
        "passport_number",
        "compass",
    ],
)
def test_names_that_are_not_credentials(name):
    assert not looks_like_credential(name)
    assert credential_refusal("input", {"schema": obj({name: {"type": "string"}})}) is None


def test_a_credential_title_is_refused():
    schema = obj({"value": {"type": "string", "title": "Your API key"}})
    assert '"value"' in credential_refusal("input", {"schema": schema})


def test_password_format_and_write_only_are_refused():
    pw = credential_refusal("input", {"schema": obj({"pin": {"type": "string", "format": "password"}})})
    assert 'Field "pin"' in pw and 'format "password"' in pw
    wo = credential_refusal("input", {"schema": obj({"code": {"type": "string", "writeOnly": True}})})
    assert 'Field "code"' in wo and "writeOnly" in wo
    assert credential_refusal("input", {"schema": obj({"code": {"type": "string", "writeOnly": False}})}) is None


def test_credentials_nested_anywhere_in_the_schema_are_refused():
    nested = obj(
        {"login": {"type": "object", "properties": {"user": {"type": "string"}, "secret": {"type": "string"}}}}
    )
    assert 'Field "login.secret"' in credential_refusal("input", {"schema": nested})
    in_items = obj({"keys": {"type": "array", "items": {"type": "string", "format": "password"}}})
    assert 'Field "keys"' in credential_refusal("input", {"schema": in_items})
    in_defs = {**obj({}), "$defs": {"x": {"type": "object", "properties": {"token": {"type": "string"}}}}}
    assert '"token"' in credential_refusal("input", {"schema": in_defs})


def test_ordinary_input_and_other_kinds_are_not_refused():
    assert credential_refusal("input", {"schema": DEPLOY}) is None
    assert credential_refusal("input", {}) is None
    assert credential_refusal("input", None) is None
    secretive = {"schema": obj({"password": {"type": "string"}}), "questions": [{"question": "Your password?"}]}
    assert credential_refusal("approval", secretive) is None
    assert credential_refusal("authorization", secretive) is None


@pytest.mark.parametrize(
    "question",
    [
        {"question": "What is your password?"},
        {"question": "Paste the API key here"},
        {"question": "Which one?", "header": "GitHub token"},
        {"question": "Enter your client secret", "options": ["a"]},
    ],
)
def test_credential_questions_are_refused(question):
    data = {"questions": [{"question": "Proceed?", "options": ["yes", "no"]}, question]}
    text = credential_refusal("question", data)
    assert text.startswith("Question 2 (") and "never collects credentials" in text


@pytest.mark.parametrize(
    "question",
    [
        {"question": "How many tokens may the summary use?"},
        {"question": "What is the token limit?"},
        {"question": "Which keyboard layout?", "header": "Setup"},
        {"question": "Authenticate with?", "options": ["password", "ssh key"]},  # options are choices, not asks
    ],
)
def test_ordinary_questions_are_not_refused(question):
    assert credential_refusal("question", {"questions": [question]}) is None


def test_malformed_question_data_is_not_refused():
    assert credential_refusal("question", {"questions": ["nope", None]}) is None
    assert credential_refusal("question", {}) is None
    assert credential_refusal("question", None) is None


# -- the builtin question tool's answers ---------------------------------------------------------


QUESTIONS = {
    "questions": [
        {"question": "Colour?", "options": ["red", "blue"]},
        {"question": "Toppings?", "options": ["cheese", "ham"], "multiple": True},
        {"question": "Anything else?"},
    ]
}


def test_good_question_answers():
    assert question_answer_errors(QUESTIONS, {"answers": [["red"], ["cheese", "ham"], ["no"]]}) == {}
    # "Other": free text beside the options
    assert question_answer_errors(QUESTIONS, {"answers": [["green"], ["pineapple"], ["x"]]}) == {}


def test_wrong_number_of_answers():
    assert question_answer_errors(QUESTIONS, {"answers": [["red"]]}) == {
        "q1": ["Answer this question."],
        "q2": ["Answer this question."],
    }
    too_many = question_answer_errors(QUESTIONS, {"answers": [["red"], ["ham"], ["x"], ["y"]]})
    assert list(too_many) == [NON_FIELD] and "3 questions but 4 answers" in too_many[NON_FIELD][0]


def test_single_and_multiple_questions():
    assert question_answer_errors(QUESTIONS, {"answers": [["red", "blue"], ["ham"], ["x"]]}) == {
        "q0": ["Choose only one answer."]
    }
    assert question_answer_errors(QUESTIONS, {"answers": [["red"], [], ["x"]]}) == {
        "q1": ["Choose at least one answer."]
    }
    assert question_answer_errors(QUESTIONS, {"answers": [[], ["ham"], ["x"]]}) == {"q0": ["Answer this question."]}
    assert question_answer_errors(QUESTIONS, {"answers": [["red"], ["ham", "ham"], ["x"]]}) == {
        "q1": ["Choose each answer only once."]
    }


def test_empty_and_non_text_answers():
    assert question_answer_errors(QUESTIONS, {"answers": [[""], ["ham"], ["  "]]}) == {
        "q0": ["An answer cannot be empty."],
        "q2": ["An answer cannot be empty."],
    }
    assert question_answer_errors(QUESTIONS, {"answers": ["red", [1], ["x"]]}) == {
        "q0": ["The answer must be a list of texts."],
        "q1": ["The answer must be a list of texts."],
    }


@pytest.mark.parametrize("answer", [None, [], {"answers": "red"}, {"answer": [["red"]]}, ["red"]])
def test_answer_shape(answer):
    errors = question_answer_errors(QUESTIONS, answer)
    assert list(errors) == [NON_FIELD] and '{"answers"' in errors[NON_FIELD][0]


def test_extra_keys_beside_answers_are_flagged():
    errors = question_answer_errors(QUESTIONS, {"answers": [["red"], ["ham"], ["x"]], "note": 1})
    assert list(errors) == [NON_FIELD] and '"note"' in errors[NON_FIELD][0]


def test_no_questions_wants_no_answers():
    assert question_answer_errors({"questions": []}, {"answers": []}) == {}
    assert question_answer_errors({}, {"answers": []}) == {}


# -- editable approvals ---------------------------------------------------------------------------


TRANSFER_SCHEMA = {
    "type": "object",
    "properties": {
        "amount": {"type": "number", "minimum": 0, "title": "Amount"},
        "currency": {"type": "string", "enum": ["EUR", "USD"]},
        "memo": {"type": "string"},
    },
    "required": ["amount", "currency"],
}


def test_editable_takes_property_schemas_from_the_tool_and_defaults_from_args():
    schema = editable_schema(
        {"editable": ["amount", "currency"]}, TRANSFER_SCHEMA, {"amount": 12.5, "currency": "EUR", "memo": "x"}
    )
    assert schema == {
        "type": "object",
        "properties": {
            "amount": {"type": "number", "minimum": 0, "title": "Amount", "default": 12.5},
            "currency": {"type": "string", "enum": ["EUR", "USD"], "default": "EUR"},
        },
        "required": ["amount", "currency"],
    }
    assert TRANSFER_SCHEMA["properties"]["amount"] == {"type": "number", "minimum": 0, "title": "Amount"}  # not mutated
    fields = describe_form(schema)["fields"]
    assert [(f["name"], f["default"]) for f in fields] == [("amount", "12.5"), ("currency", "0")]


def test_editable_infers_schemas_from_values_when_the_tool_has_none():
    args = {"n": 3, "x": 1.5, "s": "hi", "b": False, "l": [1], "o": {}, "z": None}
    schema = editable_schema({"editable": list(args)}, None, args)
    assert schema["properties"] == {
        "n": {"type": "integer", "default": 3},
        "x": {"type": "number", "default": 1.5},
        "s": {"type": "string", "default": "hi"},
        "b": {"type": "boolean", "default": False},
        "l": {"type": "array", "default": [1]},
        "o": {"type": "object", "default": {}},
        "z": {"default": None},
    }
    assert "required" not in schema
    trimmed = editable_schema({"editable": ["n", "s", "b"]}, {}, args)
    assert describe_form(trimmed)["renderable"] is True
    assert describe_form(schema)["renderable"] is False  # a list of free values is not a flat field


def test_editable_declared_but_unset_arg_keeps_the_tool_default():
    tool = {"type": "object", "properties": {"memo": {"type": "string", "default": "none"}}}
    assert editable_schema({"editable": ["memo", "ghost"]}, tool, {}) == {
        "type": "object",
        "properties": {"memo": {"type": "string", "default": "none"}},
    }


def test_editable_with_an_explicit_schema_and_values():
    given = {
        "schema": obj({"env": {"enum": ["a", "b"]}, "n": {"type": "integer"}}, ["env"]),
        "values": {"env": "b", "extra": 1},
    }
    schema = editable_schema({"args": given, "editable": ["ignored"]}, TRANSFER_SCHEMA, {"amount": 1})
    assert schema == obj({"env": {"enum": ["a", "b"], "default": "b"}, "n": {"type": "integer"}}, ["env"])
    assert "default" not in given["schema"]["properties"]["env"]  # not mutated
    assert editable_schema({"args": {"schema": obj({"a": {"type": "string"}})}}, None, {}) == obj(
        {"a": {"type": "string"}}
    )


@pytest.mark.parametrize(
    "request_data",
    [
        {},
        None,
        {"editable": []},
        {"editable": "amount"},
        {"editable": [1, None]},
        {"args": {"values": {}}},
        {"editable": ["ghost"]},
    ],
)
def test_nothing_editable_is_none(request_data):
    assert editable_schema(request_data, TRANSFER_SCHEMA, {"amount": 1}) is None


# -- odds and ends ---------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["٣", "３", "²"])
def test_only_ascii_digits_are_numbers_or_keys(text):
    schema = obj({"n": {"type": "number"}, "i": {"type": "integer"}, "c": {"enum": ["a", "b", "c", "d"]}})
    data, errors = values_from_form(schema, {"n": text, "i": text, "c": text})
    assert data == {} and set(errors) == {"n", "i", "c"}


def test_errors_come_in_form_order_with_the_whole_answer_first():
    schema = obj(
        {"zeta": {"type": "string"}, "alpha": {"type": "integer"}, "mid": {"type": "string", "format": "email"}},
        ["zeta"],
        additionalProperties=False,
    )
    assert list(field_errors(schema, {"alpha": "x", "mid": "no", "extra": 1})) == [NON_FIELD, "zeta", "alpha", "mid"]
    _, errors = answer_errors(schema, {"alpha": "x", "mid": "no"})
    assert list(errors) == ["zeta", "alpha", "mid"]


def test_describe_form_does_not_change_the_schema():
    import copy

    schema = obj(
        {"tags": {"type": "array", "items": {"enum": ["a"]}, "default": ["a"]}, "n": {"type": "integer", "default": 3}}
    )
    before = copy.deepcopy(schema)
    describe_form(schema)
    answer_errors(schema, {"tags": ["0"], "n": "4"})
    assert schema == before


@pytest.mark.parametrize(
    "prop, bounds",
    [
        ({"type": "number", "exclusiveMinimum": 0}, (0, None, True, False)),
        ({"type": "number", "minimum": 0}, (0, None, False, False)),
        ({"type": "number", "exclusiveMinimum": 0, "maximum": 10}, (0, 10, True, False)),
        ({"type": "number", "minimum": 1, "exclusiveMinimum": 0, "exclusiveMaximum": 5}, (1, 5, False, True)),
        # An integer's exclusive bound becomes the nearest whole number inside it: "at least 1".
        ({"type": "integer", "exclusiveMinimum": 0}, (1, None, False, False)),
    ],
)
def test_a_bound_that_is_itself_refused_is_marked_exclusive(prop, bounds):
    """Before: exclusiveMinimum 0 was described as min 0 only, and the form said "of at least 0"."""
    field = one_field(prop)
    assert (field["min"], field["max"], field["min_exclusive"], field["max_exclusive"]) == bounds
