"""The people of the in-process tests, as a pytest plugin (tests/conftest.py loads it): ``make_user``,
the reviewers ``alice`` and ``bob``, API tokens, and the header a token is sent in."""

import pytest

PASSWORD = "pw-for-tests-1"


@pytest.fixture
def make_user(django_user_model):
    """``make_user(username, password=..., **fields)`` -> a saved user."""

    def make(username="alice", password=PASSWORD, **extra):
        return django_user_model.objects.create_user(username=username, password=password, **extra)

    return make


@pytest.fixture
def alice(make_user):
    """A reviewer with an email address (the password reset mails her)."""
    return make_user("alice", email="alice@example.com")


@pytest.fixture
def bob(make_user):
    """A second reviewer."""
    return make_user("bob", email="bob@example.com")


@pytest.fixture
def issue_token():
    """``issue_token(user, name)`` -> the secret of a fresh API token for that user."""
    from approvals.team import tokens

    def issue(user, name="tests"):
        return tokens.issue_token(user, name)[1]

    return issue


def bearer(secret):
    """Headers for a Django test client call authenticated by an API token."""
    return {"Authorization": f"Bearer {secret}"}
