"""Back up the console's SQLite database while it runs (SQLite's online backup API); PostgreSQL: pg_dump."""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals.backup import BackupError, backup_database


class Command(BaseCommand):
    help = (
        "Copy the running console's SQLite database to a new file with SQLite's online backup API (one "
        "consistent snapshot; the console goes on writing). On PostgreSQL use pg_dump (docs/operations.md)."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--out", required=True, help="The backup file to create; never overwritten.")
        parser.add_argument("--database", default="default", help="Which database (default: default).")

    def handle(self, *args: Any, out: str, database: str = "default", **options: Any) -> None:
        try:
            copied = backup_database(out=Path(out), using=database)
        except BackupError as error:
            raise CommandError(str(error), returncode=1) from None
        held = ", ".join(f"{count} {label}" for label, count in copied.counts.items())
        self.stdout.write(self.style.SUCCESS(f"Backed up to {copied.path} ({copied.size} bytes): {held}."))
        self.stdout.write("Restoring it needs the same CONSOLE_AUDIT_KEYS to verify the audit trail.")
