"""A MkDocs hook: the API reference page, generated at build time from the console's OpenAPI document.

``manage.py openapi_document`` prints the document the live console serves at ``/api/v1/openapi.json``; this
hook renders its endpoints, parameters, bodies and status codes as ``api-reference.md`` and ships the raw
JSON beside it as ``openapi.json``, so the reference cannot drift from the declaration it is made from.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

Schema = dict[str, Any]
METHODS = ("get", "post", "put", "patch", "delete")
PAGE = "api-reference.md"
RAW = "openapi.json"


def openapi_document(repo: Path) -> Schema:
    """The document, from ``manage.py openapi_document`` run on a throw-away database (nothing is written)."""
    with tempfile.TemporaryDirectory() as scratch:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "toolnexus_site.settings",
            "CONSOLE_SQLITE_PATH": str(Path(scratch) / "docs.sqlite3"),
        }
        done = subprocess.run(
            [sys.executable, "manage.py", "openapi_document"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    if done.returncode != 0:
        raise RuntimeError(f"manage.py openapi_document failed ({done.returncode}):\n{done.stderr}")
    document: Schema = json.loads(done.stdout)
    return document


def line(text: object) -> str:
    """Text for one list item: one line."""
    return " ".join(str(text).split())


def ref_name(schema: Schema) -> str | None:
    ref = schema.get("$ref")
    return ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None


def resolve(document: Schema, schema: Schema) -> Schema:
    name = ref_name(schema)
    if name is None:
        return schema
    found: Schema = document.get("components", {}).get("schemas", {}).get(name, {})
    return found


def type_of(schema: Any) -> str:
    """A schema in a few words: ``Run``, ``string (open, resolved)``, ``array of RequestView``, ``integer ≥ 0``."""
    if not isinstance(schema, dict):
        return "any"
    name = ref_name(schema)
    if name is not None:
        return f"[{name}](#schema-{name.lower()})"
    for combiner in ("oneOf", "anyOf", "allOf"):
        if combiner in schema:
            return (" or " if combiner != "allOf" else " and ").join(type_of(part) for part in schema[combiner])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        kind = " or ".join(str(part) for part in kind)
    if kind == "array":
        kind = f"array of {type_of(schema.get('items', {}))}"
    words = [str(kind)]
    if "enum" in schema:
        words.append("(" + ", ".join(f"`{json.dumps(value)}`" for value in schema["enum"]) + ")")
    for key, sign in (("minimum", "≥"), ("maximum", "≤"), ("exclusiveMinimum", ">"), ("exclusiveMaximum", "<")):
        if key in schema:
            words.append(f"{sign} {schema[key]}")
    for key, word in (("minLength", "at least"), ("maxLength", "at most")):
        if key in schema:
            words.append(f"{word} {schema[key]} characters")
    if "format" in schema:
        words.append(f"({schema['format']})")
    return " ".join(words)


def properties_list(document: Schema, schema: Schema) -> list[str]:
    """An object's properties, one item each (a list reads on a phone where a wide table would not)."""
    body = resolve(document, schema)
    properties = body.get("properties")
    if not isinstance(properties, dict) or not properties:
        return [type_of(schema), ""]
    required = set(body.get("required", []))
    lines = []
    for name, field in properties.items():
        description = field.get("description", "") if isinstance(field, dict) else ""
        facts = f"{type_of(field)}{', required' if name in required else ''}"
        lines.append(f"- `{name}` ({facts}){': ' + line(description) if description else ''}")
    return [*lines, ""]


def json_body(content: Any) -> Schema | None:
    if not isinstance(content, dict):
        return None
    media = content.get("application/json") or next(iter(content.values()), None)
    if not isinstance(media, dict):
        return None
    schema = media.get("schema")
    return schema if isinstance(schema, dict) else None


def operation(document: Schema, method: str, path: str, op: Schema, shared: list[Schema]) -> list[str]:
    lines = [f"## `{method.upper()} {path}`", ""]
    if op.get("summary"):
        lines += [str(op["summary"]), ""]
    if op.get("description"):
        lines += [str(op["description"]), ""]
    if op.get("security") == []:
        lines += ["No login needed.", ""]
    parameters = [resolve(document, p) for p in [*shared, *op.get("parameters", [])]]
    if parameters:
        lines += ["**Parameters**", ""]
        for parameter in parameters:
            facts = f"{parameter.get('in')}, {type_of(parameter.get('schema', {}))}"
            facts += ", required" if parameter.get("required") else ""
            description = parameter.get("description", "")
            lines.append(f"- `{parameter.get('name')}` ({facts}){': ' + line(description) if description else ''}")
        lines.append("")
    request_body = op.get("requestBody")
    if isinstance(request_body, dict):
        lines += [
            "**Request body**" + (f": {request_body['description']}" if request_body.get("description") else ""),
            "",
        ]
        schema = json_body(request_body.get("content"))
        if schema is not None:
            lines += properties_list(document, schema)
    lines += ["**Responses**", ""]
    for status, response in op.get("responses", {}).items():
        response = resolve(document, response)
        schema = json_body(response.get("content"))
        returned = f" Body: {type_of(schema)}." if schema else ""
        lines.append(f"- **{status}**: {line(response.get('description', ''))}{returned}")
    return [*lines, ""]


def markdown(document: Schema) -> str:
    """The reference page: every operation in the document's order, then every named schema."""
    info = document.get("info", {})
    servers = document.get("servers") or [{"url": ""}]
    prefix = str(servers[0].get("url", "")).rstrip("/")
    lines = [
        "# API reference",
        "",
        f"{info.get('title', 'The API')}, version {info.get('version', '?')}, OpenAPI {document.get('openapi', '?')}. "
        f"Generated when the site was built, from the document the console serves at `{prefix}/openapi.json`; "
        f"the same document as a file: [{RAW}]({RAW}). How to call it, with examples: [The JSON API](api.md).",
        "",
    ]
    if info.get("description"):
        lines += [str(info["description"]), ""]
    for path, item in document.get("paths", {}).items():
        full = path if path.startswith(prefix) else prefix + path
        for method in METHODS:
            if method in item:
                lines += operation(document, method, full, item[method], item.get("parameters", []))
    schemas = document.get("components", {}).get("schemas", {})
    if schemas:
        lines += ["## Schemas", ""]
        for name, schema in schemas.items():
            lines += [f"### {name} {{#schema-{name.lower()}}}", ""]
            if isinstance(schema, dict) and schema.get("description"):
                lines += [str(schema["description"]), ""]
            lines += properties_list(document, schema if isinstance(schema, dict) else {})
    return "\n".join(lines) + "\n"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated page and the raw document to the site."""
    repo = Path(config.config_file_path).resolve().parent
    document = openapi_document(repo)
    files.append(File.generated(config, PAGE, content=markdown(document)))
    files.append(File.generated(config, RAW, content=json.dumps(document, indent=2, ensure_ascii=False) + "\n"))
    return files
