# Migrations 0004 and 0008 run ``approvals.audit.backfill_chain``: keep that path importable.
from approvals.audit.chain import backfill_chain  # noqa: F401
