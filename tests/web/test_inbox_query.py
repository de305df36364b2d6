"""The inbox's query on GET /api/v1/requests: search, each filter, sort, grouping, keyset pages, and 400s.

The queue below is opened through the one door (real runs, a remote host's requests, policies in
the database); each test asks the API as a logged-in reviewer. The filters that depend on who
asks ("assigned to me", "I may answer") are checked against what each request's own view says
to that reviewer, so the list and the cards can never disagree.
"""

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from toolnexus import Request as WireRequest

from approvals import selectors
from approvals.models import Policy, Request, RequestStatus, Run
from approvals.moments import iso_time
from approvals.review import decisions
from approvals.team import policies
from tests.support.dashboard import put_in_group, waiting_request
from tests.support.long_queue import open_requests_in_bulk

pytestmark = pytest.mark.django_db(transaction=True)

OPEN_IN_ORDER = ["refund-1", "refund-2", "deploy", "payout", "rotate-1", "rotate-2", "rotate-3", "refund-3"]


def client_for(user):
    client = Client()
    client.force_login(user)
    return client


def listed(user, query=""):
    response = client_for(user).get(f"/api/v1/requests?{query}")
    assert response.status_code == 200, response.content
    return response.json()


def ids(user, query=""):
    return [request["id"] for request in listed(user, query)["requests"]]


def in_minutes(minutes):
    return iso_time(timezone.now() + timedelta(minutes=minutes), timespec="milliseconds")


@pytest.fixture
def carol(make_user):
    return make_user("carol")


@pytest.fixture
def queue(alice, bob, carol):
    """Eight open requests and one declined: two runs of alice's, one of bob's, and a host's requests."""
    refund_run = waiting_request(
        "refund-1", starter=alice, prompt="Refund 40 EUR on order A-1?", args={"order": "A-1", "amount": 40}
    ).run
    waiting_request("refund-2", starter=bob, prompt="Refund 900 EUR?", args={"order": "A-2", "amount": 900})
    waiting_request(
        "deploy",
        starter=alice,
        tool="deploy",
        kind="input",
        prompt="Which environment?",
        data={"schema": {"type": "object", "properties": {"env": {"type": "string"}}, "required": ["env"]}},
        args={"service": "web"},
        expires=in_minutes(30),
    )
    host_opened = {"host": "billing-bot", "opened_by": carol}
    decisions.open_request(
        WireRequest(id="payout", kind="question", prompt="Pay out?", expiresAt=in_minutes(60 * 48)),
        tool="payout",
        args={"to": "Café Müller", "note": 'say "thanks"'},
        **host_opened,
    )
    for n in (1, 2, 3):
        decisions.open_request(
            WireRequest(id=f"rotate-{n}", kind="approval", prompt="Rotate the API key?"),
            tool="rotate",
            args={"key": "api"},
            host="keys-bot",
            opened_by=carol,
        )
    waiting_request("refund-3", prompt="Refund 12 EUR?", args={"order": "A-3", "amount": 12}, run=refund_run)
    waiting_request("old", starter=bob, prompt="Refund 5 EUR?", args={"order": "A-0", "amount": 5})
    decisions.resolve_request("old", ok=False, comment="too late", user=alice)
    return refund_run


# -- search ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, found",
    [
        ("refund 40", ["refund-1"]),  # the prompt, whatever the case
        ("a-2", ["refund-2"]),  # the args as JSON text
        ("DEPLOY", ["deploy"]),  # the tool
        ("billing", ["payout"]),  # the host
        ("carol", ["payout", "rotate-1", "rotate-2", "rotate-3"]),  # who opened it (a host's token user)
        ("Café Müller", ["payout"]),  # text beyond ASCII in the args
        ('"thanks"', ["payout"]),  # quotes, escaped in the args' JSON
        ("50%_off", []),  # LIKE's wildcards are text here
        ("nothing like this", []),
    ],
)
def test_search_finds_text_in_prompt_tool_args_host_and_requester(alice, queue, text, found):
    body = listed(alice, f"status=open&q={text.replace('%', '%25')}")
    assert [r["id"] for r in body["requests"]] == found
    assert body["count"] == len(found)


