# Agent runs, their transcripts, resumable requests and retries (written by hand so it holds
# only these changes; other work in progress migrates separately).

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

import approvals.audit


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0003_remote_hosts_and_api_tokens"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="kind",
            field=models.CharField(choices=[("tool", "Tool"), ("agent", "Agent")], default="tool", max_length=10),
        ),
        migrations.AlterField(
            model_name="run",
            name="tool",
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.AddField(
            model_name="run",
            name="agent_prompt",
            field=models.TextField(blank=True),
        ),
        migrations.AddField(
            model_name="run",
            name="agent_model",
            field=models.CharField(blank=True, max_length=100),
        ),
        migrations.AddField(
            model_name="run",
            name="agent_messages",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="retry_of",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="retries",
                to="approvals.run",
            ),
        ),
        migrations.AddField(
            model_name="request",
            name="resumable",
            field=models.BooleanField(default=False),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="action",
            field=models.CharField(
                choices=[
                    ("run.started", "Run Started"),
                    ("run.cancel_requested", "Run Cancel Requested"),
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
                ],
                max_length=40,
            ),
        ),
        migrations.CreateModel(
            name="TranscriptEntry",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("seq", models.PositiveIntegerField()),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("prompt", "Prompt"),
                            ("thinking", "Thinking"),
                            ("assistant", "Assistant"),
                            ("tool_result", "Tool Result"),
                            ("pending", "Pending"),
                            ("asked", "Asked"),
                            ("waiting", "Waiting"),
                            ("answer", "Answer"),
                            ("resumed", "Resumed"),
                            ("stopped", "Stopped"),
                            ("finished", "Finished"),
                        ],
                        max_length=20,
                    ),
                ),
                ("turn", models.PositiveIntegerField(blank=True, null=True)),
                ("text", models.TextField(blank=True)),
                ("call_id", models.CharField(blank=True, max_length=200)),
                ("tool", models.CharField(blank=True, max_length=200)),
                ("args", models.JSONField(blank=True, null=True)),
                ("is_error", models.BooleanField(blank=True, null=True)),
                ("data", models.JSONField(blank=True, null=True)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "request",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="approvals.request",
                    ),
                ),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="transcript", to="approvals.run"
                    ),
                ),
            ],
            options={
                "ordering": ["run", "seq"],
                "constraints": [models.UniqueConstraint(fields=("run", "seq"), name="transcript_entry_seq_unique")],
            },
        ),
        # Seal events written before the hash chain existed.
        migrations.RunPython(approvals.audit.backfill_chain, migrations.RunPython.noop),
    ]
