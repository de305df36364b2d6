"""Issue 36, a record from request to execution: ``Request.execution_state/_message/_at`` (all null or empty on
the rows there are: nothing was recorded before), and the audit actions ``request.executing``/``request.executed``."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0024_policy_reject_options"),
    ]

    operations = [
        migrations.AddField(
            model_name="request",
            name="execution_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="request",
            name="execution_message",
            field=models.TextField(blank=True),
        ),
        migrations.AddField(
            model_name="request",
            name="execution_state",
            field=models.CharField(blank=True, max_length=20, null=True),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="action",
            field=models.CharField(
                choices=[
                    ("run.started", "Run Started"),
                    ("run.cancel_requested", "Run Cancel Requested"),
                    ("run.cancel_refused", "Run Cancel Refused"),
                    ("run.finished", "Run Finished"),
                    ("run.interrupted", "Run Interrupted"),
                    ("run.adopted", "Run Adopted"),
                    ("run.transcript", "Run Transcript"),
                    ("request.opened", "Request Opened"),
                    ("request.answered", "Request Answered"),
                    ("request.declined", "Request Declined"),
                    ("request.cancelled", "Request Cancelled"),
                    ("request.expired", "Request Expired"),
                    ("request.credentials_refused", "Request Credentials Refused"),
                    ("request.approval_recorded", "Request Approval Recorded"),
                    ("request.answer_refused", "Request Answer Refused"),
                    ("request.claimed", "Request Claimed"),
                    ("request.released", "Request Released"),
                    ("request.handed", "Request Handed"),
                    ("request.escalated", "Request Escalated"),
                    ("request.kept_open", "Request Kept Open"),
                    ("request.extended", "Request Extended"),
                    ("request.reminded", "Request Reminded"),
                    ("request.executing", "Request Executing"),
                    ("request.executed", "Request Executed"),
                    ("auth.locked_out", "Auth Locked Out"),
                    ("audit.archived", "Audit Archived"),
                ],
                max_length=40,
            ),
        ),
    ]