def test_the_rows_say_where_each_request_came_from(alice, queue):
    by_id = {r["id"]: r for r in listed(alice, "status=open")["requests"]}
    assert (by_id["payout"]["host"], by_id["payout"]["requester"], by_id["payout"]["starter"]) == (
        "billing-bot",
        "carol",
        "carol",  # no run: whoever opened it set it going
    )
    assert (by_id["refund-2"]["host"], by_id["refund-2"]["requester"], by_id["refund-2"]["starter"]) == (
        None,
        None,
        "bob",
    )
    assert by_id["refund-2"]["tool"] == "refund" and by_id["refund-2"]["created_at"]


# -- filters ---------------------------------------------------------------------------------------


def test_status_open_resolved_and_all(alice, queue):
    assert ids(alice, "status=open") == OPEN_IN_ORDER
    assert ids(alice, "status=resolved") == ["old"]
    assert ids(alice, "status=declined") == ["old"]
    assert ids(alice, "status=all") == [*OPEN_IN_ORDER, "old"]
    # Without status= the list keeps what it always listed: every request.
    assert ids(alice) == ids(alice, "status=all")


@pytest.mark.parametrize(
    "query, found",
    [
        ("kind=input", ["deploy"]),
        ("kind=input,question", ["deploy", "payout"]),
        ("kind=input&kind=question", ["deploy", "payout"]),
        ("kind=authorization", []),
        ("tool=rotate", ["rotate-1", "rotate-2", "rotate-3"]),
        ("host=keys-bot", ["rotate-1", "rotate-2", "rotate-3"]),
        ("starter=alice", ["refund-1", "deploy", "refund-3"]),
        ("starter=bob", ["refund-2"]),
        ("starter=carol", ["payout", "rotate-1", "rotate-2", "rotate-3"]),  # she opened them, without a run
        ("expiring=1", ["deploy"]),
        ("expiring=0", OPEN_IN_ORDER),
        ("tool=refund&starter=alice&q=12", ["refund-3"]),
    ],
)
def test_each_filter_narrows_the_open_queue(alice, queue, query, found):
    body = listed(alice, f"status=open&{query}")
    assert [r["id"] for r in body["requests"]] == found
    assert body["count"] == len(found)


def test_policy_filter_names_the_policy_that_governs_each_request(alice, queue, settings):
    Policy.objects.create(name="refunds", tool_pattern="refund*")
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "POLICIES": [{"name": "keys", "tool": "rotate"}]}
    assert ids(alice, "status=open&policy=refunds") == ["refund-1", "refund-2", "refund-3"]
    assert ids(alice, "status=open&policy=keys") == ["rotate-1", "rotate-2", "rotate-3"]
    assert ids(alice, "status=open&policy=default") == ["deploy", "payout"]
    for request in listed(alice, "status=open&policy=refunds")["requests"]:
        assert request["policy"]["name"] == "refunds"

    response = client_for(alice).get("/api/v1/requests?policy=nope")
    assert response.status_code == 400
    assert response.json() == {
        "error": "bad_request",
        "message": "There is no policy named 'nope'; use one of 'refunds', 'keys', 'default'.",
        "field": "policy",
    }


def test_assigned_to_me_is_what_each_card_calls_assigned(alice, bob, carol, queue):
    ops = put_in_group(carol, "ops")
    policy = Policy.objects.create(name="deploys", tool_pattern="deploy")
    policy.assigned_users.add(bob)
    policy_rotate = Policy.objects.create(name="keys", tool_pattern="rotate")
    policy_rotate.assigned_groups.add(ops)
    Request.objects.filter(pk="refund-2").update(data={"assignees": ["alice"]})
    Request.objects.filter(pk="rotate-2").update(data={"assignees": ["bob"]})  # its own names win over the policy's
    Request.objects.filter(pk="rotate-3").update(data={"assignees": "bob"})  # not a list: the policy's apply
    Request.objects.filter(pk="refund-1").update(handed_to="group:ops")
    Request.objects.filter(pk="deploy").update(handed_to="alice")  # handed over: no longer the policy's bob

    expected = {
        "alice": ["refund-2", "deploy"],
        "bob": ["rotate-2"],
        "carol": ["refund-1", "rotate-1", "rotate-3"],
    }
    for user in (alice, bob, carol):
        everything = listed(user, "status=open")["requests"]
        cards_say = [r["id"] for r in everything if r["policy"]["assigned_to_me"]]
        assert ids(user, "status=open&assigned=me") == cards_say == expected[user.username]


