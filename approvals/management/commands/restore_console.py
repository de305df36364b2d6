"""Restore a backup_console file as the console's SQLite database (a new file), then verify its audit trail."""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError

from approvals.audit.chain import verify_chain
from approvals.backup import BackupError, restore_database


class Command(BaseCommand):
    help = (
        "Copy a backup_console file into the configured SQLite database (CONSOLE_SQLITE_PATH), which must not "
        "exist yet; then verify the audit trail with CONSOLE_AUDIT_KEYS. Run migrate afterwards, then start."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--from", dest="backup", required=True, help="A file backup_console wrote.")
        parser.add_argument("--database", default="default", help="Which database (default: default).")

    def handle(self, *args: Any, backup: str, database: str = "default", **options: Any) -> None:
        try:
            copied = restore_database(backup=Path(backup), using=database)
        except BackupError as error:
            raise CommandError(str(error), returncode=1) from None
        held = ", ".join(f"{count} {label}" for label, count in copied.counts.items())
        self.stdout.write(self.style.SUCCESS(f"Restored {backup} to {copied.path}: {held}."))
        try:
            report = verify_chain(using=database)
        except DatabaseError as error:
            if "no such" not in str(error):  # not a backup from an older version (older tables): a broken file
                raise CommandError(f"Restored, but reading its audit trail failed: {error}", returncode=1) from None
            self.stdout.write("Run manage.py migrate, then manage.py verify_audit.")
            return
        if not report.ok:
            raise CommandError(
                f"Restored, but the audit trail does not verify after {report.verified} good event(s): "
                f"{report.problem} Is CONSOLE_AUDIT_KEYS the one the backed-up console used?",
                returncode=1,
            )
        head = f" Head: {report.head}" if report.head else ""
        self.stdout.write(f"Audit trail: {report.verified} events verified.{head}")
