"""Audit events are written in one INSERT with their own MAC and chained after their commit (issue 34).

``position`` is an event's place in the chain; ``nonce`` and ``mac`` its own HMAC from the INSERT on.
Events written before this were chained in id order as they were inserted: their position is their id.
So the checkpoints archive_audit left (0016), which name ids, name their positions from here on.
"""

from django.apps.registry import Apps
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor


def position_is_id(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    model = apps.get_model("approvals", "AuditEvent")
    table = schema_editor.connection.ops.quote_name(model._meta.db_table)
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET position = id")


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
