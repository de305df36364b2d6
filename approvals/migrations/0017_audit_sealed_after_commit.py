"""Audit events are written in one INSERT with their own MAC and chained after their commit (issue 34).

``position`` is an event's place in the chain; ``nonce`` and ``mac`` its own HMAC from the INSERT on.
Events written before this were chained in id order as they were inserted: their position is their id.
So the checkpoints archive_audit left (0016), which name ids, name their positions from here on.
Before this, on PostgreSQL, the console chose each id itself (the newest plus one, under its table lock) and
the table's id sequence never moved; from here on the INSERT takes the sequence's next value, so the
sequence is set past the ids already used.
"""

from django.apps.registry import Apps
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor


def position_is_id(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    model = apps.get_model("approvals", "AuditEvent")
    table = schema_editor.connection.ops.quote_name(model._meta.db_table)
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET position = id")
        if schema_editor.connection.vendor == "postgresql":
            cursor.execute(
                f"SELECT setval(pg_get_serial_sequence(%s, 'id'), COALESCE(MAX(id), 1), MAX(id) IS NOT NULL) FROM {table}",
                [model._meta.db_table],
            )


class Migration(migrations.Migration):
    dependencies = [("approvals", "0016_audit_checkpoints")]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="position",
            field=models.PositiveBigIntegerField(blank=True, null=True, unique=True),
        ),
        migrations.AddField(
            model_name="auditevent",
            name="nonce",
            field=models.CharField(blank=True, max_length=32, null=True, unique=True),
        ),
        migrations.AddField(
            model_name="auditevent",
            name="mac",
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.RunPython(position_is_id, migrations.RunPython.noop, elidable=False),
    ]
