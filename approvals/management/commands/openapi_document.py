"""Print the API's OpenAPI document as JSON: ``manage.py openapi_document > openapi.json``.

The same document /api/v1/openapi.json serves, tools included, generated from approvals/web/schemas.py;
the docs site builds its API reference from this output.
"""

import asyncio
import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from approvals.runs.toolkit import close_toolkit, get_toolkit
from approvals.web.api import document


async def _served_tool_names() -> list[str]:
    try:
        return [tool.name for tool in (await get_toolkit()).tools()]
    finally:
        await close_toolkit()  # its MCP servers end with this command


class Command(BaseCommand):
    help = "Print the OpenAPI 3.1 document of /api/v1/ as JSON, with the tools this console's settings serve."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--indent", type=int, default=2, help="Spaces per level (0: one line).")

    def handle(self, *args: Any, indent: int = 2, **options: Any) -> None:
        spec = document(tool_names=asyncio.run(_served_tool_names()))
        self.stdout.write(json.dumps(spec, indent=indent or None, ensure_ascii=False))
