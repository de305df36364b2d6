"""The Go program in docs/signing.md ("The vectors in Go") agrees with every canonical-JSON vector: built with
Debian's Go (standard library only, no module proxy) and run over docs/vectors/canonical-json.json."""

import json
import re
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "signing.md"
VECTORS = REPO / "docs" / "vectors" / "canonical-json.json"
MARKER = "<!-- recipe: run by tests/test_canonical_json_go.py, built with Debian's Go and run over docs/vectors/canonical-json.json -->"  # noqa: E501


def the_go_program():
    """The ```go block right below MARKER in docs/signing.md."""
    text = PAGE.read_text()
    found = re.search(re.escape(MARKER) + r"\n```go\n(.*?)\n```\n", text, re.DOTALL)
    assert found, f"docs/signing.md has no Go block below {MARKER}"
    return found.group(1) + "\n"


def test_the_go_program_canonicalizes_every_vector_as_python_does(tmp_path):
    go = shutil.which("go")
    assert go, "Debian's golang-go is needed to build the docs' Go vectors program (.ci/run installs it)"
    (tmp_path / "main.go").write_text(the_go_program())
    (tmp_path / "go.mod").write_text("module vectors\n\ngo 1.19\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GOPROXY": "off", "GOFLAGS": "-mod=mod"}
    env["GOCACHE"] = str(tmp_path / "go-cache")
    built = subprocess.run([go, "build", "-o", "vectors", "."], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    done = subprocess.run(
        [str(tmp_path / "vectors"), str(VECTORS)], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    count = len(json.loads(VECTORS.read_text())["vectors"])
    assert done.stdout.splitlines()[-1] == f"{count} of {count} vectors agree", done.stdout


def test_the_go_program_fails_on_a_vector_that_disagrees(tmp_path):
    """A wrong vector is caught: the check is not vacuous."""
    go = shutil.which("go")
    assert go, "Debian's golang-go is needed"
    (tmp_path / "main.go").write_text(the_go_program())
    (tmp_path / "go.mod").write_text("module vectors\n\ngo 1.19\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GOPROXY": "off", "GOCACHE": str(tmp_path / "go-cache")}
    built = subprocess.run([go, "build", "-o", "vectors", "."], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    wrong = {"vectors": [{"name": "25.0 printed as 25.0", "json": "[25.0]", "canonical": "[25.0]", "sha256": "0"}]}
    (tmp_path / "wrong.json").write_text(json.dumps(wrong))
    done = subprocess.run(
        [str(tmp_path / "vectors"), "wrong.json"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "FAIL 25.0 printed as 25.0" in done.stdout and "got  [25]" in done.stdout
