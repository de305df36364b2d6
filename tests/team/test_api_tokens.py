"""API tokens: issued once, stored hashed, bearer calls without CSRF, revocation at once, the tokens page."""

import hashlib
import io
import threading
import time
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.test import AsyncClient
from django.utils import timezone

from approvals.models import ApiToken, AuditEvent, Request, Run
from approvals.runs import runner
from approvals.team import tokens
from tests.support.api_client import post_json
from tests.support.dashboard import async_waiting_request
from tests.support.statements import counting_statements
from tests.support.users import bearer

pytestmark = pytest.mark.django_db(transaction=True)

WAIT_SECONDS = 10.0  # at most, for the other thread to reach its step
NEW_REQUEST = {"id": "tok-req-1", "kind": "approval", "prompt": "Ship it?"}


@pytest.fixture
async def svc(make_user):
    return await sync_to_async(make_user)("svc", password=None)


@pytest.fixture
async def svc_token(svc, issue_token):
    return await sync_to_async(issue_token)(svc)


async def list_requests(secret, client=None):
    return await (client or AsyncClient()).get("/api/v1/requests", headers=bearer(secret))


# -- manage.py issue_token ------------------------------------------------------------------


def test_issue_token_command_prints_a_token_that_authenticates(make_user):
    make_user("ci-bot", password=None)
    out, err = io.StringIO(), io.StringIO()
    call_command("issue_token", "ci-bot", "--name", "deployer", stdout=out, stderr=err)

    secret = out.getvalue().strip()
    assert secret.startswith("tnx_") and "\n" not in secret  # the token alone on stdout, for $(...)
    assert "shown only this once" in err.getvalue()
    row = ApiToken.objects.get()
    assert (row.user.username, row.name, row.prefix) == ("ci-bot", "deployer", secret[: tokens.PREFIX_LENGTH])
    assert row.prefix in err.getvalue() and secret not in err.getvalue()
    assert tokens.authenticate(secret).user.username == "ci-bot"


def test_issue_token_command_for_an_unknown_user_says_so():
    with pytest.raises(CommandError, match="There is no user 'nobody'"):
        call_command("issue_token", "nobody", stdout=io.StringIO(), stderr=io.StringIO())
    assert ApiToken.objects.count() == 0


async def test_a_token_from_the_command_authenticates_an_api_call(svc):
    out = io.StringIO()
    await sync_to_async(call_command)("issue_token", "svc", stdout=out, stderr=io.StringIO())
    response = await list_requests(out.getvalue().strip())
    assert response.status_code == 200
    assert response.json() == {"requests": [], "count": 0, "next": None}


# -- stored hashed -----------------------------------------------------------------------------


def test_the_secret_is_stored_only_as_its_sha256(make_user):
    user = make_user("hashy", password=None)
    row, secret = tokens.issue_token(user, "hashy-token")

    stored = ApiToken.objects.get(pk=row.pk)
    assert stored.digest == hashlib.sha256(secret.encode()).hexdigest()
    secret_part = secret[tokens.PREFIX_LENGTH :]
    # Nowhere in the whole database: not in the token row, not in any other table.
    dump = "\n".join(connection.connection.iterdump())
    assert secret not in dump and secret_part not in dump
    assert stored.prefix in dump  # the non-secret prefix is kept, to tell tokens apart


def test_two_tokens_have_different_secrets_and_prefixes(make_user):
    user = make_user("twice", password=None)
    (first, a), (second, b) = tokens.issue_token(user), tokens.issue_token(user)
    assert a != b and first.digest != second.digest and first.prefix != second.prefix


# -- bearer calls ---------------------------------------------------------------------------------


async def test_bearer_works_without_csrf(svc_token):
    strict = AsyncClient(enforce_csrf_checks=True)
    response = await post_json(strict, "/api/v1/requests", NEW_REQUEST, headers=bearer(svc_token))
    assert response.status_code == 201, response.content
    assert response.json()["opened_by"] == "svc"

    run = await post_json(strict, "/api/v1/runs", {"tool": "crunch", "args": {"steps": 0}}, headers=bearer(svc_token))
    assert run.status_code == 201
    assert run.json()["started_by"] == "svc"
    await runner.wait_for_run(run.json()["id"])


