"""Delete finished runs older than N days, with their transcripts and closed requests, once their audit events
are archived; say what was pruned and what was kept, and why."""

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from approvals.moments import iso_time
from approvals.runs.prune import prune_runs


def _count(number: int, noun: str, plural: str | None = None) -> str:
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def _ids(ids: list[int], limit: int = 20) -> str:
    shown = ", ".join(f"#{run_id}" for run_id in ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


class Command(BaseCommand):
    help = (
        "Delete finished runs that ended more than --older-than days ago, with their transcripts and requests, "
        "when none of their audit events is left in the database (archive_audit first). Active runs and runs "
        "with an open request are never pruned."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--older-than", type=float, required=True, metavar="DAYS", help="Age in days.")
        parser.add_argument("--dry-run", action="store_true", help="Say what would go; delete nothing.")
        parser.add_argument("--database", default="default", help="Which database (default: default).")

    def handle(
        self, *args: Any, older_than: float, dry_run: bool = False, database: str = "default", **options: Any
    ) -> None:
        if older_than < 0:
            raise CommandError("--older-than takes a number of days, 0 or more.", returncode=2)
        cutoff = timezone.now() - timedelta(days=older_than)
        report = prune_runs(older_than=cutoff, dry_run=dry_run, using=database)
        verb = "Would prune" if dry_run else "Pruned"
        if report.pruned:
            detail = (
                ""
                if dry_run
                else f": {_count(report.requests, 'request')}, "
                f"{_count(report.transcript_entries, 'transcript entry', 'transcript entries')}"
            )
            self.stdout.write(
                self.style.SUCCESS(f"{verb} {_count(len(report.pruned), 'run')} ({_ids(report.pruned)}){detail}.")
            )
        else:
            self.stdout.write(
                f"Nothing to prune: no finished run ended before {iso_time(cutoff, timespec='seconds')} is free to go."
            )
        if report.kept_unarchived:
            self.stdout.write(
                f"Kept {_count(len(report.kept_unarchived), 'run')} whose audit events are still in the database "
                f"({_ids(report.kept_unarchived)}): archive them first (manage.py archive_audit --before DATE)."
            )
        if report.kept_open_request:
            self.stdout.write(
                f"Kept {_count(len(report.kept_open_request), 'run')} with a request still open "
                f"({_ids(report.kept_open_request)})."
            )
        if report.kept_active:
            self.stdout.write(
                f"Kept {_count(len(report.kept_active), 'queued, running or waiting run')} ({_ids(report.kept_active)}): "
                "active runs are never pruned."
            )
