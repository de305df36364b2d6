"""A wrapped tool's automatic outcome report (RemoteWaitFor.report_quietly) never holds the tool's result back
for long when the console cannot be reached: it gives up after REPORT_PATIENCE_SECONDS, not after ``attempts``
backed-off tries (minutes). The opener stands in for a console that refuses every connection, and counts."""

import asyncio
import urllib.error
import urllib.request

from approvals.remote import RemoteWaitFor


class RefusingOpener(urllib.request.OpenerDirector):
    """Every call fails as a closed port does; ``calls`` counts them."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def open(self, fullurl, data=None, timeout=None):  # noqa: ARG002 - the signature OpenerDirector.open has
        self.calls += 1
        raise urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))


def waiting_host(opener: RefusingOpener) -> RemoteWaitFor:
    # Backing off 10 s, then 20 s, ... over 8 attempts: without patience a report would take minutes.
    return RemoteWaitFor("http://127.0.0.1:9", "token", backoff_initial=10, attempts=8, opener=opener)


async def test_an_unreachable_console_costs_a_wrapped_tools_report_one_try_within_its_patience():
    opener = RefusingOpener()
    reported = await asyncio.wait_for(waiting_host(opener).report_quietly("req-1", True, "paid"), 30)
    assert reported is False  # the report did not reach the console; the tool's result is not changed by it
    assert opener.calls == 1  # the next try would come after the patience is used up


async def test_report_takes_a_patience_and_gives_up_quietly_when_it_is_used_up():
    opener = RefusingOpener()
    assert await asyncio.wait_for(waiting_host(opener).report("req-1", True, "paid", patience=0), 30) == {}
    assert opener.calls == 1
