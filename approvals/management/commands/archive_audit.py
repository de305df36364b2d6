"""Move the audit events created before a date to a compressed JSON Lines file, leaving a sealed checkpoint."""

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals.audit.archive import ArchiveError, archive_events, default_actor, unchained_before


def parse_moment(text: str) -> datetime:
    """An ISO date (midnight UTC) or datetime (UTC unless it names its offset)."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise CommandError(
            f"--before takes an ISO date or datetime, such as 2026-06-01 or 2026-06-01T12:00:00Z (got {text!r}).",
            returncode=2,
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


class Command(BaseCommand):
    help = (
        "Move every audit event created before --before (the oldest ones, up to the first created later) to a "
        "gzip-compressed JSON Lines file, delete them, and leave a sealed checkpoint so verify_audit still verifies "
        "the trail. Archiving is itself an audit event."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--before", required=True, help="ISO date or datetime, UTC (2026-06-01).")
        parser.add_argument(
            "--out", help="The archive file (default: var/archive/audit-<first>-<last>.jsonl.gz); never overwritten."
        )
        parser.add_argument("--actor", help="Who archives, for the audit event (default: the OS user).")
        parser.add_argument("--database", default="default", help="Which database (default: default).")

    def handle(
        self,
        *args: Any,
        before: str,
        out: str | None = None,
        actor: str | None = None,
        database: str = "default",
        **options: Any,
    ) -> None:
        moment = parse_moment(before)
        waiting = unchained_before(moment, using=database)  # before its own audit.archived joins them
        try:
            done = archive_events(
                before=moment,
                actor=actor or default_actor(),
                out=Path(out) if out else None,
                using=database,
                progress=lambda step: self.stdout.write(f"  {step}") if options["verbosity"] > 1 else None,
            )
        except ArchiveError as error:
            raise CommandError(str(error), returncode=1) from None
        if done is None:
            self.stdout.write(f"Nothing to archive: no chained event left was created before {moment.isoformat()}.")
            self.say_waiting(waiting, chained_now=False)
            return
        count = done.last - done.first + 1
        noun = "event" if count == 1 else "events"
        reused = " (the file an interrupted run had left)" if done.reused_file else ""
        self.stdout.write(
            self.style.SUCCESS(f"Archived {count} {noun}, #{done.first}–#{done.last}, to {done.path}{reused}.")
        )
        self.stdout.write(f"sha256: {done.sha256}")
        self.stdout.write(f"Checkpoint #{done.checkpoint.pk}: the trail now starts at #{done.last + 1}.")
        self.say_waiting(waiting, chained_now=True)

    def say_waiting(self, waiting: int, chained_now: bool) -> None:
        if waiting:
            noun = "event was" if waiting == 1 else "events were"
            after = (
                "This run chained them after the archived ones: the next archive takes them."
                if chained_now
                else "A running console's sealer chains them within CONSOLE_AUDIT_SEAL_POLL_SECONDS (or run "
                "verify_audit --seal); archive again after."
            )
            self.stdout.write(f"{waiting} older {noun} left: not chained yet, so not archived. {after}")
