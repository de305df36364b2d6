"""The inbox over the API: search, filters, sorts, groups and paging of GET /api/v1/requests, and bulk answers.

Real database, Django's test client; each bulk answer is checked in the audit trail.
"""

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from approvals.models import AuditEvent, Policy, Request, RequestStatus
from approvals.review import decisions
from tests.support.dashboard import put_in_group, waiting_request

# The API views run on the console's database thread: they see only committed rows.
pytestmark = pytest.mark.django_db(transaction=True)


def client_for(user):
    client = Client()
    client.force_login(user)
    return client


def listed(user, **params):
    response = client_for(user).get("/api/v1/requests", params)
    assert response.status_code == 200, response.content
    return response.json()


def ids(body):
    return [view["id"] for view in body["requests"]]


def bulk(user, body):
    return client_for(user).post("/api/v1/requests/bulk", data=json.dumps(body), content_type="application/json")


@pytest.fixture
def queue(alice, bob):
    """Five open requests of three tools, two hosts' worth of origin, one with a deadline, one resolved."""
    waiting_request("refund-1", starter=bob, tool="refund", data={"amount": 40}, prompt="Refund 40 EUR to order A-1?")
    waiting_request("refund-2", starter=bob, tool="refund", prompt="Refund 12 EUR to order B-7?")
    waiting_request("deploy-1", starter=alice, tool="deploy", prompt="Deploy web to production?")
    waiting_request("ask-1", starter=alice, tool="survey", kind="input", prompt="Which region?")
    soon = waiting_request("deploy-2", starter=bob, tool="deploy", prompt="Deploy api to staging?")
    Request.objects.filter(pk=soon.pk).update(
        expires_at=timezone.now() + timedelta(minutes=20), host="ci-runner", args={"service": "api", "env": "staging"}
    )
    waiting_request("old-1", starter=bob, tool="refund", prompt="Refund 1 EUR?")
    decisions.resolve_request("old-1", ok=False, reason="declined", comment="too small", user=alice)


def test_text_search_matches_prompt_tool_args_and_host(alice, queue):
    assert ids(listed(alice, status="open", q="order")) == ["refund-1", "refund-2"]
    assert ids(listed(alice, status="open", q="DEPLOY")) == ["deploy-1", "deploy-2"]
    assert ids(listed(alice, status="open", q="staging")) == ["deploy-2"]  # in its args and prompt
    assert ids(listed(alice, status="open", q="ci-run")) == ["deploy-2"]  # its host
    assert listed(alice, status="open", q="nothing like it") == {"requests": [], "count": 0, "next": None}


def test_filters_by_kind_tool_host_starter_and_deadline(alice, queue):
    assert ids(listed(alice, status="open", kind="input")) == ["ask-1"]
    assert ids(listed(alice, status="open", kind="input,approval", tool="deploy")) == ["deploy-1", "deploy-2"]
    assert ids(listed(alice, status="open", host="ci-runner")) == ["deploy-2"]
    assert ids(listed(alice, status="open", starter="alice")) == ["deploy-1", "ask-1"]
    assert ids(listed(alice, status="open", expiring="1")) == ["deploy-2"]
    assert ids(listed(alice, status="resolved")) == ["old-1"]
    assert listed(alice, status="open")["count"] == 5


def test_filters_by_policy_assignment_and_what_i_may_answer(alice, bob, make_user, queue):
    carol = make_user("carol")
    put_in_group(carol, "finance")
    refunds = Policy.objects.create(name="refunds", tool_pattern="refund*", starter_may_answer=False)
    refunds.assigned_users.add(carol)
    assert ids(listed(alice, status="open", policy="refunds")) == ["refund-1", "refund-2"]
    assert ids(listed(carol, status="open", assigned="me")) == ["refund-1", "refund-2"]
    # bob started both refunds and the policy is four-eyes: he may answer the rest only.
    assert ids(listed(bob, status="open", may_answer="1")) == ["deploy-1", "ask-1", "deploy-2"]
    # Handed to alice: assigned to her now, and no longer to carol by the policy.
    client_for(bob).post(
        "/api/v1/requests/refund-2/hand", data=json.dumps({"to": "alice"}), content_type="application/json"
    )
    assert ids(listed(alice, status="open", assigned="me")) == ["refund-2"]
    assert ids(listed(carol, status="open", assigned="me")) == ["refund-1"]
    mine = listed(alice, status="open", assigned="me")["requests"][0]
    assert mine["policy"]["assigned_to_me"] is True  # the list and the card agree


