"""Walk the audit trail's keyed hash chain: "N events verified", the key version of each range and the head
to keep (exit 0), or the first altered or missing event (exit 1). Events committed but not chained yet (the
sealer chains them within CONSOLE_AUDIT_SEAL_SECONDS) are each checked against their own MAC and counted;
``--seal`` chains them first. Beside the chain, the console's signature on every answer in the trail and the
digests it binds (approvals/audit/signed_answers.py): "N answers checked: ... verified, ... unsigned", or each
answer that fails named (exit 1)."""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals.audit.archive import verify_archive
from approvals.audit.chain import parse_head, verify_chain
from approvals.audit.signed_answers import AnswerReport, verify_answers, verify_archived_answers
from approvals.models import AuditEvent
from approvals.models.sealing import Unsealable
from approvals.signing.keys import planted_keys, verifying_keys


class Command(BaseCommand):
    help = (
        "Verify the audit trail's hash chain with CONSOLE_AUDIT_KEYS, and each answer's signature and call digest "
        "with the console's signing keys; exits 1 naming the first altered or missing event and each answer that "
        "fails. Keep the printed head outside the database and pass it back with --head."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--database", default="default", help="Which database to check (default: default).")
        parser.add_argument(
            "--head",
            help=(
                "A head an earlier run printed (#<position>:<hash>): it must still be there (with --archive: in "
                "the files given)."
            ),
        )
        parser.add_argument(
            "--archive",
            action="append",
            metavar="FILE",
            help="Verify an archive_audit file on its own chain and against its checkpoint instead (repeatable).",
        )
        parser.add_argument(
            "--seal",
            action="store_true",
            help="First chain the events committed but not chained yet, as the sealer does.",
        )

    def handle(
        self,
        *args: Any,
        database: str = "default",
        head: str | None = None,
        archive: list[str] | None = None,
        seal: bool = False,
        **options: Any,
    ) -> None:
        try:
            expected_head = parse_head(head) if head else None
        except ValueError as error:
            raise CommandError(str(error), returncode=2) from None
        if archive:
            if seal:
                raise CommandError(
                    "--seal chains the trail in the database; --archive checks files instead: give one of them.",
                    returncode=2,
                )
            self.verify_archives([Path(name) for name in archive], database, expected_head)
            return
        if seal:
            try:
                while AuditEvent.objects.using(database).seal_pending():
                    pass
            except Unsealable as error:
                raise CommandError(f"Audit trail check failed: {error}", returncode=1) from None
        report = verify_chain(using=database, head=expected_head)
        # Checked even when the chain fails: an edited payload the chain names may also be an answer that no
        # longer verifies, and each such answer is named.
        signed = verify_answers(verifying_keys(), using=database)
        if not report.ok:
            raise CommandError(
                f"Audit trail check failed after {report.verified} good event(s). {report.problem}"
                + answer_failures(signed),
                returncode=1,
            )
        noun = "event" if report.verified == 1 else "events"
        pending = (
            f", {report.unchained} of them not chained yet (each checked against its own MAC)"
            if report.unchained
            else ""
        )
        self.stdout.write(self.style.SUCCESS(f"{report.verified} {noun} verified{pending}."))
        if report.archived_up_to is not None:
            self.stdout.write(
                f"Events up to #{report.archived_up_to} are archived: the trail starts from checkpoint "
                f"#{report.checkpoints} (verify_audit --archive FILE checks a file)."
            )
        for key_range in report.key_ranges:
            span = (
                f"#{key_range.first}" if key_range.first == key_range.last else f"#{key_range.first}–#{key_range.last}"
            )
            self.stdout.write(f"{span} sealed with key version {key_range.version}.")
        self.write_answers(signed)
        planted = planted_keys()
        if planted:
            self.stdout.write(
                f"Ignored {len(planted)} signing key row(s) whose kid is not their public key's id, so the console "
                f"never registered them (written by hand?): {', '.join(planted)}."
            )
        if report.head:
            self.stdout.write(f"Head: {report.head}")
        if not signed.ok:
            raise CommandError(f"Answer check failed.{answer_failures(signed)}", returncode=1)

    def write_answers(self, signed: AnswerReport) -> None:
        """The answers' line, when the trail holds any: a success, or (with failures) plain, the failures follow."""
        if not signed.checked:
            return
        self.stdout.write(self.style.SUCCESS(signed.summary()) if signed.ok else signed.summary())

    def verify_archives(self, paths: list[Path], database: str, head: tuple[int, str] | None) -> None:
        held_head = head is None
        for path in paths:
            if not path.is_file():
                raise CommandError(f"{path}: no such file.", returncode=2)
            report = verify_archive(path, using=database, head=head)
            held_head = held_head or (head is not None and (report.first or 0) <= head[0] <= (report.last or 0))
            if not report.ok:
                raise CommandError(
                    f"{path}: archive check failed after {report.verified} good event(s). {report.problem}",
                    returncode=1,
                )
            self.stdout.write(
                self.style.SUCCESS(
                    f"{path}: {report.verified} events verified, #{report.first}–#{report.last}, "
                    f"against checkpoint #{report.checkpoint}."
                )
            )
            signed = verify_archived_answers(path, verifying_keys(), using=database)
            if signed.checked:
                self.stdout.write(
                    f"{path}: " + (self.style.SUCCESS(signed.summary()) if signed.ok else signed.summary())
                )
            if not signed.ok:
                raise CommandError(f"{path}: answer check failed.{answer_failures(signed)}", returncode=1)
        if not held_head:
            raise CommandError(
                f"No archive given holds event #{head[0] if head else 0}, the head to check.", returncode=1
            )


def answer_failures(signed: AnswerReport) -> str:
    """Each answer that failed, a line each after the message's first (empty when none did)."""
    if signed.ok:
        return ""
    noun = "answer" if signed.checked == 1 else "answers"
    listed = "".join(f"\n  {failure}" for failure in signed.failures)
    return f"\n{len(signed.failures)} of {signed.checked} {noun} did not verify:{listed}"
