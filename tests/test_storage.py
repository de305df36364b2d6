"""Collected static files (toolnexus_site/storage.py): hashed names the ES modules import as their pages preload them.

The console's own modules are read as the session collected them (tests/conftest.py); the import forms
and the quick re-collect are tried on modules of the test's own, collected into a folder of its own.
"""

import gzip
import posixpath
import re
from pathlib import Path

import brotli
import pytest
from django.conf import settings
from django.contrib.staticfiles.storage import staticfiles_storage
from django.core.management import call_command
from django.templatetags.static import static

from approvals.templatetags.modules import module_preloads
from tests.support.static_files import source_name

# Every way a module names another by a relative path: `import ... from`, `export ... from`, `import "..."`
# and `import("...")`.
SPECIFIER = re.compile(r"""\bfrom\s*["'](\.\.?/[^"']+)["']|\bimport\s*\(?\s*["'](\.\.?/[^"']+)["']""")
HASHED = re.compile(r"\.[0-9a-f]{12}\.js$")
PAGES = {
    "dashboard": ["approvals/dashboard.js", "approvals/agent_form.js"],
    "run": ["approvals/run.js", "approvals/transcript.js"],
    "request": ["approvals/request_page.js"],
}


def specifiers(text):
    return [first or second for first, second in SPECIFIER.findall(text)]


def collected(name):
    return (Path(settings.STATIC_ROOT) / name).read_text()


def test_every_import_in_every_collected_module_names_the_hashed_module_it_meant():
    modules = {
        name: hashed for name, hashed in staticfiles_storage.hashed_files.items() if name.startswith("approvals/")
    }
    modules = {name: hashed for name, hashed in modules.items() if name.endswith(".js")}
    assert len(modules) > 30  # the console's modules, not an empty manifest
    for name, hashed in modules.items():
        source = specifiers((Path(settings.BASE_DIR) / "static" / name).read_text())
        rewritten = specifiers(collected(hashed))
        assert len(rewritten) == len(source), name
        for before, after in zip(source, rewritten):
            meant = posixpath.normpath(posixpath.join(posixpath.dirname(name), before))
            assert HASHED.search(after), f"{hashed} still imports {after}: the browser would fetch {meant} twice"
            assert posixpath.normpath(posixpath.join(posixpath.dirname(hashed), after)) == modules[meant]


@pytest.mark.parametrize("page", PAGES)
def test_a_page_preloads_the_same_hashed_urls_its_modules_import(page):
    preloaded = re.findall(r'<link rel="modulepreload" href="([^"]+)">', module_preloads(*PAGES[page]))
    assert len(preloaded) == len(set(preloaded)) and all(HASHED.search(url) for url in preloaded)
    imported = set()
    for url in preloaded:
        for specifier in specifiers(collected(url.removeprefix(settings.STATIC_URL))):
            imported.add(posixpath.normpath(posixpath.join(posixpath.dirname(url), specifier)))
    # What the modules import is all preloaded, under the same URL: the browser fetches each module once.
    assert imported <= set(preloaded)
    assert {source_name(url) for url in preloaded} >= set(PAGES[page])


def test_a_name_collectstatic_did_not_see_fails_loudly():
    with pytest.raises(ValueError, match="Missing staticfiles manifest entry"):
        static("approvals/no-such-module.js")


@pytest.fixture
def own_static(settings, tmp_path):
    """Collect only ``tmp_path/src`` into ``tmp_path/root``: ``write(name, text)`` adds a source file."""
    source = tmp_path / "src"
    source.mkdir()
    settings.STATICFILES_DIRS = [source]
    settings.STATICFILES_FINDERS = ["django.contrib.staticfiles.finders.FileSystemFinder"]
    settings.STATIC_ROOT = tmp_path / "root"

    def write(name, text):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text(text)

    return write


def collect():
    call_command("collectstatic", "--noinput", verbosity=0)
    return staticfiles_storage.hashed_files


def test_every_import_form_is_rewritten_to_the_hashed_name(own_static):
    for name in "abcdefghi":
        own_static(f"forms/lib/{name}.js", f"export const {name} = 1;\n")
    own_static("forms/lib/up.js", 'import { a } from "./a.js";\nexport const up = a;\n')
    forms = [
        'import { a } from "./lib/a.js";',
        'import {\n  b,\n  b as bee,\n} from "./lib/b.js";',
        'import * as c from "./lib/c.js";',
        'import d from "./lib/d.js";',
        'import "./lib/e.js";',
        'export { f } from "./lib/f.js";',
        'export * from "./lib/g.js";',
        'const h = await import("./lib/h.js");',
        "import { i } from './lib/i.js';",
        'import { up } from "./lib/../lib/up.js";',
    ]
    own_static("forms/main.js", "\n".join(forms) + "\n")
    hashed = collect()
    text = (Path(settings.STATIC_ROOT) / hashed["forms/main.js"]).read_text()
    rewritten = specifiers(text)
    assert len(rewritten) == len(forms)
    for specifier in rewritten:
        assert "forms/" + posixpath.normpath(specifier) in hashed.values(), specifier


def test_a_collect_with_nothing_changed_compresses_nothing_again_and_an_edit_anew(own_static):
    own_static("quick/a.js", "export const a = '" + "words " * 200 + "';\n")
    own_static("quick/main.js", 'import { a } from "./a.js";\nexport const main = a;\n// ' + "more words " * 100 + "\n")
    first = collect()
    root = Path(settings.STATIC_ROOT)
    copies = sorted(root.rglob("*.br")) + sorted(root.rglob("*.gz"))
    assert len(copies) == 8  # a.js, main.js and their hashed names, each in brotli and gzip
    written = {path: path.stat().st_mtime_ns for path in copies}

    assert collect() == first
    assert {path: path.stat().st_mtime_ns for path in copies} == written

    own_static("quick/a.js", "export const a = '" + "other words " * 200 + "';\n")
    second = collect()
    assert second["quick/a.js"] != first["quick/a.js"] and second["quick/main.js"] != first["quick/main.js"]
    for name in ("quick/a.js", second["quick/a.js"], second["quick/main.js"]):
        content = (root / name).read_bytes()
        assert gzip.decompress((root / f"{name}.gz").read_bytes()) == content
        assert brotli.decompress((root / f"{name}.br").read_bytes()) == content
