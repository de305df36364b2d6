"""A run's args are checked against its tool's ``input_schema`` before the run starts.

``POST /api/v1/runs`` (and so the dashboard's Start-a-run form) refuses args that miss a
required field, have the wrong type, leave an enum or cross a bound: a 400 whose
``field_errors`` names each argument, as an answer's field errors do, and nothing stored.
The demo tools declare their defaults, so a form opens with them.
"""

import pytest
from asgiref.sync import sync_to_async
from toolnexus import define_tool

from approvals import shapes
from approvals.models import AuditEvent, Request, Run, TranscriptEntry
from approvals.review.forms import NON_FIELD
from approvals.runs import runner, toolkit
from approvals.runs.services import RunInputError, tool_args_errors, validate_run_input
from tests.support.api_client import post_json

pytestmark = pytest.mark.django_db(transaction=True)

TRANSFER_SCHEMA = {
    "type": "object",
    "properties": {
        "account": {"type": "string", "minLength": 3},
        "amount": {"type": "number", "exclusiveMinimum": 0, "maximum": 1000},
        "currency": {"type": "string", "enum": ["EUR", "USD"], "default": "EUR"},
        "copies": {"type": "integer", "minimum": 1},
        "tags": {"type": "array", "items": {"type": "string"}},
        "meta": {"type": "object"},
    },
    "required": ["account", "amount"],
    "additionalProperties": False,
}


def transfer_execute(account, amount, currency="EUR", copies=1, tags=None, meta=None, ctx=None):
    return f"moved {amount} {currency} to {account}"


transfer = define_tool(transfer_execute, name="transfer", input_schema=TRANSFER_SCHEMA)


@pytest.fixture(autouse=True)
def _stop_leftover_runs(stop_leftover_runs):
    """Every test here cancels what it left running."""


@pytest.fixture
def with_transfer(extra_tools):
    extra_tools(transfer)


async def nothing_stored():
    counts = [await model.objects.acount() for model in (Run, AuditEvent, Request, TranscriptEntry)]
    return counts == [0, 0, 0, 0]


def refused(args, schemas=None):
    with pytest.raises(RunInputError) as caught:
        validate_run_input("transfer", args, None, schemas or {"transfer": TRANSFER_SCHEMA})
    return caught.value


# -- the check itself ----------------------------------------------------------------------------


def test_a_missing_required_argument_is_named():
    error = refused({"account": "DE-1"})
    assert error.field_errors == {"amount": ["This field is required."]}
    assert "amount: This field is required." in str(error)


def test_a_wrong_type_is_named_with_what_to_enter():
    assert refused({"account": "DE-1", "amount": "lots"}).field_errors == {"amount": ["Enter a number."]}
    assert refused({"account": "DE-1", "amount": 5, "copies": 1.5}).field_errors == {
        "copies": ["Enter a whole number."]
    }
    assert refused({"account": "DE-1", "amount": 5, "tags": "a,b"}).field_errors == {"tags": ["Choose from the list."]}
    assert refused({"account": "DE-1", "amount": 5, "meta": [1]}).field_errors == {"meta": ["Enter a group of fields."]}


def test_a_value_outside_the_enum_lists_the_choices():
    assert refused({"account": "DE-1", "amount": 5, "currency": "GBP"}).field_errors == {
        "currency": ["Choose one of: EUR, USD."]
    }


def test_bounds_are_checked():
    assert refused({"account": "DE-1", "amount": 0}).field_errors == {"amount": ["Enter a number greater than 0."]}
    assert refused({"account": "DE-1", "amount": 5000}).field_errors == {
        "amount": ["Enter a number less than or equal to 1000."]
    }
    assert refused({"account": "DE", "amount": 5}).field_errors == {"account": ["Enter at least 3 characters."]}


def test_every_faulty_argument_is_named_at_once_and_an_unknown_one_is_said():
    error = refused({"amount": True, "currency": "GBP", "colour": "red"})
    assert error.field_errors == {
        NON_FIELD: ['Unexpected field "colour".'],
        "account": ["This field is required."],
        "amount": ["Enter a number."],
        "currency": ["Choose one of: EUR, USD."],
    }


def test_args_that_fit_pass_unchanged():
    args = {"account": "DE-1", "amount": 12.5, "tags": ["x"], "meta": {"k": 1}}
    assert validate_run_input("transfer", args, 5, {"transfer": TRANSFER_SCHEMA}) == ("transfer", args, 5.0)


def test_a_tool_whose_schema_is_not_json_schema_is_not_judged_by_it():
    # The caller cannot fix the tool's schema; the tool judges its own args, as before the check existed.
    broken = {"type": "object", "properties": {"amount": {"type": "money"}}}
    assert tool_args_errors(broken, {"amount": "lots"}) == {}
    assert tool_args_errors(None, {"anything": 1}) == {}


