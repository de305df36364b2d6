"""``manage.py new_signing_key <path>``: a new Ed25519 key readable by its owner only, never over an existing file."""

import io
import stat

import pytest
from django.core.management import CommandError, call_command

from approvals.signing import keys


def new_signing_key(path):
    out, err = io.StringIO(), io.StringIO()
    call_command("new_signing_key", str(path), stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_it_writes_a_key_only_its_owner_reads_and_prints_its_kid(tmp_path):
    path = tmp_path / "secrets" / "console_signing_key"
    out, err = new_signing_key(path)
    pair = keys.key_pair(keys.read_key_file(path))
    assert out == f"{pair.kid}\n"  # alone on stdout, for a script: kid=$(manage.py new_signing_key ...)
    assert f"key id {pair.kid}, public key {pair.public_b64}" in err
    assert "CONSOLE_SIGNING_KEY_FILE" in err
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [entry.name for entry in path.parent.iterdir()] == ["console_signing_key"]  # no temporary left


def test_two_keys_differ(tmp_path):
    assert new_signing_key(tmp_path / "a")[0] != new_signing_key(tmp_path / "b")[0]


def test_an_existing_file_is_never_overwritten(tmp_path):
    path = tmp_path / "console_signing_key"
    path.write_text("the key a console signs with\n")
    with pytest.raises(CommandError, match=rf"{path} exists already and is left as it is: name a new file"):
        new_signing_key(path)
    assert path.read_text() == "the key a console signs with\n"


def test_a_place_it_cannot_write_is_named(tmp_path):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(CommandError, match=r"a-file/key cannot be written: .*/a-file is not a folder"):
        new_signing_key(tmp_path / "a-file" / "key")
