"""Add a reviewer (or update one): ``manage.py add_reviewer bob --group ops --password-from-env BOB_PASSWORD``."""

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals.team.accounts import ReviewerError, add_reviewer


class Command(BaseCommand):
    help = (
        "Create a reviewer, or update an existing one: add them to groups (created if missing) and set the "
        "password from an environment variable, so it never appears in the shell history."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--group",
            action="append",
            default=[],
            dest="groups",
            metavar="GROUP",
            help="Put the reviewer in this group (repeatable; created if missing).",
        )
        parser.add_argument(
            "--password-from-env", metavar="VAR", help="Read the password from this environment variable."
        )
        parser.add_argument("--staff", action="store_true", help="Also let them into the Django admin.")

    def handle(
        self,
        *args: Any,
        username: str,
        groups: list[str],
        password_from_env: str | None = None,
        staff: bool = False,
        **options: Any,
    ) -> None:
        password = None
        if password_from_env:
            password = os.environ.get(password_from_env)
            if not password:
                raise CommandError(f"The environment variable {password_from_env} is not set (or empty).")
        try:
            user, created, new_groups = add_reviewer(username, groups=groups, password=password, staff=staff)
        except ReviewerError as exc:
            raise CommandError(str(exc)) from None
        verb = "Created" if created else "Updated"
        line = f"{verb} reviewer {user.get_username()!r}"
        if groups:
            line += f" in group{'s' if len(groups) > 1 else ''} {', '.join(groups)}"
        if new_groups:
            line += f" (new: {', '.join(new_groups)})"
        self.stdout.write(self.style.SUCCESS(line + "."))
        if password is None and created:
            self.stdout.write(
                f"They cannot log in yet: set a password with 'manage.py changepassword {user.get_username()}', "
                "or run this again with --password-from-env VAR."
            )
