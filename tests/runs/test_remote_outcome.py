"""Issue 36: RemoteWaitFor reports how a host's tool ended after an approval, against a real console in another
process (daphne, its own SQLite); a pre-36 RemoteWaitFor (the file at 0f77d3f) never reports, and keeps working.

The hosts here await RemoteWaitFor in this test process, which has no console running in it: everything they
see comes over HTTP from the daphne process.
"""

import asyncio
import importlib.util
from pathlib import Path

import pytest
import toolnexus
from toolnexus import Request, ToolResult, define_tool, pending

from approvals.remote import RemoteRequestError, RemoteWaitFor

PROCESS_DEADLINE = 60  # only ever reached when a test is about to fail
OLD_CLIENT = Path(__file__).resolve().parent / "fixtures" / "console_remote_0f77d3f.py"


async def call(live, method, path, body=None, token=None):
    return await asyncio.to_thread(live.call, method, path, body, token=token)


async def answer_when_open(live, opened, request_id, body):
    """A reviewer answers ``request_id`` through the console's API once the host says it is open (``on_open``)."""
    await asyncio.wait_for(opened.wait(), PROCESS_DEADLINE)
    status, answer = await call(live, "POST", f"/api/v1/requests/{request_id}/answer", body)
    assert status == 200, answer


def payout_tool(runs, *, request_id, fail=False):
    """A host's tool: suspends on an approval, and on its retry pays (``runs`` counts it) or fails."""

    async def payout(amount: int, ctx=None):
        if ctx is None or ctx.answer is None:
            return pending(kind="approval", prompt=f"Pay out {amount}?", id=request_id)
        runs.append(amount)
        if fail:
            return ToolResult(output=f"bank refused {amount}", is_error=True)
        return f"paid out {amount}"

    return define_tool(payout, name="payout")


async def run_host_agent(live, tools, wait_for, amount):
    calls = iter([{"tool_calls": [{"id": "c1", "name": "payout", "arguments": {"amount": amount}}]}])

    def generate(request):
        return next(calls, {"content": "done"})

    toolkit = await toolnexus.create_toolkit(extra_tools=tools, builtins=False)
    client = toolnexus.create_in_process_client(model="scripted", generate=generate, wait_for=wait_for)
    return await client.run("Pay it out", toolkit)


@pytest.mark.parametrize(
    ("fail", "state", "message"), [(False, "succeeded", "paid out 30"), (True, "failed", "bank refused 30")]
)
async def test_a_guarded_tools_approved_retry_reports_its_result_by_itself(live, fail, state, message):
    request_id = f"remote-outcome-{state}"
    runs = []
    opened = asyncio.Event()
    wait_for = RemoteWaitFor(
        live.base_url, live.host_token, poll_seconds=20, host="payouts", on_open=lambda stored: opened.set()
    )
    tools = wait_for.guard_tools([payout_tool(runs, request_id=request_id, fail=fail)])
    reviewer = asyncio.ensure_future(answer_when_open(live, opened, request_id, {"ok": True}))
    result = await asyncio.wait_for(run_host_agent(live, tools, wait_for, 30), PROCESS_DEADLINE)
    await reviewer
    assert result.status == "done" and runs == [30]
    status, stored = await call(live, "GET", f"/api/v1/requests/{request_id}")
    assert status == 200
    assert (stored["execution"]["state"], stored["execution"]["message"]) == (state, message)


async def test_report_by_hand_then_the_same_again_is_accepted_and_another_is_refused(live):
    opened = asyncio.Event()
    wait_for = RemoteWaitFor(
        live.base_url, live.host_token, poll_seconds=20, host="by-hand", on_open=lambda stored: opened.set()
    )
    request = Request(id="remote-outcome-by-hand", kind="approval", prompt="Rotate the key?")
    reviewer = asyncio.ensure_future(answer_when_open(live, opened, request.id, {"ok": True}))
    answer = await asyncio.wait_for(wait_for(request), PROCESS_DEADLINE)
    await reviewer
    assert answer.ok
    status, stored = await call(live, "GET", f"/api/v1/requests/{request.id}")
    assert stored["execution"]["state"] == "unreported"

    stored = await wait_for.report(answer, False, "x" * 3000)  # cut to what the console keeps
    assert (stored["execution"]["state"], len(stored["execution"]["message"])) == ("failed", 2000)
    again = await wait_for.report(answer.id, False, "x" * 3000)
    assert again["execution"] == stored["execution"]
    with pytest.raises(RemoteRequestError) as refused:
        await wait_for.report(answer, True, "it worked after all")
    assert refused.value.status == 409
    assert "the first report stands" in refused.value.message


async def test_a_pre_36_remote_wait_for_keeps_working_and_its_request_stays_unreported(live):
    spec = importlib.util.spec_from_file_location("console_remote_0f77d3f_outcome", OLD_CLIENT)
    assert spec is not None and spec.loader is not None
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    request_id = "remote-outcome-old-client"
    runs = []
    opened = asyncio.Event()
    wait_for = old.RemoteWaitFor(
        live.base_url, live.host_token, poll_seconds=20, host="old-payouts", on_open=lambda stored: opened.set()
    )
    tools = wait_for.guard_tools([payout_tool(runs, request_id=request_id)])
    reviewer = asyncio.ensure_future(answer_when_open(live, opened, request_id, {"ok": True}))
    result = await asyncio.wait_for(run_host_agent(live, tools, wait_for, 5), PROCESS_DEADLINE)
    await reviewer
    assert result.status == "done" and runs == [5]
    status, stored = await call(live, "GET", f"/api/v1/requests/{request_id}")
    assert (status, stored["status"], stored["execution"]["state"]) == (200, "answered", "unreported")