def test_i_may_answer_is_what_each_card_lets_me_do(alice, bob, carol, queue):
    put_in_group(bob, "finance")
    refunds = Policy.objects.create(name="refunds", tool_pattern="refund", starter_may_answer=False, quorum=2)
    refunds.allowed_groups.add(put_in_group(alice, "finance"))
    keys = Policy.objects.create(name="keys", tool_pattern="rotate")
    keys.allowed_users.add(bob, carol)
    decisions.resolve_request("refund-2", ok=True, user=alice)  # one of two approvals: alice may not approve again

    expected = {
        "alice": ["deploy", "payout"],  # refund-1 and -3 are her run's (four-eyes); she approved refund-2
        "bob": ["refund-1", "deploy", "payout", "rotate-1", "rotate-2", "rotate-3", "refund-3"],  # refund-2 is his
        "carol": ["deploy", "payout", "rotate-1", "rotate-2", "rotate-3"],  # not in finance
    }
    for user in (alice, bob, carol):
        everything = listed(user, "status=all")["requests"]
        cards_say = [r["id"] for r in everything if r["policy"]["may_answer"]]
        assert ids(user, "status=all&may_answer=1") == cards_say == expected[user.username]
        # The dashboard's "for you to answer" total is counted apart (one grouped read): the same verdict.
        assert selectors.open_request_counts(policies.viewer_of(user))["for_me"] == len(expected[user.username])


def test_expiring_soon_is_within_the_hour(alice, queue):
    Request.objects.filter(pk="payout").update(expires_at=timezone.now() + timedelta(minutes=59))
    assert ids(alice, "status=open&expiring=true") == ["deploy", "payout"]
    Request.objects.filter(pk="payout").update(expires_at=timezone.now() + timedelta(minutes=61))
    assert ids(alice, "status=open&expiring=true") == ["deploy"]


# -- sort and pages ------------------------------------------------------------------------------------


def walk(user, query, limit):
    """Every id of ``query``, a page of ``limit`` at a time; returns (ids, pages)."""
    seen, after, pages = [], None, 0
    while True:
        body = listed(user, f"{query}&limit={limit}" + (f"&after={after}" if after else ""))
        seen += [r["id"] for r in body["requests"]]
        pages += 1
        after = body["next"]
        if after is None:
            return seen, pages


def test_sort_oldest_newest_and_by_deadline(alice, queue):
    Request.objects.filter(pk="rotate-2").update(expires_at=timezone.now() + timedelta(minutes=45))
    assert ids(alice, "status=open&sort=oldest") == OPEN_IN_ORDER
    assert ids(alice, "status=open&sort=newest") == OPEN_IN_ORDER[::-1]
    # The nearest deadline first; those without one last, oldest first.
    assert ids(alice, "status=open&sort=deadline") == [
        "deploy",
        "rotate-2",
        "payout",
        "refund-1",
        "refund-2",
        "rotate-1",
        "rotate-3",
        "refund-3",
    ]


@pytest.mark.parametrize("sort", ["oldest", "newest", "deadline"])
def test_keyset_pages_walk_each_order_once(alice, queue, sort):
    whole = ids(alice, f"status=open&sort={sort}")
    walked, pages = walk(alice, f"status=open&sort={sort}", 3)
    assert walked == whole and len(whole) == 8
    assert pages == 3


def test_a_page_starts_after_the_last_row_shown_whatever_closes_meanwhile(alice, queue):
    first = listed(alice, "status=open&sort=deadline&limit=3")
    assert [r["id"] for r in first["requests"]] == ["deploy", "payout", "refund-1"]
    decisions.resolve_request("refund-2", ok=False, user=alice)
    second = listed(alice, f"status=open&sort=deadline&limit=3&after={first['next']}")
    assert [r["id"] for r in second["requests"]] == ["rotate-1", "rotate-2", "rotate-3"]
    assert second["count"] == 7


