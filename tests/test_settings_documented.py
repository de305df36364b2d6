"""Every environment variable the code reads is on docs/settings.md, with its default.

The reads are found the way a person greps for them: ``os.environ`` / ``environ.get`` / ``getenv`` and the
settings' own helpers (``_env_list("X")``, ``_flag(environ, "X", ...)``) in Python, ``${X:-...}`` and
``printenv`` in shell, under toolnexus_site/, approvals/, console_remote/ and deploy/. A read through a module
constant (``environ.get(SEAL_UNVERIFIED)``) is followed to the constant's string.
"""

import re

from tests.support.live_console import REPO

SOURCES = ("toolnexus_site", "approvals", "console_remote", "deploy")
NAME = r"[A-Z][A-Z0-9_]*[A-Z0-9]"
PYTHON_READS = (
    re.compile(rf"""(?:environ(?:\.get|\.setdefault)?|getenv)\(\s*["']({NAME})["']"""),
    re.compile(rf"""environ\[\s*["']({NAME})["']\s*\]"""),
    re.compile(rf"""\b_env_\w+\(\s*["']({NAME})["']"""),
    re.compile(rf"""\b_(?:flag|hours|seconds)\(\s*environ,\s*["']({NAME})["']"""),
)
THROUGH_A_CONSTANT = re.compile(rf"""(?:environ(?:\.get)?|getenv)\(\s*({NAME})\b""")
SHELL_READS = (re.compile(rf"\$\{{({NAME})(?::?-[^}}]*)?\}}"), re.compile(rf"\bprintenv\s+\"?({NAME})\b"))
# The secrets read as NAME or from the file NAME_FILE (toolnexus_site/deployment.py SECRETS; entrypoint.sh).
SECRETS = re.compile(r"""SECRETS = \(([^)]*)\)|for name in ([A-Z_ ]+); do""")


def environment_reads():
    """{name: [where it is read]} for every variable read under SOURCES."""
    found = {}
    for top in SOURCES:
        for path in sorted((REPO / top).rglob("*")):
            if path.suffix not in {".py", ".sh"} or "__pycache__" in path.parts:
                continue
            text = path.read_text()
            names = set()
            if path.suffix == ".py":
                for pattern in PYTHON_READS:
                    names.update(pattern.findall(text))
                for constant in THROUGH_A_CONSTANT.findall(text):
                    names.update(re.findall(rf"""^{constant} = ["']({NAME})["']""", text, re.M))
            else:
                for pattern in SHELL_READS:
                    names.update(pattern.findall(text))
            for listed in SECRETS.findall(text):
                for name in re.findall(NAME, " ".join(listed)):
                    names.update({name, f"{name}_FILE"})
            for name in names:
                found.setdefault(name, []).append(str(path.relative_to(REPO)))
    return found


def test_the_reads_are_found():
    reads = environment_reads()
    # One from each way of reading, so a pattern that stops matching is noticed.
    for name in ("CONSOLE_SQLITE_PATH", "TOOLNEXUS_BUILTINS", "CONSOLE_SSL_REDIRECT", "CONSOLE_AUDIT_SEAL_UNVERIFIED"):
        assert name in reads, name
    for name in ("CONSOLE_BIND", "CONSOLE_PORT", "REDIS_URL_FILE", "DJANGO_SECRET_KEY_FILE", "TOOLNEXUS_TOOL_MODULES"):
        assert name in reads, name


def test_every_variable_the_code_reads_is_on_the_settings_page():
    page = (REPO / "docs" / "settings.md").read_text()
    documented = set(re.findall(rf"`({NAME})`", page))
    missing = {name: where for name, where in environment_reads().items() if name not in documented}
    assert not missing, f"read by the code but not on docs/settings.md: {missing}"
