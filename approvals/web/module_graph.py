"""The static ES modules a page's entry module imports, directly or not: what the browser will fetch.

Without the list the browser finds a module's imports only once that module has arrived, so a
page of 28 modules loads in as many rounds as its import chain is deep. Announcing every module
up front with ``<link rel="modulepreload">`` fetches them all at once.
"""

import re
from functools import lru_cache
from pathlib import PurePosixPath

from django.conf import settings
from django.contrib.staticfiles import finders

# `import {a} from "./x.js"`, `export {b} from "./y.js"` (over several lines) and `import "./z.js"`.
STATIC_IMPORT = re.compile(
    r"""^\s*(?:import|export)\b[^;]*?\bfrom\s*["']([^"']+)["']|^\s*import\s*["']([^"']+)["']""", re.M
)


def imported_modules(entry: str) -> list[str]:
    """Static paths (like ``approvals/console/rows.js``) of every relative module ``entry`` imports, transitively,
    in a stable order, without ``entry`` itself; re-read on each call when DEBUG is on, read once otherwise."""
    if settings.DEBUG:
        return _closure(entry)
    return _cached_closure(entry)


@lru_cache(maxsize=32)
def _cached_closure(entry: str) -> list[str]:
    return _closure(entry)


def _closure(entry: str) -> list[str]:
    found: list[str] = []
    pending = [entry]
    while pending:
        current = pending.pop(0)
        for imported in _direct_imports(current):
            if imported != entry and imported not in found:
                found.append(imported)
                pending.append(imported)
    return found


def _direct_imports(path: str) -> list[str]:
    located = finders.find(path)
    if located is None:
        raise FileNotFoundError(f"static module {path!r} was not found by the staticfiles finders")
    with open(located, encoding="utf-8") as source:
        text = source.read()
    folder = PurePosixPath(path).parent
    modules = []
    for match in STATIC_IMPORT.finditer(text):
        specifier = match.group(1) or match.group(2)
        if specifier.startswith("."):  # relative: one of ours; a bare or absolute specifier is not ours to preload
            modules.append(_normalise(folder / specifier))
    return modules


def _normalise(path: PurePosixPath) -> str:
    parts: list[str] = []
    for part in path.parts:
        if part == "..":
            parts.pop()
        elif part != ".":
            parts.append(part)
    return "/".join(parts)