def test_a_cursor_of_one_order_is_refused_by_another(alice, queue):
    newest = listed(alice, "status=open&sort=newest&limit=2")["next"]
    response = client_for(alice).get(f"/api/v1/requests?status=open&sort=deadline&after={newest}")
    assert response.status_code == 400
    assert "not a cursor this console gave out" in response.json()["message"]
    assert response.json()["field"] == "after"


# -- groups --------------------------------------------------------------------------------------------


def test_group_by_run_gives_one_row_per_run_with_its_requests(alice, queue):
    body = listed(alice, "status=open&group=run")
    runs = {run.pk: run for run in Run.objects.all()}
    refund_run = Request.objects.get(pk="refund-1").run_id
    keys = [g["key"] for g in body["groups"]]
    assert keys[0] == f"run:{refund_run}"
    first = body["groups"][0]
    assert (first["count"], first["ids"], first["request"]["id"]) == (2, ["refund-1", "refund-3"], "refund-1")
    host_requests = next(g for g in body["groups"] if g["key"] == "run:none")
    assert host_requests["ids"] == ["payout", "rotate-1", "rotate-2", "rotate-3"]
    assert sum(g["count"] for g in body["groups"]) == body["count"] == 8
    assert [r["id"] for r in body["requests"]] == [g["request"]["id"] for g in body["groups"]]
    assert len(body["groups"]) == 4 and len(runs) == 4  # refund run, bob's, deploy, and the declined one's run


def test_group_alike_gives_one_row_for_identical_tool_and_args(alice, queue):
    body = listed(alice, "status=open&group=alike")
    rotate = [g for g in body["groups"] if g["count"] > 1]
    assert len(rotate) == 1
    assert rotate[0]["ids"] == ["rotate-1", "rotate-2", "rotate-3"]
    assert rotate[0]["request"]["tool"] == "rotate" and rotate[0]["key"].startswith("alike:")
    assert len(body["groups"]) == 6 and body["count"] == 8
    # Grouping applies after the filters.
    narrowed = listed(alice, "status=open&group=alike&q=refund")
    assert [g["ids"] for g in narrowed["groups"]] == [["refund-1"], ["refund-2"], ["refund-3"]]


def test_a_group_names_every_host_and_requester_its_requests_came_from(alice, carol, queue):
    decisions.open_request(
        WireRequest(id="rotate-4", kind="approval", prompt="Rotate the API key?"),
        tool="rotate",
        args={"key": "api"},
        host="ci-2",
        opened_by=carol,
    )
    decisions.open_request(
        WireRequest(id="rotate-5", kind="approval", prompt="Rotate the API key?"), tool="rotate", args={"key": "api"}
    )
    groups = listed(alice, "status=open&group=alike")["groups"]
    rotate = next(g for g in groups if g["request"]["tool"] == "rotate")
    assert rotate["count"] == 5
    assert (rotate["hosts"], rotate["host_count"]) == (["ci-2", "keys-bot"], 2)
    assert (rotate["requesters"], rotate["requester_count"]) == ([], 0)  # rotate-5 was opened by nobody
    payout = next(g for g in groups if g["request"]["id"] == "payout")  # a group of one: its own origin
    assert (payout["count"], payout["hosts"], payout["host_count"]) == (1, ["billing-bot"], 1)
    deploy = next(g for g in groups if g["request"]["id"] == "deploy")
    assert (deploy["hosts"], deploy["requesters"]) == ([], [])  # a run's request: no host, opened by nobody


