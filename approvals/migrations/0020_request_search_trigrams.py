"""On PostgreSQL, trigram indexes under the inbox's search of open requests.

The search (``inbox._search``) looks for its text anywhere in an open request's prompt, tool, host or
arguments (as JSON text), case-insensitively: ``UPPER(column::text) LIKE UPPER('%text%')``, which no
B-tree serves. At 100,000 open requests it read every row of the table, 190 ms a search
(docs/performance.md, "The inbox at 100,000 open requests on PostgreSQL"). A GIN index of each
expression's trigrams (``pg_trgm``) serves a LIKE with a substring, and the four OR'ed together are
one bitmap. Each holds open requests only: the search lists open requests, and an answered request
leaves the indexes instead of adding to them at every answer.

``pg_trgm`` ships with PostgreSQL and is a trusted extension (13+): the database's owner may create it.
Where the console's role may not, this migration says so and leaves the search as it was
(docs/operations.md, "Search at volume", says how to add the indexes later). SQLite keeps its scan.
"""

from django.apps.registry import Apps
from django.db import DatabaseError, migrations, transaction
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

SEARCHED = ("prompt", "tool", "host", "args")


def index_name(column: str) -> str:
    return f"request_open_{column}_trgm"


def create(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        try:
            with transaction.atomic(using=connection.alias):  # a savepoint: a refusal leaves the migration going
                cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        except DatabaseError as refused:
            print(
                f"\n  pg_trgm could not be created ({str(refused).strip()}): the inbox's search stays unindexed "
                "(docs/operations.md, 'Search at volume')."
            )
            return
        for column in SEARCHED:
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS {quote(index_name(column))} ON {quote('approvals_request')} "
                f"USING gin ((UPPER(({quote(column)})::text)) gin_trgm_ops) WHERE {quote('status')} = 'open'"
            )


def drop(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        for column in SEARCHED:
            cursor.execute(f"DROP INDEX IF EXISTS {connection.ops.quote_name(index_name(column))}")


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0019_request_status_kind_tool_id"),
    ]

    operations = [migrations.RunPython(create, drop, elidable=False)]
