"""The OpenAPI document declares what a request view sends: its ``policy``, with the reject options offered."""

import pytest
from toolnexus import Request as WireRequest

from approvals.models import Request
from approvals.review import decisions
from approvals.shapes import for_user, request_view
from approvals.team import policies
from approvals.web.api import document

pytestmark = pytest.mark.django_db

TOO_LARGE = {"key": "too_large", "label": "Too large", "text": "Refunds above 100 EUR need a manager."}


def test_the_request_views_policy_is_declared_with_its_reject_options(alice):
    schemas = document()["components"]["schemas"]
    assert schemas["RequestView"]["properties"]["policy"] == {"$ref": "#/components/schemas/PolicyView"}
    declared = schemas["PolicyView"]["properties"]
    assert declared["reject_options"]["items"] == {"$ref": "#/components/schemas/RejectOption"}

    wire = WireRequest(id="r-1", kind="approval", prompt="Refund?", data={"reject_options": [TOO_LARGE]})
    decisions.open_request(wire, tool="refund")
    view = for_user(request_view(Request.objects.get(pk="r-1")), policies.viewer_of(alice))

    assert view["policy"]["reject_options"] == [TOO_LARGE]
    assert set(view["policy"]) == set(declared)  # every key the view sends is declared, and no other
