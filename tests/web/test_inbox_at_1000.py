"""The inbox's API with more than 1,000 open requests: search, filter, group, and a bulk decline of 40, each
audited. The queue is written at once (tests/support/long_queue.py): 1,000 refunds from billing-bot, 40
identical deploys and 15 wires (only bob may answer a wire) from ops-bot."""

import json

import pytest
from django.test import Client

from approvals.models import AuditEvent, Policy, Request, RequestStatus
from tests.support.long_queue import open_requests_in_bulk

pytestmark = pytest.mark.django_db(transaction=True)

QUEUE, DEPLOYS, WIRES = 1000, 40, 15


@pytest.fixture
def reviewer(alice, bob):
    open_requests_in_bulk(QUEUE)
    open_requests_in_bulk(DEPLOYS, prefix="deploy")
    Request.objects.filter(id__startswith="deploy-").update(host="ops-bot", tool="deploy", args={"service": "web"})
    open_requests_in_bulk(WIRES, prefix="wire")
    Request.objects.filter(id__startswith="wire-").update(host="ops-bot", tool="wire", args={"amount": 900})
    Policy.objects.create(name="wires are bob's", tool_pattern="wire").allowed_users.add(bob)
    client = Client()
    client.force_login(alice)
    return client


def listed(client, query):
    response = client.get(f"/api/v1/requests?status=open&{query}")
    assert response.status_code == 200, response.content
    return response.json()


def bulk(client, body):
    response = client.post("/api/v1/requests/bulk", data=json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.content
    return response.json()


def test_search_filter_group_and_bulk_decline_40_each_audited(reviewer):
    everything = listed(reviewer, "limit=50")
    assert everything["count"] == QUEUE + DEPLOYS + WIRES and len(everything["requests"]) == 50

    found = listed(reviewer, "q=A-000123")
    assert ([r["id"] for r in found["requests"]], found["count"]) == (["queued-00123"], 1)

    inputs = listed(reviewer, "kind=input&limit=500")
    assert inputs["count"] == Request.objects.filter(status="open", kind="input").count()
    assert {r["kind"] for r in inputs["requests"]} == {"input"}

    ops = listed(reviewer, "host=ops-bot&limit=500")
    assert ops["count"] == DEPLOYS + WIRES
    mine = listed(reviewer, "host=ops-bot&may_answer=1&limit=500")
    assert mine["count"] == DEPLOYS and {r["tool"] for r in mine["requests"]} == {"deploy"}

    alike = listed(reviewer, "host=ops-bot&group=alike")
    assert sorted((g["request"]["tool"], g["count"], len(g["ids"])) for g in alike["groups"]) == [
        ("deploy", DEPLOYS, DEPLOYS),
        ("wire", WIRES, WIRES),
    ]

    # A bulk decline of every request ops-bot sent: first what would happen, then the answers.
    ask = {"ok": False, "comment": "duplicate deploys", "filter": {"host": "ops-bot"}}
    plan = bulk(reviewer, {**ask, "dry_run": True})
    assert (plan["matched"], plan["tools"], len(plan["answered"]), len(plan["skipped"])) == (
        DEPLOYS + WIRES,
        {"deploy": DEPLOYS},  # the tools of what it would answer; the wires are listed as skipped
        DEPLOYS,
        WIRES,
    )
    assert AuditEvent.objects.filter(action="request.declined").count() == 0

    done = bulk(reviewer, ask)
    deploys = sorted(Request.objects.filter(tool="deploy").values_list("pk", flat=True))
    assert sorted(done["answered"]) == deploys and len(deploys) == DEPLOYS
    assert {s["reason"] for s in done["skipped"]} == {
        'Only bob may answer this (policy "wires are bob\'s"). '
        "To answer it yourself, ask an admin: add alice to the policy's users (in the admin, Approvals > Policies)."
    }
    declined = AuditEvent.objects.filter(action="request.declined").order_by("id")
    assert sorted(declined.values_list("request_id", flat=True)) == deploys  # one event per request
    assert {(e.actor, e.payload["comment"]) for e in declined} == {("alice", "duplicate deploys")}
    assert Request.objects.filter(tool="deploy").exclude(status=RequestStatus.DECLINED).count() == 0
    assert listed(reviewer, "limit=1")["count"] == QUEUE + WIRES
