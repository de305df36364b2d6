import approvals.audit
from django.db import migrations, models


class Migration(migrations.Migration):
    """The audit chain becomes keyed: every existing event is sealed again with CONSOLE_AUDIT_KEYS' newest key."""

    dependencies = [
        ("approvals", "0007_request_expiry_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="key_version",
            field=models.PositiveSmallIntegerField(default=0),
        ),
        migrations.RunPython(approvals.audit.backfill_chain, migrations.RunPython.noop),
    ]
