"""Claim and hand over open requests: "bob is on it", shown live, audited, and refused politely.

Driven through the API (Django's test client, the real database) and, for the live part, a real
dashboard socket on the console's ASGI application.
"""

import json
from datetime import UTC

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from approvals.models import AuditEvent, Policy, Request
from approvals.review import decisions
from tests.support.dashboard import dashboard_for, put_in_group, waiting_request

# The API views run on the console's database thread: they see only committed rows.
pytestmark = pytest.mark.django_db(transaction=True)


def client_for(user):
    client = Client()
    client.force_login(user)
    return client


def post(user, path, body=None):
    return client_for(user).post(path, data=json.dumps(body or {}), content_type="application/json")


def claim_events(request_id):
    return list(
        AuditEvent.objects.filter(
            request_id=request_id, action__in=["request.claimed", "request.released", "request.handed"]
        )
        .order_by("id")
        .values_list("action", "actor", "payload")
    )


def test_a_claim_shows_who_is_on_it_and_is_audited(alice, bob):
    waiting_request("r1")
    response = post(bob, "/api/v1/requests/r1/claim")
    assert response.status_code == 200, response.content
    assert response.json()["claimed_by"] == "bob" and response.json()["claimed_at"]
    assert Request.objects.get(pk="r1").claimed_by == bob
    assert claim_events("r1") == [("request.claimed", "bob", {})]


def test_claiming_twice_is_one_claim(bob):
    waiting_request("r1")
    assert post(bob, "/api/v1/requests/r1/claim").status_code == 200
    assert post(bob, "/api/v1/requests/r1/claim").status_code == 200
    assert len(claim_events("r1")) == 1


def test_a_request_someone_holds_is_refused_to_another_reviewer_naming_the_holder(alice, bob):
    waiting_request("r1")
    post(bob, "/api/v1/requests/r1/claim")
    response = post(alice, "/api/v1/requests/r1/claim")
    assert response.status_code == 409
    # Since when, as every time is written (before: the server's local "HH:MM", with no zone).
    since = Request.objects.get(pk="r1").claimed_at.astimezone(UTC)
    assert response.json()["message"].startswith(f"bob is on it (since {since:%H:%M} UTC); ")
    assert Request.objects.get(pk="r1").claimed_by.username == "bob"


def test_staff_may_take_a_claimed_request_and_the_trail_says_from_whom(make_user, bob):
    admin = make_user("admin", is_staff=True)
    waiting_request("r1")
    post(bob, "/api/v1/requests/r1/claim")
    assert post(admin, "/api/v1/requests/r1/claim").json()["claimed_by"] == "admin"
    assert claim_events("r1")[-1] == ("request.claimed", "admin", {"from": "bob"})


def test_only_the_holder_releases_and_then_anyone_may_claim(alice, bob):
    waiting_request("r1")
    post(bob, "/api/v1/requests/r1/claim")
    assert post(alice, "/api/v1/requests/r1/release").status_code == 403
    released = post(bob, "/api/v1/requests/r1/release")
    assert released.status_code == 200 and released.json()["claimed_by"] is None
    assert post(alice, "/api/v1/requests/r1/claim").json()["claimed_by"] == "alice"
    assert [action for action, _, _ in claim_events("r1")] == ["request.claimed", "request.released", "request.claimed"]


def test_handing_to_a_user_makes_it_theirs_and_assigned_to_them(alice, bob):
    waiting_request("r1")
    post(bob, "/api/v1/requests/r1/claim")
    handed = post(bob, "/api/v1/requests/r1/hand", {"to": "alice"})
    assert handed.status_code == 200, handed.content
    assert handed.json()["handed_to"] == "alice" and handed.json()["claimed_by"] is None
    assert claim_events("r1")[-1] == ("request.handed", "bob", {"to": "alice", "from": "bob"})
    listed = client_for(alice).get("/api/v1/requests").json()["requests"]
    assert [(r["id"], r["policy"]["assigned_to_me"]) for r in listed] == [("r1", True)]
    assert client_for(bob).get("/api/v1/requests").json()["requests"][0]["policy"]["assigned_to_me"] is False


def test_a_request_handed_to_a_group_is_assigned_to_its_members_who_may_claim_it_over_a_holder(alice, bob, make_user):
    carol = make_user("carol")
    put_in_group(carol, "ops")
    waiting_request("r1")
    assert post(bob, "/api/v1/requests/r1/hand", {"to": "group:ops"}).status_code == 200
    listed = client_for(carol).get("/api/v1/requests").json()["requests"]
    assert listed[0]["handed_to"] == "group:ops" and listed[0]["policy"]["assigned_to_me"] is True
    post(alice, "/api/v1/requests/r1/claim")  # someone outside ops picks it up first
    assert post(carol, "/api/v1/requests/r1/claim").json()["claimed_by"] == "carol"