def test_sorts_page_by_page_without_repeats(alice, queue):
    oldest = listed(alice, status="open", limit=2)
    assert ids(oldest) == ["refund-1", "refund-2"] and oldest["next"]
    rest = listed(alice, status="open", limit=2, after=oldest["next"])
    assert ids(rest) == ["deploy-1", "ask-1"]
    newest = listed(alice, status="open", sort="newest", limit=3)
    assert ids(newest) == ["deploy-2", "ask-1", "deploy-1"]
    assert ids(listed(alice, status="open", sort="newest", after=newest["next"])) == ["refund-2", "refund-1"]
    by_deadline = listed(alice, status="open", sort="deadline", limit=2)
    assert ids(by_deadline) == ["deploy-2", "refund-1"]  # the one with a deadline first, then the oldest
    assert ids(listed(alice, status="open", sort="deadline", after=by_deadline["next"])) == [
        "refund-2",
        "deploy-1",
        "ask-1",
    ]


def test_groups_by_run_and_by_identical_tool_and_args(alice, bob):
    for n in range(12):
        waiting_request(f"same-{n}", starter=bob, tool="refund", prompt=f"Refund 5 EUR ({n})?")
    waiting_request("other", starter=bob, tool="deploy")
    alike = listed(alice, status="open", group="alike")
    assert [(g["count"], g["request"]["tool"]) for g in alike["groups"]] == [(12, "refund"), (1, "deploy")]
    assert alike["groups"][0]["ids"][:2] == ["same-0", "same-1"] and alike["count"] == 13
    by_run = listed(alice, status="open", group="run")
    assert len(by_run["groups"]) == 13 and all(g["count"] == 1 for g in by_run["groups"])


def audited(action, request_ids):
    return set(
        AuditEvent.objects.filter(action=action, request_id__in=request_ids).values_list("request_id", flat=True)
    )


def test_bulk_decline_by_ids_answers_each_through_the_door_and_audits_each(alice, queue):
    response = bulk(alice, {"ok": False, "comment": "not today", "ids": ["refund-1", "refund-2", "old-1", "nope"]})
    assert response.status_code == 200, response.content
    result = response.json()
    assert result["answered"] == ["refund-1", "refund-2"] and result["closed"] == ["old-1"]
    assert result["skipped"] == [{"id": "nope", "reason": "There is no request with id 'nope'."}]
    assert audited("request.declined", ["refund-1", "refund-2"]) == {"refund-1", "refund-2"}
    assert set(Request.objects.filter(pk__in=["refund-1", "refund-2"]).values_list("comment", flat=True)) == {
        "not today"
    }


def test_bulk_skips_what_the_reviewer_may_not_answer_and_says_why(bob, queue):
    Policy.objects.create(name="refunds", tool_pattern="refund*", starter_may_answer=False)
    result = bulk(bob, {"ok": True, "filter": {"tool": "refund"}}).json()
    assert result["answered"] == [] and [s["id"] for s in result["skipped"]] == ["refund-1", "refund-2"]
    assert "four-eyes" in result["skipped"][0]["reason"]
    assert Request.objects.filter(tool="refund", status=RequestStatus.OPEN).count() == 2


def test_a_dry_run_names_how_many_and_which_tools_and_answers_nothing(alice, queue):
    result = bulk(alice, {"ok": False, "filter": {"q": "deploy"}, "dry_run": True}).json()
    assert result["matched"] == 2 and result["tools"] == {"deploy": 2} and result["dry_run"] is True
    # What would be answered, for the confirmation; nothing is.
    assert result["answered"] == ["deploy-1", "deploy-2"]
    assert Request.objects.filter(status=RequestStatus.OPEN).count() == 5
    assert not AuditEvent.objects.filter(action="request.declined", request__id__startswith="deploy").exists()
