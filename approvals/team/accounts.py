"""Reviewer accounts: adding them (manage.py add_reviewer), and closing their sockets when they log out.

A dashboard socket joins a group named after its user. Logging out (Django's
``user_logged_out``) tells that group which session ended, and the sockets of that
session close at once; every socket also re-checks its session on its safety tick,
so a session that expired, was flushed in another process or belongs to a user
who was deactivated stops within a few seconds too.
"""

import hashlib
import logging
from collections.abc import Iterable
from importlib import import_module
from types import SimpleNamespace
from typing import Any, cast

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib import auth
from django.contrib.auth import password_validation
from django.contrib.auth.models import Group, User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Field
from django.http import HttpRequest

logger = logging.getLogger(__name__)

SESSION_ENDED = "session.ended"


def user_group(user_id: int) -> str:
    return f"console-user-{user_id}"


def session_digest(session_key: str | None) -> str | None:
    """The session key never travels over the channel layer, only a digest of it."""
    return hashlib.sha256(session_key.encode()).hexdigest()[:32] if session_key else None


def on_logged_out(
    sender: object, request: HttpRequest | None = None, user: User | None = None, **kwargs: object
) -> None:
    """``user_logged_out`` receiver: close the sockets of the session that just ended."""
    if user is None or request is None:
        return
    session = getattr(request, "session", None)
    key = getattr(session, "session_key", None)
    layer = get_channel_layer()
    if layer is None or key is None:
        return
    try:
        async_to_sync(layer.group_send)(user_group(user.pk), {"type": SESSION_ENDED, "session": session_digest(key)})
    except Exception:  # the safety tick closes them a few seconds later anyway
        logger.exception("could not tell the sockets of user %s that they logged out", user.pk)


def session_is_valid(session_key: str, user_id: int) -> bool:
    """Whether ``session_key`` still logs in ``user_id`` (not flushed, not expired, user still active)."""
    engine = import_module(settings.SESSION_ENGINE)
    # get_user reads only the request's session.
    user = auth.get_user(cast(HttpRequest, SimpleNamespace(session=engine.SessionStore(session_key))))
    return user.is_authenticated and user.pk == user_id


asession_is_valid = database_sync_to_async(session_is_valid)


class ReviewerError(ValueError):
    """A reviewer that cannot be added as asked; the message says what to change."""


def add_reviewer(
    username: str, *, groups: Iterable[str] = (), password: str | None = None, staff: bool = False
) -> tuple[User, bool, list[str]]:
    """Create or update a reviewer, put them in ``groups`` (created if missing); returns (user, created, new_groups)."""
    User = auth.get_user_model()
    username = (username or "").strip()
    if not username:
        raise ReviewerError("Give a username.")
    field = cast(Field, User._meta.get_field(User.USERNAME_FIELD))  # a column, never a relation
    try:
        field.run_validators(username)
    except ValidationError as exc:
        raise ReviewerError(f"{username!r} is not a valid username: {' '.join(exc.messages)}") from None
    with transaction.atomic():
        lookup: dict[str, Any] = {User.USERNAME_FIELD: username}
        user, created = User.objects.get_or_create(**lookup)
        if password is not None:
            try:
                password_validation.validate_password(password, user)
            except ValidationError as exc:
                raise ReviewerError("The password was refused: " + " ".join(exc.messages)) from None
            user.set_password(password)
        elif created:
            user.set_unusable_password()
        if staff:
            user.is_staff = True
        user.save()
        new_groups = []
        for name in groups:
            group, made = Group.objects.get_or_create(name=name.strip())
            if made:
                new_groups.append(group.name)
            user.groups.add(group)
    return user, created, new_groups
