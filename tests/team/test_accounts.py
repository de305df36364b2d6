"""Accounts: manage.py add_reviewer, and a logged-out user's sockets closing within seconds."""

import io

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.core.management import CommandError, call_command
from django.test import AsyncClient, Client

from tests.support.dashboard import RECEIVE_TIMEOUT, socket_headers

User = get_user_model()
pytestmark = pytest.mark.django_db(transaction=True)


def add_reviewer(*args):
    out = io.StringIO()
    call_command("add_reviewer", *args, stdout=out)
    return out.getvalue()


# -- manage.py add_reviewer ---------------------------------------------------------------------


def test_add_reviewer_with_groups_and_a_password_from_the_environment(monkeypatch):
    monkeypatch.setenv("BOB_PASSWORD", "a-Long-enough-pass-4411")
    said = add_reviewer("bob", "--group", "finance", "--group", "ops", "--password-from-env", "BOB_PASSWORD")
    assert said.strip() == "Created reviewer 'bob' in groups finance, ops (new: finance, ops)."
    bob = User.objects.get(username="bob")
    assert sorted(bob.groups.values_list("name", flat=True)) == ["finance", "ops"]
    assert bob.check_password("a-Long-enough-pass-4411") and not bob.is_staff
    logged_in = Client().post("/accounts/login/", {"username": "bob", "password": "a-Long-enough-pass-4411"})
    assert logged_in.status_code == 302


def test_add_reviewer_again_adds_a_group_and_keeps_the_password(monkeypatch):
    monkeypatch.setenv("BOB_PASSWORD", "a-Long-enough-pass-4411")
    add_reviewer("bob", "--group", "finance", "--password-from-env", "BOB_PASSWORD")
    said = add_reviewer("bob", "--group", "auditors", "--staff")
    assert said.strip() == "Updated reviewer 'bob' in group auditors (new: auditors)."
    bob = User.objects.get(username="bob")
    assert sorted(bob.groups.values_list("name", flat=True)) == ["auditors", "finance"]
    assert bob.check_password("a-Long-enough-pass-4411") and bob.is_staff


def test_add_reviewer_without_a_password_says_how_to_set_one():
    said = add_reviewer("carol")
    assert "They cannot log in yet: set a password with 'manage.py changepassword carol'" in said
    assert not User.objects.get(username="carol").has_usable_password()


@pytest.mark.parametrize(
    "args, complaint",
    [
        (
            ["dave", "--password-from-env", "NOT_SET_ANYWHERE_4411"],
            "The environment variable NOT_SET_ANYWHERE_4411 is not set",
        ),
        (["no spaces"], "is not a valid username"),
        (["erin", "--password-from-env", "SHORT_PASSWORD"], "The password was refused"),
    ],
)
def test_add_reviewer_refusals_are_worded_for_people(args, complaint, monkeypatch):
    monkeypatch.setenv("SHORT_PASSWORD", "abc")
    with pytest.raises(CommandError, match=complaint):
        add_reviewer(*args)
    assert not User.objects.filter(username="erin").exists()  # a refused password creates nobody


@pytest.mark.parametrize(
    "password, complaint",
    [
        ("12345678", "This password is too common. This password is entirely numeric."),
        ("password", "This password is too common."),
    ],
)
def test_add_reviewer_refuses_common_and_numeric_passwords_with_the_validators_words(password, complaint, monkeypatch):
    monkeypatch.setenv("WEAK_PASSWORD", password)
    with pytest.raises(CommandError) as refused:
        add_reviewer("frank", "--password-from-env", "WEAK_PASSWORD")
    assert str(refused.value) == f"The password was refused: {complaint}"
    assert not User.objects.filter(username="frank").exists()


def test_the_password_change_page_refuses_a_common_password(make_user):
    alice = make_user("alice")
    client = Client()
    client.force_login(alice)
    response = client.post(
        "/accounts/password_change/",
        {"old_password": "pw-for-tests-1", "new_password1": "password", "new_password2": "password"},
    )
    assert response.status_code == 200
    assert "This password is too common." in response.content.decode()
    alice.refresh_from_db()
    assert alice.check_password("pw-for-tests-1")


def test_a_sign_in_lasts_a_shift_from_the_login_and_using_the_console_does_not_extend_it(make_user):
    make_user("alice")
    client = Client()
    signed_in = client.post("/accounts/login/", {"username": "alice", "password": "pw-for-tests-1"})
    assert signed_in.status_code == 302
    assert signed_in.cookies["sessionid"]["max-age"] == 12 * 3600  # CONSOLE_SESSION_HOURS' default
    expires = Session.objects.get().expire_date
    for page in ("/", "/tokens/", "/audit/"):
        used = client.get(page)
        assert used.status_code == 200 and "sessionid" not in used.cookies
    assert Session.objects.get().expire_date == expires


# -- logging out closes sockets ----------------------------------------------------------------------


async def logged_in_client(user):
    client = AsyncClient()
    await client.aforce_login(user)
    return client, client.cookies["sessionid"].value


async def connect(session_key):
    from toolnexus_site.asgi import application

    communicator = WebsocketCommunicator(application, "/ws/console/", headers=socket_headers(session_key))
    accepted, _ = await communicator.connect(timeout=RECEIVE_TIMEOUT)
    assert accepted
    assert (await communicator.receive_json_from(timeout=RECEIVE_TIMEOUT))["type"] == "snapshot"
    return communicator


async def next_close(communicator, timeout=RECEIVE_TIMEOUT):
    while True:
        message = await communicator.receive_output(timeout=timeout)
        if message["type"] == "websocket.close":
            return message


async def test_logging_out_closes_that_sessions_sockets_at_once(make_user):
    alice = await sync_to_async(make_user)("alice")
    client, key = await logged_in_client(alice)
    _, other_key = await logged_in_client(alice)  # alice on another computer
    here, also_here, elsewhere = await connect(key), await connect(key), await connect(other_key)
    response = await client.post("/accounts/logout/")
    assert response.status_code == 302
    assert (await next_close(here, timeout=2))["code"] == 4401
    assert (await next_close(also_here, timeout=2))["code"] == 4401
    assert await elsewhere.receive_nothing(timeout=0.3)  # that session is still logged in
    await elsewhere.disconnect()


async def test_a_session_ended_elsewhere_is_noticed_by_the_safety_tick(make_user, settings):
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "SAFETY_TICK_SECONDS": 0.1}
    alice = await sync_to_async(make_user)("alice")
    _, key = await logged_in_client(alice)
    communicator = await connect(key)
    await Session.objects.filter(session_key=key).adelete()  # flushed by another process, or expired
    assert (await next_close(communicator, timeout=3))["code"] == 4401


async def test_a_deactivated_users_sockets_close(make_user, settings):
    settings.TOOLNEXUS = {**settings.TOOLNEXUS, "SAFETY_TICK_SECONDS": 0.1}
    bob = await sync_to_async(make_user)("bob")
    _, key = await logged_in_client(bob)
    communicator = await connect(key)
    await User.objects.filter(pk=bob.pk).aupdate(is_active=False)
    assert (await next_close(communicator, timeout=3))["code"] == 4401
