"""A request's page as the server draws it: the call's digest, and once resolved the key that signed the answer
with who and when, the call it runs as when an approval changed it, or that it was decided before signing."""

import html

import pytest
from django.test import Client
from django.utils import timezone
from toolnexus import Request as WireRequest

from approvals import demo_tools
from approvals.models import Request, RequestStatus, Run, RunStatus
from approvals.review import decisions
from approvals.runs import runner

pytestmark = pytest.mark.django_db(transaction=True)

ARGS = {"order": "A-7", "amount": 70, "currency": "EUR"}


def page_for(user, request_id):
    client = Client()
    client.force_login(user)
    return html.unescape(client.get(f"/requests/{request_id}/").content.decode())


def refund_request(request_id, starter):
    run = Run.objects.create(tool="refund", status=RunStatus.RUNNING, started_by=starter, owner=runner.PROCESS_ID)
    wire = WireRequest(id=request_id, kind="approval", prompt="Refund 70 EUR?", data={**ARGS, "editable": ["amount"]})
    return decisions.open_request(
        wire, run_id=run.pk, tool="refund", args=dict(ARGS), tool_input_schema=demo_tools.refund.input_schema
    )


def test_an_open_request_shows_its_call_digest_and_no_signature(alice):
    opened = refund_request("sig-page-open", alice)
    shown = page_for(alice, "sig-page-open")
    assert f'id="request-call-digest" tabindex="0" title="{opened.call_digest}">{opened.call_digest}</code>' in shown
    assert 'id="request-signature"' not in shown and 'id="request-run-digest"' not in shown


def test_an_approval_with_edits_shows_the_key_who_when_and_the_call_it_runs_as(alice, bob):
    refund_request("sig-page-edit", alice)
    decisions.resolve_request("sig-page-edit", ok=True, data={"args": {"amount": 40}}, user=bob)
    signature = Request.objects.get(pk="sig-page-edit").answer_signature
    shown = page_for(alice, "sig-page-edit")
    assert f'<code class="kid">{signature["kid"]}</code> · bob · <time datetime="{signature["at"]}"' in shown
    assert f'id="request-run-digest" tabindex="0" title="{signature["run_digest"]}"' in shown
    assert signature["run_digest"] != signature["call_digest"]


def test_a_decline_is_signed_for_the_call_as_asked_so_it_runs_as_nothing_else(alice, bob):
    refund_request("sig-page-no", alice)
    decisions.resolve_request("sig-page-no", ok=False, reason="declined", user=bob)
    shown = page_for(alice, "sig-page-no")
    assert "Signed by key <code" in shown and 'id="request-run-digest"' not in shown


def test_an_answer_decided_before_the_console_signed_says_so(alice):
    Request.objects.create(
        id="sig-page-old",
        kind="approval",
        prompt="Refund?",
        tool="refund",
        args=ARGS,
        status=RequestStatus.ANSWERED,
        answer_ok=True,
        answered_at=timezone.now(),
        answered_by=alice,
        decided_by="person",
    )
    shown = page_for(alice, "sig-page-old")
    assert "Not signed (decided before the console signed answers)" in shown
    assert 'id="request-call-digest"' in shown  # its digest, computed from the tool and args it still has
