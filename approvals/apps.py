import itertools
import secrets

from django.apps import AppConfig


def spread_pending_ids() -> None:
    """Start toolnexus' pending-id counter at a random place in each console process.

    ``pending()`` without an id names its request ``pnd-<milliseconds>-<counter>`` with
    a counter starting at 1 in every process, so two console processes suspending in
    the same millisecond could name two requests alike (seen with 40 pairs of runs on
    two processes). A random 40-bit start keeps the wire format and makes that as
    likely as two random 40-bit numbers meeting.
    """
    import toolnexus.types

    toolnexus.types._pending_seq = itertools.count(secrets.randbits(40))


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"

    def ready(self) -> None:
        from approvals import checks, events, frames, selectors, signals  # noqa: F401  (registers the checks, connects the receivers)
        from approvals.models import ACTIVE_RUN_STATUSES, AuditEvent, RunStatus
        from approvals.runs import toolkit
        from approvals.team import webhooks
        from approvals.telemetry import logs, metrics

        spread_pending_ids()
        # telemetry sits below everything it counts: the toolkit, the actions and the gauges' query are handed to it.
        metrics.bound_tools_by(toolkit.tool_names)
        active = [status.value for status in ACTIVE_RUN_STATUSES]
        metrics.count_actions(AuditEvent.Action.values, [status for status in RunStatus.values if status not in active])
        metrics.read_database_with(selectors.database_gauges, active)
        # events sits below what it publishes: the frame builders and the webhooks are handed to it.
        events.publish_with(
            events.Publishing(
                event_frame=frames.event_frame,
                frame_of_rows=frames.frame_of_rows,
                request_event_committed=webhooks.event_committed,
                observers=(metrics.observe_event, logs.log_event),  # telemetry: counts and log lines of each event
            )
        )
