"""The OpenAPI document: it lists every /api/v1/ route, and schemathesis holds the live API to it.

The fuzzing runs against a real daphne (the ``live`` fixture): generated calls,
valid and invalid, authenticated with a bearer token, must never get a 5xx and
must get the status codes, content types and bodies the document promises.
"""

import io
import json
import re
import sys

import pytest
import schemathesis
from django.core.management import call_command
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import positive_data_acceptance

from approvals.review import intake
from approvals.web.api import document
from tests.support.api_routes import api_routes, documented_path

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

MAX_FUZZ_WAIT = 2  # seconds a generated long-poll may hold


def test_the_document_lists_every_api_route():
    assert sorted(documented_path(p) for p in api_routes()) == sorted(document()["paths"])


def test_each_route_accepts_exactly_the_documented_methods(live):
    paths = document()["paths"]
    for route in api_routes():
        path = documented_path(route)
        url = "/api/v1" + path.replace("{run_id}", "424242").replace("{request_id}", "no-such-request")
        for method in ("get", "post", "put", "patch", "delete"):
            status, _ = live.call(method.upper(), url, {} if method != "get" else None, token=live.host_token)
            assert (status != 405) == (method in paths[path]), (method, path, status)


def test_the_documents_not_blank_pattern_is_the_servers_own_idea_of_blank():
    # Found by schemathesis: kind "\x85" matched the document's \S (ECMA-262) and the server refused it as blank.
    not_blank = re.compile(intake.NOT_BLANK_PATTERN)
    disagree = [hex(c) for c in range(sys.maxunicode + 1) if (not_blank.search(chr(c)) is None) != chr(c).isspace()]
    assert disagree == []
    kind = document()["components"]["schemas"]["NewRequest"]["properties"]["kind"]
    assert kind["pattern"] == intake.NOT_BLANK_PATTERN


def test_the_document_is_served_publicly(client):
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    body = response.json()
    assert body["openapi"] == "3.1.0"
    assert body["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "An API token. Bearer calls need no CSRF token.",
    }


def test_the_command_prints_the_document_the_api_serves(client):
    # The docs site builds its API reference from this output. First: the command closes the toolkit it built.
    printed = io.StringIO()
    call_command("openapi_document", stdout=printed)
    served = client.get("/api/v1/openapi.json").json()
    assert json.loads(printed.getvalue()) == served
    assert "deploy" in served["components"]["schemas"]["NewRun"]["properties"]["tool"]["enum"]


def test_every_refusal_the_document_promises_is_the_consoles_error_body_never_a_422():
    for path, methods in document()["paths"].items():
        for method, operation in methods.items():
            assert "422" not in operation["responses"], (method, path)
            for status, reply in operation["responses"].items():
                if status.startswith(("4", "5")):
                    schema = reply["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/Error"}, (method, path, status)


def test_wire_keys_keep_their_wire_names_in_the_document():
    schemas = document()["components"]["schemas"]
    assert "expiresAt" in schemas["RequestView"]["properties"]
    assert "expiresAt" in schemas["NewRequest"]["properties"]
    assert schemas["Decision"]["properties"]["changes"]["items"] == {"$ref": "#/components/schemas/Change"}
    assert set(schemas["Change"]["properties"]) == {"field", "from", "to"}


@pytest.fixture(scope="module")
def live_schema(live):
    schema = schemathesis.openapi.from_url(f"{live.base_url}/api/v1/openapi.json")
    # The document's description refuses U+0000 in any string (bad_json); JSON Schema cannot say it per field.
    schema.config.generation.update(allow_x00=False)
    return schema


def _cases():
    """Each operation with valid data, and, when it takes any input, with invalid data too."""
    for path, methods in document()["paths"].items():
        for method, operation in methods.items():
            takes_input = bool(operation.get("parameters") or operation.get("requestBody"))
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)[: 2 if takes_input else 1]:
                yield pytest.param(path, method, mode, id=f"{method.upper()} {path} {mode}")


@pytest.mark.parametrize("path, method, mode", list(_cases()))
def test_the_live_api_keeps_to_its_document(live, live_schema, path, method, mode):
    """Up to 30 generated calls per operation and mode; every check schemathesis has, none turned off."""
    operation = live_schema[path][method.upper()]
    headers = {"Authorization": f"Bearer {live.host_token}"}
    excluded = []
    if (path, method) == ("/runs", "post"):
        # A run's input is judged by its tool or model too (the scripted model's prompt grammar, an
        # agent's model name): schema-valid is not always startable, and the 400 says why.
        excluded.append(positive_data_acceptance)
    if path in ("/requests", "/requests/bulk"):
        # 'after' is a cursor this console made: a string of the right shape that it did not make is
        # refused with a 400 that says to pass the 'next' of the page before. 'policy' names a policy
        # of this console: a well-formed name it lacks is a 400 listing the ones it has.
        excluded.append(positive_data_acceptance)
    if (path, method) == ("/requests/bulk", "post"):
        # 'ids' or 'filter' (or both), and a filter that matches something: a schema-valid body that
        # is neither is refused with a 400 that says what to send.
        excluded.append(positive_data_acceptance)
    if (path, method) == ("/requests/{request_id}/hand", "post"):
        # 'to' names a user or group of this console: a well-formed name it does not have is a 400 naming it.
        excluded.append(positive_data_acceptance)

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=30,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],  # no shrinking: report the failure as found, fast
        suppress_health_check=list(HealthCheck),
    )
    def keeps_to_the_document(case):
        wait = (case.query or {}).get("wait")
        if isinstance(wait, (int, float)) and not isinstance(wait, bool) and wait > MAX_FUZZ_WAIT:
            # Schemathesis reuses ids from earlier responses, so a generated wait of up to 60 s may
            # land on a request that is open and hold the call that long: keep the fuzzing bounded.
            case.query["wait"] = MAX_FUZZ_WAIT
        case.call_and_validate(headers=headers, excluded_checks=excluded, timeout=30)

    keeps_to_the_document()
