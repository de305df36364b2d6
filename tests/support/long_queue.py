"""A long queue of open requests, written at once: for the tests of bounded snapshots, pages and counts.

``open_requests_in_bulk`` inserts the rows with ``bulk_create`` (2,000 in well under a
second) rather than through ``decisions.open_request`` one by one: what is tested is
how dashboards and the API read a long queue, not how it was opened. Each row looks
like a remote host's approval or input request (about 1 KB on the wire, as the
issue measured), and some pairs share ``created_at`` to the microsecond, so the
order's tie-break on ``id`` is exercised too. Usable from a test and from
``manage.py shell -c`` against a live console's database.
"""

from datetime import timedelta

from django.utils import timezone

KINDS = ("approval", "approval", "input")
INPUT_SCHEMA = {
    "type": "object",
    "properties": {"env": {"type": "string", "enum": ["staging", "production"]}},
    "required": ["env"],
}


def bulk_request(index, prefix, created_at):
    from approvals.models import Request

    kind = KINDS[index % len(KINDS)]
    data = {
        "order": f"A-{index:06d}",
        "amount": 100 + index,
        "currency": "EUR",
        "note": f"Refund for order A-{index:06d}: " + "the customer reports a damaged parcel. " * 12,
    }
    if kind == "input":
        data = {"schema": INPUT_SCHEMA, "note": data["note"]}
    return Request(
        id=f"{prefix}-{index:05d}",
        kind=kind,
        prompt=f"Refund {100 + index} EUR on order A-{index:06d}?",
        data=data,
        tool="refund",
        args={"order": f"A-{index:06d}", "amount": 100 + index},
        host="billing-bot",
        created_at=created_at,
    )


def open_requests_in_bulk(count, prefix="queued"):
    """Insert ``count`` open requests, oldest first, ending a moment ago; returns their ids in the dashboard's order.

    Every tenth request shares the ``created_at`` of the one before it (ids then decide the order).
    """
    from approvals.models import Request

    start = timezone.now() - timedelta(milliseconds=count + 1000)
    rows, moment = [], start
    for index in range(count):
        if index % 10 != 1:
            moment = start + timedelta(milliseconds=index)
        rows.append(bulk_request(index, prefix, moment))
    Request.objects.bulk_create(rows, batch_size=500)
    return [row.id for row in rows]