# -- POST /api/v1/runs ------------------------------------------------------------------------------


async def test_the_api_refuses_bad_args_with_field_errors_and_stores_nothing(api, with_transfer):  # noqa: F811
    response = await post_json(api, "/api/v1/runs", {"tool": "transfer", "args": {"account": "DE-1", "amount": "x"}})
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "invalid"
    assert body["field_errors"] == {"amount": ["Enter a number."]}
    assert "transfer" in body["message"] and "amount: Enter a number." in body["message"]
    assert await nothing_stored()


async def test_the_api_refuses_a_missing_required_argument(api, with_transfer):  # noqa: F811
    response = await post_json(api, "/api/v1/runs", {"tool": "transfer"})
    assert response.status_code == 400
    assert response.json()["field_errors"] == {
        "account": ["This field is required."],
        "amount": ["This field is required."],
    }
    assert await nothing_stored()


async def test_an_unknown_tool_is_refused_and_nothing_is_stored(api):  # noqa: F811
    response = await post_json(api, "/api/v1/runs", {"tool": "transferr", "args": {"amount": 5}})
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "bad_request" and "field_errors" not in body
    assert "Unknown tool 'transferr'" in body["message"] and "refund" in body["message"]
    assert await nothing_stored()


async def test_a_demo_tools_bounds_are_checked_too(api):  # noqa: F811
    response = await post_json(api, "/api/v1/runs", {"tool": "refund", "args": {"amount": -5, "currency": "XXX"}})
    assert response.status_code == 400
    assert response.json()["field_errors"] == {
        "amount": ["Enter a number greater than 0."],
        "currency": ["Choose one of: EUR, USD, GBP."],
    }
    assert await nothing_stored()


@pytest.mark.parametrize("service", ["", " ", "\t  "])
async def test_a_demo_tool_refuses_an_empty_or_blank_text_argument(api, service):  # noqa: F811
    """Before: " " was accepted and deploy asked "Which environment should   be deployed to?"."""
    response = await post_json(api, "/api/v1/runs", {"tool": "deploy", "args": {"service": service}})
    assert response.status_code == 400
    assert response.json()["field_errors"] == {"service": ["Enter some text (not only spaces)."]}
    assert await nothing_stored()


async def test_args_that_fit_start_the_run(api, with_transfer):  # noqa: F811
    response = await post_json(api, "/api/v1/runs", {"tool": "transfer", "args": {"account": "DE-1", "amount": 7}})
    assert response.status_code == 201, response.content
    await runner.wait_for_run(response.json()["id"])
    run = await Run.objects.aget(pk=response.json()["id"])
    assert run.result_output == "moved 7 EUR to DE-1"


async def test_a_retry_whose_args_no_longer_fit_says_which(api, extra_tools):  # noqa: F811
    loose = define_tool(transfer_execute, name="transfer", input_schema={"type": "object"})
    extra_tools(loose)
    first = await post_json(api, "/api/v1/runs", {"tool": "transfer", "args": {"account": "DE-1", "amount": "x"}})
    assert first.status_code == 201
    await runner.wait_for_run(first.json()["id"])
    extra_tools(transfer)  # the tool now declares what it takes
    again = await post_json(api, f"/api/v1/runs/{first.json()['id']}/retry", {})
    assert again.status_code == 400
    assert again.json()["field_errors"] == {"amount": ["Enter a number."]}
    assert f"Run {first.json()['id']} cannot be started again as it was" in again.json()["message"]
    assert await Run.objects.acount() == 1


# -- defaults --------------------------------------------------------------------------------------


async def test_the_demo_tools_declare_their_defaults_in_their_schemas():
    catalog = {entry["name"]: entry["input_schema"] for entry in await toolkit.tool_catalog()}
    refund = catalog["refund"]["properties"]
    assert (refund["order"]["default"], refund["amount"]["default"], refund["currency"]["default"]) == (
        "A-1001",
        25.0,
        "EUR",
    )
    assert catalog["deploy"]["properties"]["service"]["default"] == "web"
    assert catalog["crunch"]["properties"]["steps"]["default"] == 50


async def test_a_refund_started_without_an_amount_opens_with_the_default_amount_to_edit(console_events, alice):
    run = await runner.start_run(tool="refund", args={}, user=alice)
    opened = await console_events.next("request.opened", run_id=run.pk)
    request = await Request.objects.aget(pk=opened["request_id"])
    view = await sync_to_async(shapes.request_view)(request)
    [amount] = view["form"]["fields"]
    assert (amount["name"], amount["default"]) == ("amount", "25.0")
    await runner.cancel_run(run.pk, user=alice)
    await runner.wait_for_run(run.pk)
