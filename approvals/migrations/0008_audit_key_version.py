import hashlib
import json
import os
from datetime import UTC
from typing import Any

from django.apps.registry import Apps
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

import approvals.audit

SEAL_UNVERIFIED = "CONSOLE_AUDIT_SEAL_UNVERIFIED"


def _legacy_hash(prev_hash: str, event: Any) -> str:  # event: the historical model's, which has no static type
    """The hash an event had before the chain was keyed: sha256 over the fields it covered then."""
    created_at = event.created_at.astimezone(UTC) if event.created_at.tzinfo else event.created_at
    fields = {
        "id": event.pk,
        "action": str(event.action),
        "actor": event.actor,
        "actor_user": event.actor_user_id,
        "run": event.run_id,
        "request": event.request_id,
        "tool": event.tool or "",
        "kind": event.kind or "",
        "payload": json.loads(json.dumps(event.payload if event.payload is not None else {})),
        "created_at": created_at.isoformat(timespec="microseconds"),
    }
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256((prev_hash + canonical).encode("utf-8")).hexdigest()


def seal_a_verified_trail(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Seal the trail with the key only if its unkeyed chain still holds: sealing must not bless old tampering."""
    model = apps.get_model("approvals", "AuditEvent")
    prev_hash = ""
    for event in model.objects.using(schema_editor.connection.alias).order_by("id").iterator(chunk_size=2000):
        if event.prev_hash != prev_hash or event.hash != _legacy_hash(prev_hash, event):
            if os.environ.get(SEAL_UNVERIFIED) != "1":
                raise RuntimeError(
                    f"The audit trail does not verify at event #{event.pk} (altered, or an event before it removed), "
                    "so it is not sealed with the new key. Keep a copy of the database as evidence; to seal the "
                    f"trail as it stands anyway, migrate again with {SEAL_UNVERIFIED}=1."
                )
            break
        prev_hash = event.hash
    approvals.audit.backfill_chain(apps, schema_editor)


class Migration(migrations.Migration):
    """The audit chain becomes keyed: an existing trail that verifies is sealed with CONSOLE_AUDIT_KEYS' newest key."""

    dependencies = [
        ("approvals", "0007_request_expiry_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="key_version",
            field=models.PositiveSmallIntegerField(default=0),
        ),
        migrations.RunPython(seal_a_verified_trail, migrations.RunPython.noop),
    ]
