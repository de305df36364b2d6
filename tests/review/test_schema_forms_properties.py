"""Property tests: for any flat renderable schema, the form path (describe_form -> the
browser's raw values -> answer_errors) agrees with jsonschema on every value a browser
can express, and gives that value back."""

from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, FormatChecker

from approvals.review.forms import NON_FIELD, answer_errors, describe_form, values_from_form

SETTINGS = settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
LIGHT = settings(SETTINGS, max_examples=100)  # for the properties that only look at the form

NAMES = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
PATTERNS = ["^[a-z]+$", "^\\d{3}$", "^[A-Z]", "b", "^$"]
FORMATS = [None, "email", "uri", "date", "date-time"]
# Strings that exercise the patterns and formats, good and bad.
SAMPLES = [
    "",
    "abc",
    "ABC",
    "Abc",
    "123",
    "1234",
    "b",
    "a1",
    " ",
    "x y",
    "ada@example.com",
    "a.b+c@mail.example.org",
    "ada-at-example",
    "@example.com",
    "ada@",
    "https://example.com/a?b=c",
    "mailto:ada@example.com",
    "urn:isbn:0451450523",
    "example.com/x",
    "not a uri",
    "/relative",
    "2024-02-29",
    "2023-02-29",
    "2024-13-01",
    "24-1-1",
    "2024-05-01T13:30:00Z",
    "2024-05-01T13:30:00.5+02:00",
    "2024-05-01T13:30",
    "2024-05-01 13:30:00Z",
    "2024-05-01T25:00:00Z",
]
BOUNDS = [-5, -1.5, 0, 0.5, 2, 3, 7.25, 10]
TEXT_WIDGETS = ("text", "email", "url", "date", "datetime")
WIDGET_OF_TYPE = {"number": "number", "integer": "integer", "boolean": "checkbox"}
FORMAT_WIDGET = {None: "text", "email": "email", "uri": "url", "date": "date", "date-time": "datetime"}
ODD_VALUES = st.sampled_from(["x", 1, 2.5, True, None, [], {}])  # things some widgets cannot express

CANNOT = object()  # to_raw's answer for a value no browser form could send


# -- the browser, as a test helper -----------------------------------------------------------


def choice_values(prop):
    """The values behind a select/multiselect's choice keys, in key order."""
    source = prop["items"] if prop.get("type") == "array" else prop
    if "enum" in source:
        return source["enum"]
    return [o["const"] for o in source.get("oneOf", source.get("anyOf", []))]


