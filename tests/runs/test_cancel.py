"""CancelToken: one token for async tools, thread-bound tools and toolnexus' ``cancel``."""

import asyncio
import threading
import time

import pytest
import toolnexus
from toolnexus import ToolContext, define_tool

from approvals.runs.cancel import REASONS, CancelToken, is_cancelled


def test_new_token_is_clear():
    token = CancelToken()
    assert token.is_set() is False
    assert token.cancelled is False
    assert token.reason is None
    assert "clear" in repr(token)


def test_trip_sets_the_token_and_records_the_reason():
    token = CancelToken()
    assert token.trip("timeout") is True
    assert token.is_set() is True
    assert token.cancelled is True
    assert token.reason == "timeout"
    assert "tripped: timeout" in repr(token)


def test_trip_defaults_to_cancelled():
    token = CancelToken()
    token.trip()
    assert token.reason == "cancelled"


@pytest.mark.parametrize("first,second", [("cancelled", "timeout"), ("timeout", "shutdown"), ("shutdown", "cancelled")])
def test_first_reason_is_kept(first, second):
    token = CancelToken()
    assert token.trip(first) is True
    assert token.trip(second) is False
    assert token.reason == first


@pytest.mark.parametrize("reason", ["", "stop", "Cancelled", None])
def test_invalid_reason_is_refused_and_leaves_the_token_clear(reason):
    token = CancelToken()
    with pytest.raises(ValueError, match="unknown cancel reason"):
        token.trip(reason)
    assert token.is_set() is False
    assert token.reason is None


def test_invalid_reason_is_refused_even_after_a_trip():
    token = CancelToken()
    token.trip("cancelled")
    with pytest.raises(ValueError):
        token.trip("bogus")
    assert token.reason == "cancelled"


def test_reasons_vocabulary():
    assert set(REASONS) == {"cancelled", "timeout", "shutdown"}


def test_set_spelling_trips_with_reason_cancelled():
    token = CancelToken()
    token.set()
    assert token.is_set()
    assert token.reason == "cancelled"


def test_set_after_a_timeout_keeps_timeout():
    token = CancelToken()
    token.trip("timeout")
    token.set()
    assert token.reason == "timeout"


async def test_wait_returns_at_once_when_already_tripped():
    token = CancelToken()
    token.trip("shutdown")
    assert await asyncio.wait_for(token.wait(), 1) is True


async def test_wait_wakes_when_tripped_from_another_thread():
    token = CancelToken()
    seen = {}

    def trip_from_thread():
        seen["parked_waiters"] = len(token._waiters)
        seen["tripped"] = token.trip("timeout")
        seen["thread"] = threading.current_thread().name

    waiter = asyncio.ensure_future(token.wait())
    thread = threading.Thread(target=trip_from_thread, name="tripper")
    # call_soon runs after the waiter task's first step, so the waiter is parked before the trip.
    asyncio.get_running_loop().call_soon(thread.start)
    assert await asyncio.wait_for(waiter, 2) is True
    await asyncio.to_thread(thread.join, 2)
    assert seen == {"parked_waiters": 1, "tripped": True, "thread": "tripper"}
    assert token.reason == "timeout"
    assert token._waiters == []


async def test_wait_wakes_every_waiter():
    token = CancelToken()
    waiters = [asyncio.ensure_future(token.wait()) for _ in range(3)]
    asyncio.get_running_loop().call_soon(token.trip, "cancelled")
    assert await asyncio.wait_for(asyncio.gather(*waiters), 2) == [True, True, True]


async def test_cancelled_wait_unregisters_its_waiter():
    token = CancelToken()
    waiter = asyncio.ensure_future(token.wait())
    parked = asyncio.Event()
    asyncio.get_running_loop().call_soon(parked.set)  # runs after the waiter's first step
    await parked.wait()
    assert len(token._waiters) == 1
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert token._waiters == []
    assert token.trip("cancelled") is True  # nothing left to resolve, no error


async def test_wait_blocking_in_a_thread_wakes_early_when_tripped_from_the_loop():
    token = CancelToken()
    parked = threading.Event()

    def block():
        parked.set()
        started = time.monotonic()
        return token.wait_blocking(10), time.monotonic() - started

    blocked = asyncio.ensure_future(asyncio.to_thread(block))
    assert await asyncio.to_thread(parked.wait, 5)
    token.trip("cancelled")
    woke, elapsed = await asyncio.wait_for(blocked, 5)
    assert woke is True
    assert elapsed < 5
    assert token.reason == "cancelled"


def test_wait_blocking_times_out_when_not_tripped():
    token = CancelToken()
    assert token.wait_blocking(0.01) is False


def test_wait_blocking_returns_at_once_when_tripped():
    token = CancelToken()
    token.trip("timeout")
    started = time.monotonic()
    assert token.wait_blocking(10) is True
    assert time.monotonic() - started < 1


async def test_ensure_future_of_wait_behaves_like_asyncio_event():
    """toolnexus races ``asyncio.ensure_future(cancel.wait())`` against its work; the token must do the same."""
    for make in (asyncio.Event, CancelToken):
        cancel = make()
        watcher = asyncio.ensure_future(cancel.wait())
        work = asyncio.ensure_future(asyncio.Event().wait())  # never finishes on its own
        asyncio.get_running_loop().call_soon(cancel.set)
        done, _ = await asyncio.wait({watcher, work}, timeout=2, return_when=asyncio.FIRST_COMPLETED)
        assert done == {watcher}, make
        assert watcher.result() is True, make
        assert cancel.is_set(), make
        work.cancel()


def _scripted_client(generate):
    return toolnexus.create_in_process_client(model="scripted", generate=generate)


async def test_token_as_toolnexus_cancel_aborts_a_run_before_it_starts():
    calls = []
    client = _scripted_client(lambda request: calls.append(request) or {"content": "never"})
    token = CancelToken()
    token.trip("cancelled")
    with pytest.raises(toolnexus.RunCancelled):
        await client.run("hello", cancel=token)
    assert calls == []


async def test_token_as_toolnexus_cancel_tripped_mid_run_stops_the_loop():
    token = CancelToken()
    turns = []

    def noop() -> str:
        """Do nothing."""
        return "ok"

    toolkit = await toolnexus.create_toolkit(extra_tools=[define_tool(noop, name="noop")], builtins=False)

    def generate(request):  # runs in the client's worker thread
        turns.append(len(request["messages"]))
        token.trip("cancelled")  # e.g. "Cancel run" pressed while the model was thinking
        return {"tool_calls": [{"name": "noop", "arguments": {}}]}

    client = _scripted_client(generate)
    with pytest.raises(toolnexus.RunCancelled):
        await asyncio.wait_for(client.run("go", toolkit, cancel=token), 5)
    assert len(turns) == 1  # no second model turn after the cancel
    assert token.reason == "cancelled"


def test_is_cancelled_handles_missing_ctx_and_signal():
    assert is_cancelled(None) is False
    assert is_cancelled(ToolContext()) is False
    assert is_cancelled(ToolContext(signal=None, timeout=3)) is False


def test_is_cancelled_follows_the_signal():
    token = CancelToken()
    ctx = ToolContext(signal=token)
    assert is_cancelled(ctx) is False
    token.trip("timeout")
    assert is_cancelled(ctx) is True


def test_is_cancelled_accepts_a_plain_asyncio_event():
    event = asyncio.Event()
    ctx = ToolContext(signal=event)
    assert is_cancelled(ctx) is False
    event.set()
    assert is_cancelled(ctx) is True