async def test_a_token_may_cancel_only_the_runs_its_own_user_started(svc, svc_token, make_user, issue_token):
    alice = await sync_to_async(make_user)("alice")
    staff = await sync_to_async(make_user)("ops-bot", password=None, is_staff=True)
    alices = await async_waiting_request("tok-cancel-alice", starter=alice)
    refusal = (
        f"You may not cancel run {alices.run_id}: an API token may cancel only the runs its own user started "
        "(this token is {user}'s; alice started this one)."
    )
    for user, secret in ((svc, svc_token), (staff, await sync_to_async(issue_token)(staff))):
        response = await AsyncClient().post(f"/api/v1/runs/{alices.run_id}/cancel", headers=bearer(secret))
        assert response.status_code == 403
        assert response.json() == {"error": "forbidden", "message": refusal.format(user=user.username)}
    assert not (await Run.objects.aget(pk=alices.run_id)).cancel_requested
    refused = AuditEvent.objects.filter(run_id=alices.run_id, action="run.cancel_refused").order_by("id")
    assert [(e.actor, e.payload["by_token"]) async for e in refused] == [("svc", True), ("ops-bot", True)]

    own = await post_json(
        AsyncClient(),
        "/api/v1/runs",
        {"tool": "crunch", "args": {"steps": 500, "pause": 0.05}},
        headers=bearer(svc_token),
    )
    response = await AsyncClient().post(f"/api/v1/runs/{own.json()['id']}/cancel", headers=bearer(svc_token))
    assert response.status_code == 202
    await runner.wait_for_run(own.json()["id"])
    assert (await Run.objects.aget(pk=own.json()["id"])).status == "cancelled"


async def test_the_bearer_scheme_is_case_insensitive(svc_token):
    response = await AsyncClient().get("/api/v1/requests", headers={"Authorization": f"bearer {svc_token}"})
    assert response.status_code == 200


@pytest.mark.parametrize(
    "authorization",
    ["Bearer tnx_not-a-real-token", "Bearer ", "Basic c3ZjOnB3", "tnx_without_a_scheme"],
    ids=["unknown", "empty", "basic", "no-scheme"],
)
async def test_a_bad_authorization_header_is_401(authorization):
    response = await AsyncClient().get("/api/v1/requests", headers={"Authorization": authorization})
    assert response.status_code == 401
    body = response.json()
    assert body["error"] == "invalid_token"
    assert body["message"]
    assert response["WWW-Authenticate"].startswith("Bearer")


async def test_a_bad_token_never_falls_back_to_the_session(make_user):
    """A bearer call skipped CSRF, so a logged-in browser's cookie must not rescue a bad token."""
    alice = await sync_to_async(make_user)("alice")
    client = AsyncClient()
    await client.aforce_login(alice)
    assert (await client.get("/api/v1/requests")).status_code == 200  # the session alone works
    response = await post_json(client, "/api/v1/requests", NEW_REQUEST, headers=bearer("tnx_forged"))
    assert response.status_code == 401
    assert await Request.objects.acount() == 0


async def test_a_revoked_token_fails_on_the_very_next_call(svc, svc_token):
    assert (await list_requests(svc_token)).status_code == 200
    row = await ApiToken.objects.aget(user=svc)
    await sync_to_async(tokens.revoke_token)(svc, row.pk)

    response = await list_requests(svc_token)
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_token"
    assert "revoked" in response.json()["message"]