@pytest.mark.parametrize("sort", ["oldest", "newest", "deadline"])
@pytest.mark.parametrize("group", ["run", "alike"])
def test_group_pages_walk_every_group_once(alice, queue, sort, group):
    whole = [g["key"] for g in listed(alice, f"status=open&group={group}&sort={sort}")["groups"]]
    seen, after = [], None
    while True:
        body = listed(alice, f"status=open&group={group}&sort={sort}&limit=1" + (f"&after={after}" if after else ""))
        seen += [g["key"] for g in body["groups"]]
        assert body["count"] == 8
        after = body["next"]
        if after is None:
            break
    assert seen == whole and len(set(whole)) == len(whole)


def test_a_group_lists_the_ids_of_its_requests_in_the_sort_order(alice, queue):
    body = listed(alice, "status=open&group=alike&sort=newest")
    rotate = next(g for g in body["groups"] if g["count"] == 3)
    assert rotate["ids"] == ["rotate-3", "rotate-2", "rotate-1"] and rotate["request"]["id"] == "rotate-3"


# -- refusals -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query, field, words",
    [
        ("status=pending", "status", "Unknown 'status' 'pending'; use one of open, resolved, all, answered"),
        ("sort=random", "sort", "Unknown 'sort' 'random'; use one of oldest, newest, deadline."),
        ("group=tool", "group", "Unknown 'group' 'tool'; use one of run, alike."),
        ("assigned=you", "assigned", "Unknown 'assigned' 'you'; use one of me."),
        ("may_answer=yes", "may_answer", "'may_answer' is 1 (on) or 0 (off); got 'yes'."),
        ("expiring=soon", "expiring", "'expiring' is 1 (on) or 0 (off); got 'soon'."),
        ("limit=0", "limit", "'limit' must be a whole number from 1 to 500; got '0'."),
        ("sort=newest&sort=oldest", "sort", "Give 'sort' once; it was given 2 times."),
        ("q=" + "x" * 201, "q", "'q' is 201 characters long; give at most 200."),
        ("q=%00", "q", "'q' may not contain the character U+0000."),
        ("after=bm90LWEtY3Vyc29y", "after", "'after' is not a cursor this console gave out"),
    ],
)
def test_a_bad_parameter_is_a_400_that_names_it_and_what_it_takes(alice, query, field, words):
    response = client_for(alice).get(f"/api/v1/requests?{query}")
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "bad_request" and body["field"] == field
    assert words in body["message"]


def test_unknown_parameters_are_ignored_as_before(alice, queue):
    assert ids(alice, "status=open&request=deploy&utm=x") == OPEN_IN_ORDER


def test_an_empty_choice_or_flag_is_left_at_its_default_as_a_form_sends_it(alice, queue):
    assert ids(alice, "status=open&sort=&group=&assigned=&may_answer=&expiring=&kind=&q=") == OPEN_IN_ORDER
    assert ids(alice, "status=&sort=") == [*OPEN_IN_ORDER, "old"]


def test_the_list_is_for_logged_in_reviewers_only(queue):
    response = Client().get("/api/v1/requests?status=open")
    assert response.status_code == 401
    assert json.loads(response.content)["error"] == "unauthenticated"


def test_resolved_requests_keep_their_decision(alice, queue):
    (old,) = listed(alice, "status=resolved")["requests"]
    assert old["status"] == RequestStatus.DECLINED and old["decision"]["text"] == "Declined by alice: too late"


def test_every_group_is_reachable_a_page_at_a_time_and_lists_all_its_ids(alice):
    # Before: the 50 largest groups only, no next page, and at most 50 ids in a group.
    open_requests_in_bulk(120, prefix="unique")  # 120 different args: 120 groups of one
    open_requests_in_bulk(60, prefix="same")
    Request.objects.filter(id__startswith="same-").update(tool="rotate", args={"key": "api"})
    keys, after, pages = [], None, 0
    while True:
        body = listed(alice, "status=open&group=alike&limit=50" + (f"&after={after}" if after else ""))
        keys += [group["key"] for group in body["groups"]]
        pages, after = pages + 1, body["next"]
        if after is None:
            break
    assert (len(keys), len(set(keys)), pages) == (121, 121, 3)
    rotate = next(g for g in listed(alice, "status=open&group=alike&tool=rotate")["groups"])
    assert rotate["count"] == 60 and len(rotate["ids"]) == 60  # a bulk answer of the group reaches all 60