def test_members_of_the_group_it_was_handed_to_do_not_take_it_from_each_other(bob, make_user):
    carol, dave = make_user("carol"), make_user("dave")
    put_in_group(carol, "ops")
    put_in_group(dave, "ops")
    waiting_request("r1")
    assert post(bob, "/api/v1/requests/r1/hand", {"to": "group:ops"}).status_code == 200
    assert post(carol, "/api/v1/requests/r1/claim").status_code == 200
    response = post(dave, "/api/v1/requests/r1/claim")
    assert response.status_code == 409 and response.json()["message"].startswith("carol is on it")
    assert Request.objects.get(pk="r1").claimed_by == carol


def test_handing_a_request_to_yourself_is_refused_so_no_one_reserves_a_takeover(alice, bob):
    waiting_request("r1")
    response = post(bob, "/api/v1/requests/r1/hand", {"to": "bob"})
    assert response.status_code == 400
    assert response.json()["field_errors"] == {"to": ["is you"]} and "claim it instead" in response.json()["message"]
    assert post(alice, "/api/v1/requests/r1/claim").status_code == 200
    assert post(bob, "/api/v1/requests/r1/claim").status_code == 409  # alice holds it; bob reserved nothing
    assert claim_events("r1") == [("request.claimed", "alice", {})]


def test_a_starter_who_may_only_decline_their_own_may_not_claim_it_but_may_hand_it_to_a_reviewer(alice, make_user):
    carol = make_user("carol")
    Policy.objects.create(name="four eyes", tool_pattern="refund", starter_may_answer=False)
    waiting_request("r1", starter=carol)
    response = post(carol, "/api/v1/requests/r1/claim")
    assert response.status_code == 403 and "four-eyes" in response.json()["message"]
    assert post(carol, "/api/v1/requests/r1/hand", {"to": "alice"}).status_code == 200
    assert post(alice, "/api/v1/requests/r1/claim").json()["claimed_by"] == "alice"


def test_a_reviewer_the_policy_keeps_out_learns_no_user_or_group_names_by_handing(alice, bob):
    policy = Policy.objects.create(name="bob only", tool_pattern="refund")
    policy.allowed_users.add(bob)
    waiting_request("r1")
    for to in ["nobody", "group:nope", "bob"]:
        assert post(alice, "/api/v1/requests/r1/hand", {"to": to}).status_code == 403, to


@pytest.mark.parametrize(
    ("to", "field_error"),
    [("nobody", "no active user 'nobody'"), ("group:nope", "no group 'nope'"), ("", "required"), (7, "required")],
)
def test_handing_to_someone_who_does_not_exist_is_a_400_naming_the_field(bob, to, field_error):
    waiting_request("r1")
    response = post(bob, "/api/v1/requests/r1/hand", {"to": to})
    assert response.status_code == 400
    assert response.json()["field_errors"] == {"to": [field_error]}
    assert Request.objects.get(pk="r1").handed_to == "" and claim_events("r1") == []


def test_a_reviewer_the_policy_keeps_out_may_not_claim_or_hand(alice, bob):
    policy = Policy.objects.create(name="bob only", tool_pattern="refund")
    policy.allowed_users.add(bob)
    waiting_request("r1")
    for path, body in [("claim", None), ("hand", {"to": "bob"})]:
        response = post(alice, f"/api/v1/requests/r1/{path}", body)
        assert response.status_code == 403 and "bob" in response.json()["message"]
    assert claim_events("r1") == []


def test_a_resolved_request_cannot_be_claimed(alice, bob):
    waiting_request("r1")
    decisions.resolve_request("r1", ok=False, reason="declined", user=alice)
    response = post(bob, "/api/v1/requests/r1/claim")
    assert response.status_code == 409
    assert post(bob, "/api/v1/requests/nope/claim").status_code == 404


def test_a_claim_does_not_stop_another_allowed_reviewer_from_answering(alice, bob):
    waiting_request("r1")
    post(bob, "/api/v1/requests/r1/claim")
    answered = post(alice, "/api/v1/requests/r1/answer", {"ok": False, "comment": "urgent, took it"})
    assert answered.status_code == 200


async def test_other_dashboards_see_the_claim_live(alice, bob):
    await sync_to_async(waiting_request)("r1")
    async with dashboard_for(alice) as dashboard:
        response = await sync_to_async(post)(bob, "/api/v1/requests/r1/claim")
        assert response.status_code == 200
        frame = await dashboard.next("event", action="request.claimed")
    assert frame["request"]["claimed_by"] == "bob" and frame["actor"] == "bob"
