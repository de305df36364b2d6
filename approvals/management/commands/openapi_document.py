"""Print the API's OpenAPI document as JSON, the one ``/api/v1/openapi.json`` serves, for the docs site.

``mkdocs build`` runs it (docs/hooks/api_reference.py) to render the API reference page, so the reference is
made from the same declaration as the live API, with the served tools' names in its enum.
"""

import json
from typing import Any

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand

from approvals.runs.toolkit import get_toolkit
from approvals.web import openapi


class Command(BaseCommand):
    help = "Print the OpenAPI document of /api/v1/ as JSON, with the tools this console serves."

    def handle(self, *args: Any, **options: Any) -> None:
        toolkit = async_to_sync(get_toolkit)()
        document = openapi.document(tool_names=[tool.name for tool in toolkit.tools()])
        self.stdout.write(json.dumps(document, indent=2, ensure_ascii=False))