def test_a_token_revoked_while_a_call_verifies_it_is_refused_on_the_very_next_call(make_user, issue_token):
    """The verifying call read the row before the revoke and keeps it after the revoke forgot it: that call
    goes through (it came first), but the process must not go on accepting the token from what it kept."""
    svc = make_user("svc", password=None)
    secret = issue_token(svc)
    row = ApiToken.objects.get(user=svc)
    read, revoked = threading.Event(), threading.Event()
    verified = []

    def pause_once_the_row_is_read(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if sql.startswith("UPDATE") and "last_used_at" in sql and not read.is_set():  # the row was read, not kept yet
            read.set()
            revoked.wait(WAIT_SECONDS)
        return result

    def verify():
        try:
            with connection.execute_wrapper(pause_once_the_row_is_read):
                verified.append(tokens.authenticate(secret))
        finally:
            connection.close()

    verifying = threading.Thread(target=verify)
    verifying.start()
    try:
        assert read.wait(WAIT_SECONDS), "the verifying call never read the token's row"
        tokens.revoke_token(svc, row.pk)
    finally:
        revoked.set()
        verifying.join(WAIT_SECONDS)
    assert [token.pk for token in verified] == [row.pk]
    with pytest.raises(tokens.TokenError, match="revoked"):
        tokens.authenticate(secret)


def test_a_user_deactivated_in_a_transaction_while_a_call_verifies_their_token_is_refused_once_it_commits(
    make_user, issue_token
):
    """The admin saves in a transaction: a call verifying the token before the commit reads the user as still
    active, and what it keeps must be dropped by the commit."""
    svc = make_user("svc", password=None)
    secret = issue_token(svc)
    ApiToken.objects.filter(user=svc).update(last_used_at=timezone.now())  # the verifying call only reads
    verified = []

    def verify():
        try:
            verified.append(tokens.authenticate(secret))
        finally:
            connection.close()

    with transaction.atomic():
        svc.is_active = False
        svc.save()  # forgets the user's tokens here, before the commit
        verifying = threading.Thread(target=verify)
        verifying.start()
        verifying.join(WAIT_SECONDS)
    assert [token.user.username for token in verified] == ["svc"]  # it read the user before the commit
    with pytest.raises(tokens.TokenError, match="inactive"):
        tokens.authenticate(secret)


async def test_a_token_of_an_inactive_user_is_401(svc, svc_token):
    svc.is_active = False
    await svc.asave()
    response = await list_requests(svc_token)
    assert response.status_code == 401
    assert "inactive" in response.json()["message"]


async def test_last_used_is_recorded_and_updated_when_the_row_is_read_again(svc, svc_token):
    row = await ApiToken.objects.aget(user=svc)
    assert row.last_used_at is None

    before = timezone.now()
    assert (await list_requests(svc_token)).status_code == 200
    await row.arefresh_from_db()
    assert row.last_used_at is not None and row.last_used_at >= before

    long_ago = timezone.now() - timedelta(hours=1)
    await ApiToken.objects.filter(pk=row.pk).aupdate(last_used_at=long_ago)
    assert (await list_requests(svc_token)).status_code == 200  # verified already: nothing read, nothing written
    await row.arefresh_from_db()
    assert row.last_used_at == long_ago

    tokens.forget_verified()  # as TOKEN_RECHECK_SECONDS running out does
    assert (await list_requests(svc_token)).status_code == 200
    await row.arefresh_from_db()
    assert row.last_used_at > long_ago + timedelta(minutes=59)


async def test_a_verified_token_costs_its_next_call_no_read_and_no_write(svc_token):
    assert (await list_requests(svc_token)).status_code == 200
    with counting_statements() as counter:
        assert (await list_requests(svc_token)).status_code == 200
    on_tokens = [s.sql for s in counter.taken() if "approvals_apitoken" in s.sql]
    assert on_tokens == []


async def test_a_token_revoked_behind_this_process_is_refused_within_the_recheck_bound(svc, svc_token, settings):
    """Another process's revocation reaches this one only through the database: within TOKEN_RECHECK_SECONDS."""
    bound = 0.5
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "TOKEN_RECHECK_SECONDS": bound}
    assert (await list_requests(svc_token)).status_code == 200
    # What revoking on another console does to this one: the row changes, no signal reaches this process.
    revoked = time.monotonic()
    await ApiToken.objects.filter(user=svc).aupdate(revoked_at=timezone.now())
    while (response := await list_requests(svc_token)).status_code == 200:
        assert time.monotonic() - revoked < bound + 0.5, "still accepted well past TOKEN_RECHECK_SECONDS"
    assert response.status_code == 401 and "revoked" in response.json()["message"]
    assert (await list_requests(svc_token)).status_code == 401


async def test_a_deactivated_users_token_is_refused_at_once_even_when_verified(svc, svc_token):
    assert (await list_requests(svc_token)).status_code == 200
    svc.is_active = False
    await svc.asave()
    response = await list_requests(svc_token)
    assert response.status_code == 401 and "inactive" in response.json()["message"]


async def test_session_api_calls_still_need_csrf(make_user):
    alice = await sync_to_async(make_user)("alice")
    strict = AsyncClient(enforce_csrf_checks=True)
    await strict.aforce_login(alice)
    response = await post_json(strict, "/api/v1/requests", NEW_REQUEST)
    assert response.status_code == 403
    # Another Authorization scheme does not skip the check either: only a bearer token does.
    response = await post_json(strict, "/api/v1/requests", NEW_REQUEST, headers={"Authorization": "Basic YTpi"})
    assert response.status_code == 403
    assert await Request.objects.acount() == 0


async def test_an_api_call_that_fails_csrf_gets_json_saying_what_to_send(make_user):
    alice = await sync_to_async(make_user)("alice")
    strict = AsyncClient(enforce_csrf_checks=True)
    await strict.aforce_login(alice)
    response = await post_json(strict, "/api/v1/requests", NEW_REQUEST)
    assert response.status_code == 403
    assert response["Content-Type"].startswith("application/json")
    refusal = response.json()
    assert refusal["error"] == "csrf_failed"
    assert "X-CSRFToken" in refusal["message"] and "Authorization: Bearer" in refusal["message"]
    assert "CSRF cookie not set" in refusal["message"]  # Django's own reason, for the person debugging


async def test_a_page_that_fails_csrf_gets_the_html_refusal_page(make_user):
    alice = await sync_to_async(make_user)("alice")
    strict = AsyncClient(enforce_csrf_checks=True)
    await strict.aforce_login(alice)
    response = await strict.post("/tokens/", {"name": "no-csrf"})
    assert response.status_code == 403
    assert response["Content-Type"].startswith("text/html")
    assert "Form refused (403)" in response.content.decode()  # Django's view, with templates/403_csrf.html
    assert await ApiToken.objects.acount() == 0


