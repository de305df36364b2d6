"""After a key rotation: verify the audit chain with every key held, then seal it again with the newest."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from approvals.audit.archive import reseal_checkpoints
from approvals.audit.chain import backfill_chain, sealing_key, verify_chain


class Command(BaseCommand):
    help = (
        "Re-seal the whole audit trail with CONSOLE_AUDIT_KEYS' newest key, after it verifies with the keys "
        "held now; then older key versions can be removed (keep them while you keep archives they sealed)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--database", default="default", help="Which database (default: default).")

    def handle(self, *args: Any, database: str = "default", **options: Any) -> None:
        with transaction.atomic(using=database):
            report = verify_chain(using=database)
            if not report.ok:
                raise CommandError(
                    f"Not re-sealed: the trail does not verify after {report.verified} good event(s). {report.problem}",
                    returncode=1,
                )
            backfill_chain(using=database)
            reseal_checkpoints(using=database)
        version, _ = sealing_key()
        noun = "event" if report.verified == 1 else "events"
        self.stdout.write(self.style.SUCCESS(f"{report.verified} {noun} re-sealed with key version {version}."))
