"""A request's own page, /requests/<id>/: its permalink, open or resolved, and the plain form that answers it.

The form posts to the page itself, which answers through the one door and redirects back
(post/redirect/get): the page then says what became of the request. A refused answer says
why and keeps the comment that was typed.
"""

import html
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from toolnexus import Request as WireRequest

from approvals.models import AuditEvent, Policy, Request, RequestStatus
from approvals.review import decisions
from approvals.selectors import iso_time
from tests.support.dashboard import waiting_request

# The page's answers run on the console's database thread: it sees only committed rows.
pytestmark = pytest.mark.django_db(transaction=True)


def client_for(user):
    client = Client()
    client.force_login(user)
    return client


def page(user, request_id):
    return client_for(user).get(f"/requests/{request_id}/")


def text_of(response):
    """The page's HTML with its entities read back (quotes and all), as a person reads it."""
    return html.unescape(response.content.decode())


def answer(user, request_id, **form):
    return client_for(user).post(f"/requests/{request_id}/", data=form)


@pytest.fixture
def refund(bob):
    deadline = iso_time(timezone.now() + timedelta(hours=2), timespec="milliseconds")
    return waiting_request(
        "refund-7",
        starter=bob,
        prompt="Refund 40 EUR on order A-7?",
        args={"order": "A-7", "amount": 40},
        expires=deadline,
    )


def test_an_open_request_shows_what_it_asks_where_it_came_from_and_the_answer_form(alice, refund):
    response = page(alice, "refund-7")
    assert response.status_code == 200
    shown = response.content.decode()
    for text in (
        "Refund 40 EUR on order A-7?",
        "Open: waiting for an answer.",
        '<code class="tool">refund</code>',
        f'<a href="/runs/{refund.run_id}/">run {refund.run_id}</a>, started by bob',
        "&quot;amount&quot;: 40",
        f'<time datetime="{refund.expires_at_wire}">',
        'id="answer-approve"',
        'id="answer-decline"',
        'name="csrfmiddlewaretoken"',
    ):
        assert text in shown, text


def test_a_hosts_request_names_the_host_and_who_opened_it(alice, bob):
    decisions.open_request(
        WireRequest(id="ship", kind="approval", prompt="Ship it?"), tool="ship", host="ci-bot", opened_by=bob
    )
    shown = page(alice, "ship").content.decode()
    assert '<dd id="request-host">ci-bot</dd>' in shown
    assert '<dd id="request-requester">bob</dd>' in shown
    assert "none: a host asked it" in shown


def test_approving_from_the_page_goes_through_the_door_and_the_page_says_so(alice, refund):
    response = answer(alice, "refund-7", answer="approve", comment="fine")
    assert (response.status_code, response["Location"]) == (302, "/requests/refund-7/")
    row = Request.objects.select_related("answered_by").get(pk="refund-7")
    assert (row.status, row.answered_by.username, row.comment) == (RequestStatus.ANSWERED, "alice", "fine")
    assert AuditEvent.objects.filter(request_id="refund-7", action="request.answered", actor="alice").count() == 1

    shown = page(alice, "refund-7").content.decode()
    assert "Approved by alice" in shown
    assert '<dd id="request-comment">fine</dd>' in shown
    assert 'id="answer-form"' not in shown


def test_a_resolved_request_shows_the_decision_in_words_who_and_when(alice, bob, refund):
    decisions.resolve_request("refund-7", ok=False, comment="too large", user=alice)
    response = page(bob, "refund-7")
    assert response.status_code == 200
    shown = response.content.decode()
    assert 'data-outcome="declined"><strong>Declined by alice: too large</strong>' in shown
    assert '<dd id="request-decided-by">alice</dd>' in shown
    answered_at = iso_time(Request.objects.get(pk="refund-7").answered_at)
    assert f'<time datetime="{answered_at}">' in shown
    assert 'id="answer-form"' not in shown


