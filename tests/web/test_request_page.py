"""A request's permalink, /requests/<id>/: the same page for an open and a resolved request."""

import pytest
from django.test import Client

from approvals.models import Policy
from approvals.review import decisions
from tests.support.dashboard import waiting_request

pytestmark = pytest.mark.django_db(transaction=True)


def page_for(user, request_id):
    client = Client()
    client.force_login(user)
    return client.get(f"/requests/{request_id}/")


def test_an_open_request_shows_what_was_asked_and_the_answer_buttons(alice, bob):
    waiting_request("refund-7", starter=bob, prompt="Refund 40 EUR on order A-7?")
    response = page_for(alice, "refund-7")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Refund 40 EUR on order A-7?" in html and "started by bob" in html
    assert 'data-ok="true"' in html and 'data-ok="false"' in html


def test_a_resolved_request_shows_the_decision_in_words_who_when_and_the_comment(alice, bob):
    waiting_request("refund-8", starter=bob)
    decisions.resolve_request("refund-8", ok=False, reason="declined", comment="too large", user=alice)
    html = page_for(bob, "refund-8").content.decode()
    assert "Declined by alice: too large" in html
    assert 'id="request-answer"' not in html  # nothing left to answer


def test_a_reviewer_the_policy_keeps_out_reads_why_instead_of_buttons(alice, bob):
    policy = Policy.objects.create(name="bob only", tool_pattern="refund")
    policy.allowed_users.add(bob)
    waiting_request("refund-9", starter=bob)
    html = page_for(alice, "refund-9").content.decode()
    assert 'id="request-why-not"' in html and "bob" in html and 'data-ok="true"' not in html


def test_an_unknown_request_is_a_404_and_the_page_needs_a_login(alice):
    assert page_for(alice, "nope").status_code == 404
    waiting_request("refund-1")
    response = Client().get("/requests/refund-1/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
