"""An Ed25519 key file for tests that start the console under production settings, which require one
(CONSOLE_SIGNING_KEY_FILE, toolnexus_site/deployment.py), made once per test process and removed at its exit."""

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


@functools.cache
def production_signing_key_file() -> str:
    directory = Path(tempfile.mkdtemp(prefix="console-signing-key-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    path = directory / "signing-key.pem"
    path.write_bytes(
        Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    path.chmod(0o600)
    return str(path)