async def test_no_credentials_is_401_pointing_at_tokens():
    response = await AsyncClient().get("/api/v1/requests")
    assert response.status_code == 401
    assert response.json()["error"] == "unauthenticated"
    assert "/tokens/" in response.json()["message"]


# -- the /tokens/ page ----------------------------------------------------------------------------------


async def test_tokens_page_needs_a_login():
    response = await AsyncClient().get("/tokens/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


async def test_tokens_page_creates_lists_and_revokes(make_user):
    alice = await sync_to_async(make_user)("alice")
    browser = AsyncClient(enforce_csrf_checks=True)
    await browser.aforce_login(alice)

    page = await browser.get("/tokens/")
    assert page.status_code == 200
    assert "You have no tokens yet." in page.content.decode()
    csrf = page.cookies["csrftoken"].value

    created = await browser.post("/tokens/", {"name": "laptop-agent", "csrfmiddlewaretoken": csrf})
    assert created.status_code == 302 and created["Location"] == "/tokens/"  # post/redirect/get
    shown = await browser.get("/tokens/")
    assert "no-store" in shown["Cache-Control"]
    html = shown.content.decode()
    row = await ApiToken.objects.aget(user=alice)
    secret = html.split('id="new-token-secret">', 1)[1].split("<", 1)[0]
    assert secret.startswith(row.prefix)
    assert "shown only this once" in html
    assert (await list_requests(secret)).status_code == 200

    listed = (await browser.get("/tokens/")).content.decode()
    assert secret not in listed  # shown once, never again
    assert "laptop-agent" in listed and row.prefix in listed and "active" in listed
    assert "Last used" in listed

    revoked = await browser.post(f"/tokens/{row.pk}/revoke", {"csrfmiddlewaretoken": csrf})
    assert revoked.status_code == 302 and revoked["Location"] == "/tokens/"
    after = (await browser.get("/tokens/")).content.decode()
    assert "revoked" in after and "is revoked; it no longer works" in after
    assert (await list_requests(secret)).status_code == 401


async def test_a_new_token_is_shown_once_after_the_redirect_and_never_stored_in_clear(make_user):
    alice = await sync_to_async(make_user)("alice")
    browser = AsyncClient()
    await browser.aforce_login(alice)

    shown = await browser.post("/tokens/", {"name": "once"}, follow=True)
    assert shown.redirect_chain == [("/tokens/", 302)]
    secret = shown.content.decode().split('id="new-token-secret">', 1)[1].split("<", 1)[0]
    assert secret.startswith("tnx_")
    assert 'id="copy-token"' in shown.content.decode()
    # The secret rode to the browser in a short-lived cookie for this one page, not in the session table.
    dump = "\n".join(await sync_to_async(lambda: list(connection.connection.iterdump()))())
    assert secret not in dump

    reloaded = (await browser.get("/tokens/")).content.decode()
    assert secret not in reloaded and "new-token-secret" not in reloaded
    assert await ApiToken.objects.acount() == 1


async def test_a_new_tokens_page_is_not_shown_to_another_user(make_user):
    """The one-time page reads the token back as the viewer's own: another login in the same browser sees nothing."""
    alice = await sync_to_async(make_user)("alice")
    bob = await sync_to_async(make_user)("bob")
    browser = AsyncClient()
    await browser.aforce_login(alice)
    created = await browser.post("/tokens/", {"name": "alices"})
    assert created.status_code == 302
    await browser.aforce_login(bob)
    page = (await browser.get("/tokens/")).content.decode()
    assert "new-token-secret" not in page


async def test_tokens_page_cannot_revoke_someone_elses_token(make_user, issue_token):
    alice = await sync_to_async(make_user)("alice")
    bob = await sync_to_async(make_user)("bob")
    bobs_secret = await sync_to_async(issue_token)(bob)
    bobs_row = await ApiToken.objects.aget(user=bob)
    browser = AsyncClient()
    await browser.aforce_login(alice)

    response = await browser.post(f"/tokens/{bobs_row.pk}/revoke", follow=True)
    assert "There is no such token among yours." in response.content.decode()
    await bobs_row.arefresh_from_db()
    assert bobs_row.revoked_at is None
    assert (await list_requests(bobs_secret)).status_code == 200
    assert "bob" not in (await browser.get("/tokens/")).content.decode().split("Your tokens", 1)[1]


async def test_top_bar_links_to_the_tokens_page(make_user):
    alice = await sync_to_async(make_user)("alice")
    browser = AsyncClient()
    await browser.aforce_login(alice)
    assert 'href="/tokens/"' in (await browser.get("/")).content.decode()
