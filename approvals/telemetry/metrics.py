"""The console's Prometheus metrics: each process counts what happened in it, and reads the waiting work
from the database when scraped (docs/operations.md, "Metrics").

Counters move after a change is committed (``observe_event``, one of ``events.Publishing.observers``) or
where the thing itself happens (a socket accepted, a webhook delivered, the channel layer back). Gauges of
the database's state (open requests, runs) are read by ``DatabaseGauges`` with a query a higher layer
hands down (``read_database_with``), so every process shows the same values: aggregate them with ``max``,
the counters with ``sum``.

Every label takes a bounded set of values: a tool outside the console's toolkit (remote hosts name their
own), a kind the console has no form for, an unknown action all count as ``other``.
"""

import logging
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from channels.db import database_sync_to_async
from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

logger = logging.getLogger(__name__)

OTHER = "other"
# The kinds the console has a form for (review/answers.py); a host may send any other word.
KINDS = frozenset({"approval", "input", "authorization"})
# How an answer reached the door (review.decisions.VIA), and "console" for its own acts (a run withdrawing
# its requests when cancelled, a stopping console).
CHANNELS = frozenset({"web", "api", "bulk"})
CONSOLE = "console"
# What a resolving event says of the request, by action.
OUTCOMES = {
    "request.answered": "answered",
    "request.declined": "declined",
    "request.cancelled": "cancelled",
    "request.expired": "expired",
    "request.approval_recorded": "approval_recorded",
}
DECIDED_BY = ("person", "timeout", CONSOLE)
SOCKETS = ("console", "host")
# A reviewer waits seconds to hours; a day is the longest deadline the docs suggest.
DECISION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400)

# One registry per process, with the process's own CPU, memory and garbage collector.
REGISTRY = CollectorRegistry()
for _collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
    REGISTRY.register(_collector)

ANSWERS = Counter(
    "console_answers",
    "Answers taken by the door, by the channel they came by and what they did.",
    ["channel", "outcome"],
    registry=REGISTRY,
)
DECISION_SECONDS = Histogram(
    "console_request_decision_seconds",
    "From a request's opening to its decision, by outcome and by who decided (person, timeout, console).",
    ["outcome", "decided_by"],
    buckets=DECISION_BUCKETS,
    registry=REGISTRY,
)
EXPIRATIONS = Counter(
    "console_requests_expired",
    "Requests that reached their deadline (or their run's) unanswered.",
    ["kind", "tool"],
    registry=REGISTRY,
)
AUDIT_EVENTS = Counter(
    "console_audit_events", "Audit events committed by this process, by action.", ["action"], registry=REGISTRY
)
LOCKOUTS = Counter(
    "console_lockouts",
    "Accounts or client addresses locked out after repeated failures, by what was locked and where.",
    ["locked", "via"],
    registry=REGISTRY,
)
SOCKETS_CONNECTED = Gauge(
    "console_sockets_connected",
    "Sockets open on this process: console pages and remote hosts.",
    ["kind"],
    registry=REGISTRY,
)
SOCKET_RESYNCS = Counter(
    "console_socket_resyncs",
    "A socket read what it missed from the database: after a gap in the numbers (gap) or when its page asked (asked).",
    ["kind", "cause"],
    registry=REGISTRY,
)
CHANNEL_LAYER_RECONNECTS = Counter(
    "console_channel_layer_reconnects",
    "The run supervisor rejoined the channel layer after it failed (Redis restarting).",
    registry=REGISTRY,
)
RUNS_FINISHED = Counter(
    "console_runs_finished",
    "Runs that ended, by how: succeeded, failed, cancelled, timed_out, interrupted.",
    ["status"],
    registry=REGISTRY,
)
WEBHOOK_DELIVERIES = Counter(
    "console_webhook_deliveries",
    "Webhook messages by how they ended: delivered, failed (after every attempt) or dropped (queue full).",
    ["result"],
    registry=REGISTRY,
)
WEBHOOK_RESULTS = ("delivered", "failed", "dropped")
LOCKED = frozenset({"account", "address"})
LOCKOUT_VIA = frozenset({"login", "api_token", "socket_token"})

