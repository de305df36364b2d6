"""The open requests' index by kind and tool holds their id too, so "I may answer" counts from the index.

Its total leaves out the requests the viewer approved (their ids), and a dashboard's totals by kind and
tool count ids: without the id in the index, both read every open request's row, 34 and 38 ms of
PostgreSQL's time at 100,000 open (docs/performance.md, "The inbox at 100,000 open requests on PostgreSQL").
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0018_audit_replay_bound"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="request",
            name="request_status_kind_tool",
        ),
        migrations.AddIndex(
            model_name="request",
            index=models.Index(fields=["status", "kind", "tool", "id"], name="request_status_kind_tool_id"),
        ),
    ]
