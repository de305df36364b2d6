"""Issue 36: ``Policy.reject_options``, the named reasons a reviewer may pick when declining."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("approvals", "0023_run_timeout_counts_waiting")]

    operations = [
        migrations.AddField(
            model_name="policy",
            name="reject_options",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text='Reasons a reviewer may pick when declining, each {"key": "too_large", "label": "Too '
                'large", "text": "what the model reads"}; a request\'s own data.reject_options come first.',
            ),
        ),
    ]
