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
        from approvals import checks, events, frames, signals  # noqa: F401  (registers the checks, connects the receivers)
        from approvals.team import webhooks
        from approvals.telemetry import logs

        spread_pending_ids()
        # events sits below what it publishes: the frame builders and the webhooks are handed to it.
        events.publish_with(
            events.Publishing(
                event_frame=frames.event_frame,
                frame_of_rows=frames.frame_of_rows,
                request_event_committed=webhooks.event_committed,
                observers=(logs.log_event,),  # telemetry: metrics and log lines of each committed event
            )
        )
