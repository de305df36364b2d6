"""The docs site's API reference (docs/hooks/api_reference.py), rendered from the console's OpenAPI document.

``make docs`` builds the whole site with ``--strict``; this checks what the generated page says: every
operation, each of its parameters and status codes, and every named schema, none left out.
"""

import importlib.util

from approvals.runs.toolkit import load_tool_modules
from approvals.web.api import document as openapi_document
from tests.support.live_console import REPO

METHODS = ("get", "post", "put", "patch", "delete")


def reference_hook():
    spec = importlib.util.spec_from_file_location("api_reference", REPO / "docs" / "hooks" / "api_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_names_every_operation_parameter_status_and_schema():
    document = openapi_document(tool_names=[tool.name for tool in load_tool_modules()])
    page = reference_hook().markdown(document)
    prefix = document.get("servers", [{"url": ""}])[0]["url"].rstrip("/")
    for path, item in document["paths"].items():
        full = path if path.startswith(prefix) else prefix + path
        for method in METHODS:
            if method not in item:
                continue
            section = page.split(f"## `{method.upper()} {full}`\n", 1)[1].split("\n## ", 1)[0]
            for parameter in item[method].get("parameters", []):
                assert f"- `{parameter['name']}` (" in section, (method, path, parameter["name"])
            for status in item[method]["responses"]:
                assert f"- **{status}**: " in section, (method, path, status)
    for name in document["components"]["schemas"]:
        assert f"### {name} {{#schema-{name.lower()}}}" in page


def test_the_reference_shows_the_served_tools_in_the_run_schema():
    document = openapi_document(tool_names=["deploy", "transfer"])
    page = reference_hook().markdown(document)
    assert '`"deploy"`, `"transfer"`' in page
