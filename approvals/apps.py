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
        from approvals import checks, signals  # noqa: F401  (registers the checks, connects the receivers)

        spread_pending_ids()
