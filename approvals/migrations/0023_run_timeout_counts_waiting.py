"""Issue 35, human-aware time: ``Run.timeout_counts_waiting``.

Runs that exist when this migration runs keep the wall clock they started under (True: their timeout
counts the wait for a person, as before), so a run resumed after the upgrade times out when it always
would have. New runs default to human-aware time (False).
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("approvals", "0022_policy_reminders")]

    operations = [
        # Filled with True for the rows there are, then the default for new rows becomes False.
        migrations.AddField(model_name="run", name="timeout_counts_waiting", field=models.BooleanField(default=True)),
        migrations.AlterField(
            model_name="run", name="timeout_counts_waiting", field=models.BooleanField(default=False)
        ),
    ]
