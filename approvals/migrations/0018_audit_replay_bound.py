"""A checkpoint keeps the newest created_at it archived, so an archived row put back is refused by the sealers."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("approvals", "0017_audit_sealed_after_commit")]

    operations = [
        migrations.AddField(
            model_name="auditcheckpoint",
            name="archived_created_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