def same(a, b):
    """JSON equality: true is not 1, 1 is 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if is_number(a) and is_number(b):
        return a == b
    return type(a) is type(b) and a == b


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def to_raw(field, prop, value):
    """Encode ``value`` the way the browser sends it for this field, or CANNOT."""
    widget = field["widget"]
    if widget in TEXT_WIDGETS:
        return value if isinstance(value, str) else CANNOT
    if widget in ("number", "integer"):
        return repr(value) if is_number(value) else CANNOT
    if widget == "checkbox":
        return value if isinstance(value, bool) else CANNOT
    values = choice_values(prop)

    def key(v):
        return next((str(i) for i, c in enumerate(values) if same(c, v)), CANNOT)

    if widget == "select":
        return key(value)
    if widget == "multiselect":
        if not isinstance(value, list):
            return CANNOT
        keys = [key(v) for v in value]
        return CANNOT if CANNOT in keys else keys
    raise AssertionError(widget)


def expressible(fields, value):
    """What a browser can say of ``value``: an empty text box or an empty multi-select is "not given".

    (An empty string that is one of a select's options is a real choice.)
    """
    widgets = {f["name"]: f["widget"] for f in fields}

    def empty(name, v):
        return (widgets[name] in TEXT_WIDGETS and v == "") or (widgets[name] == "multiselect" and v == [])

    return {k: v for k, v in value.items() if not empty(k, v)}


def normal(value):
    """A form of a JSON value where == is JSON equality (bools apart from numbers)."""
    if isinstance(value, bool):
        return ("bool", value)
    if is_number(value):
        return ("number", value)
    if isinstance(value, list):
        return ("list", tuple(normal(v) for v in value))
    if isinstance(value, dict):
        return ("object", tuple(sorted((k, normal(v)) for k, v in value.items())))
    return (type(value).__name__, value)


def validator(schema):
    return Draft202012Validator(schema, format_checker=FormatChecker())


# -- strategies --------------------------------------------------------------------------------


def text_values():
    return st.one_of(st.sampled_from(SAMPLES), st.text(max_size=10))


def number_values(integer):
    floats = st.floats(-12, 12, allow_nan=False, allow_infinity=False)
    whole_floats = st.integers(-12, 12).map(float)
    return st.one_of(st.integers(-12, 12), floats, whole_floats, st.sampled_from(BOUNDS))


@st.composite
def maybe_bounds(draw, prop, low_key, high_key, bound):
    if draw(st.booleans()):
        prop[low_key] = draw(bound)
    if draw(st.booleans()):
        prop[high_key] = draw(bound)


@st.composite
def string_field(draw):
    prop = {"type": "string"}
    fmt = draw(st.sampled_from(FORMATS))
    if fmt:
        prop["format"] = fmt
    if draw(st.booleans()):
        prop["minLength"] = draw(st.integers(0, 4))
    if draw(st.booleans()):
        prop["maxLength"] = draw(st.integers(prop.get("minLength", 0), 10))
    if draw(st.integers(0, 3)) == 0:
        prop["pattern"] = draw(st.sampled_from(PATTERNS))
    return prop, text_values()


@st.composite
def number_field(draw):
    kind = draw(st.sampled_from(["number", "integer"]))
    prop = {"type": kind}
    bound = st.sampled_from(BOUNDS)
    draw(maybe_bounds(prop, "minimum", "maximum", bound))
    draw(maybe_bounds(prop, "exclusiveMinimum", "exclusiveMaximum", bound))
    return prop, number_values(kind == "integer")


def boolean_field():
    return st.just(({"type": "boolean"}, st.booleans()))


@st.composite
def choices(draw):
    """A choice list (strings or ints) in one of the MCP spellings; returns (schema, values, json type)."""
    if draw(st.booleans()):
        values = draw(st.lists(st.text(max_size=6), min_size=1, max_size=5, unique=True))
        kind = "string"
    else:
        values = draw(st.lists(st.integers(-3, 20), min_size=1, max_size=5, unique=True))
        kind = "integer"
    spelling = draw(st.sampled_from(["enum", "enumNames", "oneOf", "anyOf"]))
    if spelling == "enum":
        schema = {"enum": values}
    elif spelling == "enumNames":
        schema = {"enum": values, "enumNames": [f"Choice {v}" for v in values]}
    else:
        schema = {spelling: [{"const": v, "title": f"Choice {v}"} for v in values]}
    if draw(st.booleans()):
        schema["type"] = kind
    return schema, values


@st.composite
def select_field(draw):
    prop, values = draw(choices())
    return prop, st.sampled_from(values)


@st.composite
def multiselect_field(draw):
    items, values = draw(choices())
    prop = {"type": "array", "items": items}
    if draw(st.booleans()):
        prop["minItems"] = draw(st.integers(0, 2))
    if draw(st.booleans()):
        prop["maxItems"] = draw(st.integers(prop.get("minItems", 0), 3))
    if draw(st.booleans()):
        prop["uniqueItems"] = draw(st.booleans())
    return prop, st.lists(st.sampled_from(values), max_size=4)


FIELD_KINDS = [string_field, number_field, boolean_field, select_field, multiselect_field]


@st.composite
def form_schemas(draw):
    """A random flat renderable schema, and a strategy of candidate values for each field."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=0, max_size=5, unique=True))
    properties, values = {}, {}
    for name in names:
        prop, value_strategy = draw(st.sampled_from(FIELD_KINDS).flatmap(lambda kind: kind()))
        # Now and then a value from outside what the widget can express.
        values[name] = st.integers(0, 9).flatmap(lambda n, s=value_strategy: ODD_VALUES if n == 0 else s)
        if draw(st.integers(0, 3)) == 0:
            prop["title"] = name.title()
        if draw(st.integers(0, 3)) == 0:
            prop["default"] = draw(values[name])
        properties[name] = prop
    schema = {"type": "object", "properties": properties}
    required = [n for n in names if draw(st.booleans())]
    if required or draw(st.booleans()):
        schema["required"] = required
    if draw(st.integers(0, 3)) == 0:
        schema["additionalProperties"] = False
    return schema, values


@st.composite
def schema_and_value(draw):
    schema, values = draw(form_schemas())
    value = {name: draw(strategy) for name, strategy in values.items() if draw(st.integers(0, 4)) > 0}
    return schema, value


# -- properties ---------------------------------------------------------------------------------


@SETTINGS
@given(schema_and_value(), st.booleans())
def test_form_path_agrees_with_jsonschema(case, with_unknown_key):
    schema, value = case
    form = describe_form(schema)
    assert form["renderable"] is True, form
    properties = schema["properties"]
    raw = {}
    for field in form["fields"]:
        name = field["name"]
        if name in value:
            encoded = to_raw(field, properties[name], value[name])
            assume(encoded is not CANNOT)
            raw[name] = encoded
    if with_unknown_key:
        raw["not_a_field"] = "ignored"

    sent = expressible(form["fields"], value)
    verdict = validator(schema).is_valid(sent)
    data, errors = answer_errors(schema, raw)
    event("accepted" if verdict else "refused")

    assert (errors == {}) is verdict, (schema, value, raw, errors)
    assert set(errors) <= set(properties)  # every error lands on a field
    assert all(messages and all(isinstance(m, str) and m for m in messages) for messages in errors.values())
    if verdict:
        assert normal(data) == normal(sent), (data, sent)


@LIGHT
@given(form_schemas())
def test_every_generated_schema_is_renderable_with_one_field_per_property(case):
    schema, _ = case
    form = describe_form(schema)
    assert form["renderable"] is True, form
    fields = form["fields"]
    properties = schema["properties"]
    assert [f["name"] for f in fields] == list(properties)
    required = set(schema.get("required", []))
    for field in fields:
        prop = properties[field["name"]]
        assert field["required"] is (field["name"] in required)
        assert field["label"] == prop.get("title", field["name"])
        if prop.get("type") == "array":
            expected = "multiselect"
        elif any(k in prop for k in ("enum", "oneOf", "anyOf")):
            expected = "select"
        elif prop["type"] == "string":
            expected = FORMAT_WIDGET[prop.get("format")]
        else:
            expected = WIDGET_OF_TYPE[prop["type"]]
        assert field["widget"] == expected
        if expected in ("select", "multiselect"):
            assert [c["key"] for c in field["choices"]] == [str(i) for i in range(len(choice_values(prop)))]
        assert field["step"] == {"integer": "1", "number": "any"}.get(expected)
        assert field["min_length"] == prop.get("minLength")
        assert field["max_length"] == prop.get("maxLength")
        assert field["pattern"] == prop.get("pattern")


@LIGHT
@given(form_schemas())
def test_defaults_round_trip_through_the_form(case):
    schema, _ = case
    fields = describe_form(schema)["fields"]
    properties = schema["properties"]
    raw = {f["name"]: f["default"] for f in fields if f["default"] is not None}
    data, errors = values_from_form(schema, raw)
    assert NON_FIELD not in errors
    for field in fields:
        name, prop = field["name"], properties[field["name"]]
        if "default" not in prop or to_raw(field, prop, prop["default"]) is CANNOT:
            continue
        if field["widget"] == "integer" and not float(prop["default"]).is_integer():
            assert field["default"] == repr(prop["default"])  # shown as given; the server will refuse it
            continue
        assert field["default"] is not None
        if (field["widget"] in TEXT_WIDGETS and prop["default"] == "") or (
            field["widget"] == "multiselect" and prop["default"] == []
        ):
            continue
        assert normal(data[name]) == normal(prop["default"])
