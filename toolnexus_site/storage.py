"""Where ``collectstatic`` puts the static files: hashed names, ES module imports that follow them, compressed copies."""

import gzip
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from whitenoise.storage import CompressedManifestStaticFilesStorage

try:
    import brotli
except ImportError:  # WhiteNoise then writes gzip copies only
    brotli = None


class HashedModulesStorage(CompressedManifestStaticFilesStorage):
    """WhiteNoise's manifest storage (``x.<hash>.js`` beside ``x.js.gz`` and ``x.js.br``), with Django's rewriting
    of ``import ... from "./x.js"`` inside the modules: a module then imports the same hashed URL its page preloads
    (``{% module_preloads %}``), so the browser fetches each module once and may keep it for a year.

    Two shortcuts keep a ``collectstatic`` with nothing changed quick (``make run`` starts with one): modules
    are hashed after the modules they import, so one pass settles every name; a file whose compressed copies
    already hold its content is not compressed again."""

    support_js_module_import_aggregation = True
    # Django's patterns, each kept inside one statement: Django's own let `import "./e.js";` run on to the next
    # `export {f} from "./f.js";`, whose name the export pattern then hashed a second time (a file that does not
    # exist). A specifier is relative (./ or ../), and a static import or export ends with a semicolon.
    _js_module_import_aggregation_patterns = (
        "*.js",
        (
            (
                r"""(?P<matched>import(?P<import>[\s\{][^;]*?|\*\s*as\s*\w+)\s*from\s*['"](?P<url>[./][^'"]*)['"]\s*;)""",
                """import%(import)s from "%(url)s";""",
            ),
            (
                r"""(?P<matched>export(?P<exports>[\s\{][^;]*?)\s*from\s*['"](?P<url>[./][^'"]*)['"]\s*;)""",
                """export%(exports)s from "%(url)s";""",
            ),
            (r"""(?P<matched>import\s*['"](?P<url>[./][^'"]*)['"]\s*;)""", """import"%(url)s";"""),
            (r"""(?P<matched>import\(\s*['"](?P<url>[./][^'"]*)['"]\s*\))""", """import("%(url)s")"""),
        ),
    )
    # A name collectstatic did not see is an error on the page that asks for it, not an unhashed fallback.
    manifest_strict = True

    def post_process(self, paths: dict[str, Any], *args: Any, **kwargs: Any) -> Iterator[Any]:
        from approvals.web.module_graph import imported_modules

        def imports_first(name: str) -> int:
            # A module imports fewer modules, transitively, than each module that imports it.
            return len(imported_modules(name)) if name.endswith(".js") else 0

        ordered = {name: paths[name] for name in sorted(paths, key=imports_first)}
        yield from super().post_process(ordered, *args, **kwargs)

    def compress_files(self, paths: Sequence[str]) -> Iterator[Any]:
        yield from super().compress_files([path for path in paths if not self._compressed_copies_current(path)])

    def _compressed_copies_current(self, name: str) -> bool:
        path = self.path(name)
        decompressors: dict[str, Callable[[bytes], bytes]] = {".gz": gzip.decompress}
        if brotli is not None:
            decompressors[".br"] = brotli.decompress
        copies = {suffix: path + suffix for suffix in decompressors}
        if not all(os.path.exists(copy) for copy in copies.values()):
            return False
        with open(path, "rb") as source:
            content = source.read()
        for suffix, copy in copies.items():
            with open(copy, "rb") as compressed:
                if decompressors[suffix](compressed.read()) != content:
                    return False
        return True