# Every label value a counter takes starts at zero, so a rate() sees the first one.
for _kind in SOCKETS:
    SOCKETS_CONNECTED.labels(kind=_kind)
    for _cause in ("gap", "asked"):
        SOCKET_RESYNCS.labels(kind=_kind, cause=_cause)
for _result in WEBHOOK_RESULTS:
    WEBHOOK_DELIVERIES.labels(result=_result)
for _outcome in ("answered", "declined", "cancelled", "approval_recorded"):
    for _channel in (*sorted(CHANNELS), CONSOLE):
        ANSWERS.labels(channel=_channel, outcome=_outcome)
    if _outcome != "approval_recorded":
        for _decided_by in ("person", CONSOLE):
            DECISION_SECONDS.labels(outcome=_outcome, decided_by=_decided_by)
DECISION_SECONDS.labels(outcome="expired", decided_by="timeout")
DECISION_SECONDS.labels(outcome="answered", decided_by="timeout")  # approved with its defaults on expiry
for _locked in sorted(LOCKED):
    for _via in sorted(LOCKOUT_VIA):
        LOCKOUTS.labels(locked=_locked, via=_via)


# -- bounded labels ---------------------------------------------------------------------------------------

_tool_names: Callable[[], Collection[str]] = frozenset


def bound_tools_by(tool_names: Callable[[], Collection[str]]) -> None:
    """Hand down the console's toolkit (its tools' names): any other tool is counted as ``other``."""
    global _tool_names
    _tool_names = tool_names


def tool_label(tool: str) -> str:
    return tool if tool and tool in _tool_names() else OTHER


def kind_label(kind: str) -> str:
    return kind if kind in KINDS else OTHER


_known_actions: frozenset[str] = frozenset()
_finished_statuses: frozenset[str] = frozenset()


def count_actions(actions: Collection[str], finished_run_statuses: Collection[str]) -> None:
    """Hand down the audit trail's actions (``AuditEvent.Action``) and the statuses a run ends in; each
    starts at zero, any other is ``other``."""
    global _known_actions, _finished_statuses
    _known_actions, _finished_statuses = frozenset(actions), frozenset(finished_run_statuses)
    for action in (*_known_actions, OTHER):
        AUDIT_EVENTS.labels(action=action)
    for status in _finished_statuses:
        RUNS_FINISHED.labels(status=status)


# -- after each committed event ------------------------------------------------------------------------------


class OpenedRequest(Protocol):
    created_at: datetime


