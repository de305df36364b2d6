"""Four-eyes becomes opt-in: ``Policy.starter_may_answer`` is a plain yes/no, yes by default.

Before, an empty value meant "no for approvals (four-eyes), yes for other kinds". A
policy left empty that governs approvals (its kind is ``approval`` or any kind) keeps
four-eyes, so no team loses a check it had on upgrade; other empty policies become yes.
"""

from django.apps.registry import Apps
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor


def keep_four_eyes_where_it_applied(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    Policy = apps.get_model("approvals", "Policy")
    Policy.objects.filter(starter_may_answer__isnull=True, kind__in=["", "approval"]).update(starter_may_answer=False)
    Policy.objects.filter(starter_may_answer__isnull=True).update(starter_may_answer=True)


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0009_audit_lockout_action"),
    ]

    operations = [
        migrations.RunPython(keep_four_eyes_where_it_applied, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="policy",
            name="starter_may_answer",
            field=models.BooleanField(
                default=True,
                help_text="May whoever started the run (or opened the request) answer it? Untick for four-eyes: "
                "someone else must. Declining or cancelling their own is always allowed.",
            ),
        ),
    ]