def test_an_expired_request_reads_as_expired(alice, refund):
    Request.objects.filter(pk="refund-7").update(expires_at=timezone.now() - timedelta(seconds=1))
    decisions.expire_due_request("refund-7")
    shown = page(alice, "refund-7").content.decode()
    assert 'data-outcome="expired"' in shown and "Expired at" in shown
    assert '<dd id="request-decided-by">the console</dd>' in shown


def test_answering_a_request_someone_else_closed_says_who_and_keeps_the_comment(alice, bob, refund):
    decisions.resolve_request("refund-7", ok=False, user=bob)
    response = answer(alice, "refund-7", answer="approve", comment="my half-typed thoughts")
    assert response.status_code == 409
    text = text_of(response)
    assert "This request was already declined by bob at" in text
    assert "Declined by bob" in text  # and the page now shows what became of it
    assert '<span class="kept-comment" id="kept-comment">my half-typed thoughts</span>' in text


def test_a_refused_answer_keeps_the_comment_in_the_form(alice, refund):
    policy = Policy.objects.create(name="finance only", tool_pattern="refund")
    policy.allowed_users.add(refund.run.started_by)  # only bob, who started it and may decline only
    response = answer(alice, "refund-7", answer="decline", comment="keep me")
    assert response.status_code == 403
    text = text_of(response)
    assert 'Only bob may answer this (policy "finance only").' in text
    assert Request.objects.get(pk="refund-7").status == RequestStatus.OPEN
    # Not hers to answer: the page says why, offers no buttons, and keeps what she typed.
    assert 'id="answer-form"' not in text and 'id="why-not"' in text
    assert '<span class="kept-comment" id="kept-comment">keep me</span>' in text


def test_the_starter_under_four_eyes_may_decline_but_not_approve(bob, refund):
    Policy.objects.create(name="four-eyes", tool_pattern="refund", starter_may_answer=False)
    text = text_of(page(bob, "refund-7"))
    assert 'id="answer-decline"' in text and 'id="answer-approve"' not in text
    assert 'policy "four-eyes" is four-eyes' in text
    response = answer(bob, "refund-7", answer="cancel", comment="not needed")
    assert response.status_code == 302
    assert Request.objects.get(pk="refund-7").status == RequestStatus.CANCELLED


def test_an_input_request_links_to_its_form_in_the_inbox(alice, bob):
    schema = {"type": "object", "properties": {"env": {"type": "string"}}, "required": ["env"]}
    waiting_request("deploy", starter=bob, tool="deploy", kind="input", data={"schema": schema})
    shown = page(alice, "deploy").content.decode()
    assert 'id="answer-approve"' not in shown
    assert '<a href="/?request=deploy">answer it in the inbox</a>' in shown
    assert 'id="answer-decline"' in shown


def test_a_form_without_a_choice_is_a_400_saying_what_to_choose(alice, refund):
    response = answer(alice, "refund-7", comment="hm")
    assert response.status_code == 400
    assert "Choose Approve, Decline or Cancel request." in response.content.decode()


def test_an_unknown_request_is_a_404(alice):
    assert page(alice, "no-such-request").status_code == 404
    assert answer(alice, "no-such-request", answer="approve").status_code == 404


def test_the_page_is_for_logged_in_reviewers_only(refund):
    response = Client().get("/requests/refund-7/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/requests/refund-7/"
    response = Client().post("/requests/refund-7/", data={"answer": "approve"})
    assert response.status_code in (302, 403)
    assert Request.objects.get(pk="refund-7").status == RequestStatus.OPEN


def test_the_form_needs_the_csrf_token(alice, refund):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    assert strict.post("/requests/refund-7/", data={"answer": "approve"}).status_code == 403
    assert Request.objects.get(pk="refund-7").status == RequestStatus.OPEN


def test_an_answer_the_door_refuses_keeps_the_comment_in_the_form(bob, refund):
    Policy.objects.create(name="four-eyes", tool_pattern="refund", starter_may_answer=False)
    response = answer(bob, "refund-7", answer="approve", comment="half a thought")
    assert response.status_code == 403
    text = text_of(response)
    assert 'policy "four-eyes" is four-eyes' in text
    assert '<textarea name="comment" id="answer-comment" rows="3">half a thought</textarea>' in text
