"""Walk the audit trail's hash chain: "N events verified" (exit 0), or the first altered or missing event (exit 1)."""
from django.core.management.base import BaseCommand, CommandError

from approvals.audit import verify_chain


class Command(BaseCommand):
    help = "Verify the audit trail's hash chain; exits 1 naming the first altered or missing event."

    def add_arguments(self, parser):
        parser.add_argument("--database", default="default", help="Which database to check (default: default).")

    def handle(self, *args, database="default", **options):
        report = verify_chain(using=database)
        if not report.ok:
            raise CommandError(
                f"Audit trail check failed after {report.verified} good event(s). {report.problem}", returncode=1
            )
        noun = "event" if report.verified == 1 else "events"
        self.stdout.write(self.style.SUCCESS(f"{report.verified} {noun} verified."))
