"""Create a demo login on a fresh console (no users yet) and print it; print it again on later starts."""

import os
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

# One per database: make run-cluster keeps its own (var/cluster/demo-login.txt) beside make run's.
LOGIN_FILE = Path(os.environ.get("CONSOLE_DEMO_LOGIN_FILE") or Path(settings.BASE_DIR) / "var" / "demo-login.txt")


class Command(BaseCommand):
    help = (
        "Create the 'demo' reviewer if the console has no user yet, and print where to open the console "
        "and the login to use (make run prints it last, before serving)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", default="http://127.0.0.1:8000/", help="The console's address, to print.")

    def handle(self, *args: Any, url: str, **options: Any) -> None:
        User = get_user_model()
        if not User.objects.exists():
            password = secrets.token_urlsafe(12)
            User.objects.create_superuser("demo", email="", password=password)
            LOGIN_FILE.parent.mkdir(parents=True, exist_ok=True)
            LOGIN_FILE.write_text(f"demo {password}\n")
            LOGIN_FILE.chmod(0o600)
        self.stdout.write(self.style.SUCCESS(f"Open {url} and log in:"))
        if LOGIN_FILE.exists():
            username, password = LOGIN_FILE.read_text().split()
            self.stdout.write(self.style.SUCCESS(f"  username {username}   password {password}"))
        else:
            self.stdout.write(
                "  as one of this console's users (add one with: manage.py add_reviewer NAME --password-from-env VAR)."
            )
