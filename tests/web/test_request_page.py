"""A request's permalink, /requests/<id>/: the same page for an open and a resolved request."""

import html

import pytest
from django.test import Client
from toolnexus import Request as WireRequest

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
    shown = response.content.decode()
    assert "started by bob" in shown and 'id="requests"' in shown  # the card is drawn there (console/cards.js)
    view = response.context["request"]
    assert view["prompt"] == "Refund 40 EUR on order A-7?" and 'id="initial-request"' in shown
    assert view["policy"]["may_answer"] and view["policy"]["may_decline"]


def test_a_resolved_request_shows_the_decision_in_words_who_when_and_the_comment(alice, bob):
    waiting_request("refund-8", starter=bob)
    decisions.resolve_request("refund-8", ok=False, reason="declined", comment="too large", user=alice)
    shown = page_for(bob, "refund-8").content.decode()
    assert "Declined by alice: too large" in shown
    assert 'id="requests"' not in shown and 'id="request-call"' in shown  # the call, read-only: nothing to answer


def test_a_reviewer_the_policy_keeps_out_reads_why_instead_of_buttons(alice, bob):
    policy = Policy.objects.create(name="bob only", tool_pattern="refund")
    policy.allowed_users.add(bob)
    waiting_request("refund-9", starter=bob)
    policy = page_for(alice, "refund-9").context["request"]["policy"]
    # The card reads why instead of showing buttons (console/team.js applyPolicy).
    assert not policy["may_answer"] and "bob" in policy["why_not"]


def test_an_unknown_request_is_a_404_and_the_page_needs_a_login(alice):
    assert page_for(alice, "nope").status_code == 404
    waiting_request("refund-1")
    response = Client().get("/requests/refund-1/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


@pytest.mark.parametrize(
    "url, linked",
    [
        ("javascript:alert(document.cookie)", False),
        ("data:text/html,<script>alert(1)</script>", False),
        ("https://login.example.com/device?code=ABCD", True),
    ],
)
def test_only_an_http_or_https_link_a_tool_sent_is_clickable(alice, bob, url, linked):
    decisions.open_request(
        WireRequest(id="sign-in", kind="authorization", prompt="Sign in to the bank", url=url),
        host="bank-bot",
        opened_by=bob,
    )
    text = html.unescape(page_for(alice, "sign-in").content.decode())
    assert (f'href="{url}"' in text) is linked
    assert url in text  # shown either way, as text when it is not a web link
