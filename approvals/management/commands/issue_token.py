"""Issue an API token for a user (a service account is just a user) and print it, once."""

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals.team import tokens


class Command(BaseCommand):
    help = "Issue an API token for USERNAME and print it. The console stores only its hash: save it now."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", help="the user the token acts as")
        parser.add_argument("--name", default="", help="a label for the tokens page, e.g. the program using it")

    def handle(self, *args: Any, username: str, name: str, **options: Any) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(
                f"There is no user {username!r}. Create one first (manage.py createsuperuser, or the admin); "
                "a service account is an ordinary user."
            )
        if not user.is_active:
            raise CommandError(f"User {username!r} is inactive; its tokens would not work.")
        row, secret = tokens.issue_token(user, name or "")
        # The secret alone on stdout, so `TOKEN=$(manage.py issue_token ci)` works; the note goes to stderr.
        self.stdout.write(secret)
        self.stderr.write(
            f"Issued token {row.prefix}… ({row.name or 'unnamed'}) for {username}. "
            "It is shown only this once; revoke it at /tokens/."
        )