class CommittedEvent(Protocol):
    """What ``observe_event`` reads of an ``AuditEvent``: its own fields and the request it was recorded with."""

    @property
    def action(self) -> str: ...
    @property
    def actor_user_id(self) -> int | None: ...
    @property
    def payload(self) -> Mapping[str, Any]: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def kind(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def request(self) -> OpenedRequest | None: ...


def observe_event(event: CommittedEvent) -> None:
    """Count one committed event: its action, and for an answer, its channel, outcome and time to decision.

    ``event.request`` is the row the event was recorded with (``events.record`` keeps it: no read here)."""
    action = event.action
    AUDIT_EVENTS.labels(action=action if action in _known_actions else OTHER).inc()
    if action in ("run.finished", "run.interrupted"):
        status = "interrupted" if action == "run.interrupted" else str(event.payload.get("status"))
        RUNS_FINISHED.labels(status=status if status in _finished_statuses else OTHER).inc()
        return
    if action == "auth.locked_out":
        locked, via = str(event.payload.get("locked")), str(event.payload.get("via", "")).replace(" ", "_")
        LOCKOUTS.labels(locked=locked if locked in LOCKED else OTHER, via=via if via in LOCKOUT_VIA else OTHER).inc()
        return
    outcome = OUTCOMES.get(action)
    if outcome is None:
        return
    if outcome == "expired":
        EXPIRATIONS.labels(kind=kind_label(event.kind), tool=tool_label(event.tool)).inc()
    else:
        channel = event.payload.get("via")
        ANSWERS.labels(channel=channel if channel in CHANNELS else CONSOLE, outcome=outcome).inc()
    request = event.request
    if outcome != "approval_recorded" and request is not None:
        # As the door recorded it (models.DecidedBy); an event from before it was recorded: from the outcome.
        recorded = event.payload.get("decided_by")
        decided_by = (
            recorded
            if recorded in DECIDED_BY
            else "timeout"
            if outcome == "expired"
            else "person"
            if event.actor_user_id
            else CONSOLE
        )
        waited = (event.created_at - request.created_at).total_seconds()
        DECISION_SECONDS.labels(outcome=outcome, decided_by=decided_by).observe(max(0.0, waited))


# -- read from the database when scraped ---------------------------------------------------------------------


@dataclass(frozen=True)
class OpenRequests:
    """Open requests of one kind under one policy: how many, and when the oldest was opened."""

    kind: str
    policy: str
    count: int
    oldest: datetime


@dataclass
class DatabaseTotals:
    open_requests: list[OpenRequests] = field(default_factory=list)
    runs: dict[str, int] = field(default_factory=dict)  # an active status -> how many runs
    now: datetime | None = None


class DatabaseGauges(Collector):
    """Open requests by kind and policy (how many, and how long the oldest has waited) and active runs by
    status, read from the database at each scrape: the same in every process (aggregate with ``max``).
    Finished runs are counted as they finish (``console_runs_finished_total``), not read: their table grows."""

    def __init__(self, read: Callable[[], DatabaseTotals], run_statuses: Collection[str]) -> None:
        self.read = read
        self.run_statuses = tuple(run_statuses)

    def collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        read_ok = GaugeMetricFamily(
            "console_database_gauges_ok", "1 when this scrape read the database's gauges, 0 when the read failed."
        )
        try:
            totals = self.read()
        except Exception as exc:  # the class only: the message may name hosts and users
            logger.warning("metrics: could not read the open requests and runs: %s", type(exc).__name__)
            read_ok.add_metric([], 0)
            yield read_ok
            return
        read_ok.add_metric([], 1)
        yield read_ok
        open_count = GaugeMetricFamily(
            "console_requests_open",
            "Open requests, by kind and by the policy that governs them.",
            labels=["kind", "policy"],
        )
        oldest = GaugeMetricFamily(
            "console_requests_open_oldest_age_seconds",
            "How long the oldest open request of each kind and policy has waited.",
            labels=["kind", "policy"],
        )
        merged: dict[tuple[str, str], tuple[int, datetime]] = {}
        for group in totals.open_requests:
            key = (kind_label(group.kind), group.policy)
            count, first = merged.get(key, (0, group.oldest))
            merged[key] = (count + group.count, min(first, group.oldest))
        for (kind, policy), (count, first) in sorted(merged.items()):
            open_count.add_metric([kind, policy], count)
            if totals.now is not None:
                oldest.add_metric([kind, policy], max(0.0, (totals.now - first).total_seconds()))
        yield open_count
        yield oldest
        runs = GaugeMetricFamily(
            "console_runs", "Active runs (queued, running, waiting), by status.", labels=["status"]
        )
        for status in self.run_statuses:
            runs.add_metric([status], totals.runs.get(status, 0))
        yield runs
        took = GaugeMetricFamily(
            "console_database_gauges_read_seconds", "How long this scrape's read of the database's gauges took."
        )
        took.add_metric([], time.perf_counter() - started)
        yield took


_database_gauges: DatabaseGauges | None = None


def read_database_with(read: Callable[[], DatabaseTotals], run_statuses: Collection[str]) -> None:
    """Hand down the query of the database's gauges (once per process; again replaces it)."""
    global _database_gauges
    if _database_gauges is not None:
        REGISTRY.unregister(_database_gauges)
    _database_gauges = DatabaseGauges(read, run_statuses)
    REGISTRY.register(_database_gauges)


def exposition() -> bytes:
    """This process's metrics in Prometheus' text format (reads the database: call it off the event loop)."""
    return generate_latest(REGISTRY)


aexposition = database_sync_to_async(exposition)
