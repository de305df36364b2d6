"""Runs, the §10 requests they raise, the append-only audit trail, and API tokens.

The database is the source of truth: every dashboard can be rebuilt from the first
three tables alone, and the audit trail's ids are the event sequence numbers the
dashboards use to notice a missed notification.
"""

from approvals.models.audit import RESOLVING_ACTIONS, AuditCheckpoint, AuditEvent, AuditEventQuerySet
from approvals.models.requests import AnswerReason, DecidedBy, ExecutionState, Request, RequestApproval, RequestStatus
from approvals.models.runs import ACTIVE_RUN_STATUSES, THIS_PROCESS_ID, ConsoleProcess, Run, RunKind, RunStatus
from approvals.models.signing_keys import SigningKey
from approvals.models.team import ON_TIMEOUT_ORDER, ApiToken, OnTimeout, Policy
from approvals.models.transcripts import TranscriptEntry

__all__ = [
    "ACTIVE_RUN_STATUSES",
    "RESOLVING_ACTIONS",
    "THIS_PROCESS_ID",
    "ApiToken",
    "AnswerReason",
    "AuditCheckpoint",
    "AuditEvent",
    "AuditEventQuerySet",
    "ConsoleProcess",
    "DecidedBy",
    "ExecutionState",
    "ON_TIMEOUT_ORDER",
    "OnTimeout",
    "Policy",
    "Request",
    "RequestApproval",
    "RequestStatus",
    "Run",
    "RunKind",
    "RunStatus",
    "SigningKey",
    "TranscriptEntry",
]
