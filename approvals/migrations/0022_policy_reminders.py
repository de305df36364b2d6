"""Deadline extensions and reminders (issue 35, part 2): how far a request's deadline was moved, the deadline
its reminder was sent for, and a policy's reminder lead time. Follows 0021 (outcomes on expiry)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0021_policy_on_timeout"),
    ]

    operations = [
        migrations.AddField(
            model_name="policy",
            name="remind_minutes_before",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="Notify the answerers again this many minutes before a request's deadline (empty: no reminder).",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="request",
            name="extended_seconds",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="request",
            name="reminded_for_deadline",
            field=models.DateTimeField(blank=True, null=True),
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
                    ("auth.locked_out", "Auth Locked Out"),
                    ("audit.archived", "Audit Archived"),
                ],
                max_length=40,
            ),
        ),
    ]
