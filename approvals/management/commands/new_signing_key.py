"""Make a new Ed25519 key for the console to sign answers with, for CONSOLE_SIGNING_KEY_FILE (docs/signing.md)."""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals.signing import keys


class Command(BaseCommand):
    help = (
        "Write a new Ed25519 signing key (PKCS#8 PEM, readable by its owner only) to PATH and print its key id; "
        "an existing file is never overwritten. Point CONSOLE_SIGNING_KEY_FILE at it and restart the consoles."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="Where to write the key, e.g. secrets/console_signing_key.")

    def handle(self, *args: Any, path: Path, **options: Any) -> None:
        try:
            pair = keys.key_pair(keys.write_new_key(path))
        except FileExistsError:
            if not path.is_file():  # a file where its folder should be
                raise CommandError(f"{path} cannot be written: {path.parent} is not a folder.", returncode=1) from None
            raise CommandError(
                f"{path} exists already and is left as it is: name a new file (a console may be signing with that one).",
                returncode=1,
            ) from None
        except OSError as error:
            raise CommandError(f"{path} cannot be written ({error.strerror}).", returncode=1) from None
        self.stdout.write(pair.kid)
        self.stderr.write(
            f"Wrote a new Ed25519 signing key to {path}, key id {pair.kid}, public key {pair.public_b64}.\n"
            "Point CONSOLE_SIGNING_KEY_FILE at it and restart every console; hosts pin the new key beside the old "
            'one (docs/signing.md, "Rotating the key").'
        )
