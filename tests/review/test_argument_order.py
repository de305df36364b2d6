"""A request keeps its arguments' order: the tool's input schema's first, then the others as sent.

The order is stored beside the args (Request.arg_order) because PostgreSQL's jsonb does not keep an
object's key order; every view of a request carries it, so each card lists the call the same way.
"""

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from toolnexus import Request as Wire

from approvals import shapes
from approvals.demo_tools import refund
from approvals.models import Request
from approvals.review import decisions
from tests.support.api_client import post_json
from tests.support.users import bearer

pytestmark = pytest.mark.django_db(transaction=True)  # the API call runs its view on another thread


def test_schema_properties_come_first_in_the_schemas_order_then_the_others_as_sent():
    schema = {"type": "object", "properties": {"order": {}, "amount": {}, "currency": {}}}
    sent = {"note": "x", "currency": "EUR", "amount": 5, "order": "A-1", "extra": True}
    assert decisions.argument_order(sent, schema) == ["order", "amount", "currency", "note", "extra"]


def test_without_a_schema_the_order_is_as_sent_and_missing_properties_are_left_out():
    assert decisions.argument_order({"b": 1, "a": 2}, None) == ["b", "a"]
    assert decisions.argument_order({"b": 1}, {"properties": {"a": {}, "b": {}}}) == ["b"]
    assert decisions.argument_order({}, {"properties": {"a": {}}}) == []


def test_a_tools_request_stores_and_shows_its_args_in_the_schemas_order():
    wire = Wire(id="order-run-1", kind="approval", prompt="Refund?", data={})
    args = {"currency": "USD", "amount": 7, "order": "B-2"}
    decisions.open_request(wire, tool="refund", args=args, tool_input_schema=refund.input_schema)
    stored = Request.objects.get(pk="order-run-1")
    assert stored.arg_order == ["order", "amount", "currency"]
    assert shapes.request_view(stored)["arg_order"] == ["order", "amount", "currency"]


async def test_a_hosts_request_keeps_the_order_its_args_were_sent_in(make_user, issue_token):
    secret = await sync_to_async(lambda: issue_token(make_user("ci-host", password=None)))()
    body = {"id": "order-host-1", "kind": "approval", "prompt": "Deploy web to production?", "host": "ci.example"}
    # Reverse alphabetical, so neither a sorted nor a jsonb-reordered read could pass by chance.
    body["args"] = {"service": "web", "env": "production", "dry_run": False}
    response = await post_json(AsyncClient(), "/api/v1/requests", body, headers=bearer(secret))
    assert response.status_code == 201, response.content
    assert response.json()["arg_order"] == ["service", "env", "dry_run"]
    assert (await Request.objects.aget(pk="order-host-1")).arg_order == ["service", "env", "dry_run"]


def test_a_row_stored_before_the_order_was_kept_shows_its_args_own_order():
    wire = Wire(id="order-old-1", kind="approval", prompt="Old?", data={})
    decisions.open_request(wire, tool="legacy", args={"z": 1, "a": 2})
    Request.objects.filter(pk="order-old-1").update(arg_order=[])
    assert shapes.request_view(Request.objects.get(pk="order-old-1"))["arg_order"] == ["z", "a"]
