"""``waiting.console_wait_for`` in toolnexus' ``wait_for`` slot: any agent can ask the console's reviewers."""

import asyncio

import pytest
import toolnexus
from asgiref.sync import sync_to_async
from toolnexus import define_tool, pending

from approvals.models import AuditEvent, Request, RequestStatus
from approvals.review import decisions
from approvals.runs import runner
from approvals.runs.supervisor import Wakeup, supervisor
from approvals.runs.waiting import console_wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def make_publish_tool():
    """Suspends for an approval; on the retry publishes with the reviewer's note."""
    calls = []

    async def publish(post: str, ctx=None):
        calls.append(getattr(ctx, "answer", None))
        if ctx is not None and ctx.answer is not None:
            return f"published {post} with note {ctx.answer.data['comment']}"
        return pending(kind="approval", prompt=f"Publish {post}?", data={"post": post})

    return define_tool(publish, name="publish"), calls


def scripted_generate(seen):
    """Turn 1 asks for the tool; turn 2 echoes the tool result. Runs in the client's worker thread."""

    def generate(request):
        seen.append(request)
        tool_messages = [m for m in request["messages"] if m.get("role") == "tool"]
        if not tool_messages:
            return {"tool_calls": [{"id": "call-1", "name": "publish", "arguments": {"post": "hello-world"}}]}
        return {"content": f"The tool said: {tool_messages[-1]['content']}"}

    return generate


async def make_agent():
    await runner.ensure_started()  # the console's server starts its supervisor before anything waits
    tool, calls = make_publish_tool()
    toolkit = await toolnexus.create_toolkit(extra_tools=[tool], builtins=False)
    seen = []
    client = toolnexus.create_in_process_client(
        model="scripted", generate=scripted_generate(seen), wait_for=console_wait_for
    )
    return client, toolkit, calls, seen


async def test_agent_suspension_is_answered_through_the_console(console_events, make_user):
    client, toolkit, calls, seen = await make_agent()
    erin = await sync_to_async(make_user)("erin", password=None)

    task = asyncio.ensure_future(client.run("Publish my post", toolkit))
    opened = await console_events.next("request.opened")
    assert opened["actor"] == "system"
    assert opened["run_id"] is None
    await decisions.aresolve_request(opened["request_id"], ok=True, data={"comment": "lgtm"}, user=erin)
    result = await asyncio.wait_for(task, 10)

    assert result.status == "done"
    assert "published hello-world with note lgtm" in result.text
    assert result.text.startswith("The tool said: ")
    assert len(calls) == 2 and calls[0] is None and calls[1].data == {"comment": "lgtm"}
    assert len(seen) == 2  # two model turns: the tool call, then the final answer

    request = await Request.objects.select_related("answered_by").aget(pk=opened["request_id"])
    assert request.kind == "approval"
    assert request.prompt == "Publish hello-world?"
    assert request.data == {"post": "hello-world"}
    assert request.run_id is None
    assert request.status == RequestStatus.ANSWERED
    assert request.answer_ok is True
    assert request.answer_data == {"comment": "lgtm"}
    assert request.answered_by.get_username() == "erin"
    actions = [e.action async for e in AuditEvent.objects.filter(request_id=request.pk).order_by("id")]
    assert actions == ["request.opened", "request.answered"]


async def test_agent_suspension_declined_reaches_the_model_as_declined(console_events):
    client, toolkit, calls, _ = await make_agent()
    task = asyncio.ensure_future(client.run("Publish my post", toolkit))
    opened = await console_events.next("request.opened")
    await decisions.aresolve_request(opened["request_id"], ok=False, reason="declined")
    result = await asyncio.wait_for(task, 10)
    assert result.text == "The tool said: declined/expired: Publish hello-world?"
    assert len(calls) == 1


async def test_cancelling_the_waiting_task_withdraws_the_request(console_events):
    """Cancel as soon as request.opened is heard, which can be before the opening write has returned."""
    client, toolkit, calls, _ = await make_agent()
    task = asyncio.ensure_future(client.run("Publish my post", toolkit))
    opened = await console_events.next("request.opened")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)

    cancelled = await console_events.next("request.cancelled", request_id=opened["request_id"])
    assert cancelled["actor"] == "system"
    request = await Request.objects.aget(pk=opened["request_id"])
    assert request.status == RequestStatus.CANCELLED
    assert request.answer_reason == "cancelled"
    assert len(calls) == 1
    with pytest.raises(decisions.DecisionError) as late:
        await decisions.aresolve_request(request.pk, ok=True, data={"comment": "too late"})
    assert late.value.code == "not_open"


async def test_cancelling_the_task_parked_in_the_wait_withdraws_the_request(console_events, monkeypatch):
    client, toolkit, calls, _ = await make_agent()
    parking = asyncio.Event()

    class Waiter(Wakeup):
        def attach(self, future):
            parking.set()  # the wait parks on its waiter (listening since before the request opened)
            super().attach(future)

    sup = supervisor()

    def listen(request_id):
        waiter = Waiter()
        sup.waiters.setdefault(request_id, set()).add(waiter)
        return waiter

    monkeypatch.setattr(sup, "listen", listen)
    task = asyncio.ensure_future(client.run("Publish my post", toolkit))
    opened = await console_events.next("request.opened")
    await asyncio.wait_for(parking.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)

    request = await Request.objects.aget(pk=opened["request_id"])
    assert request.status == RequestStatus.CANCELLED
    assert request.answer_reason == "cancelled"
    assert len(calls) == 1


async def test_console_wait_for_called_directly_returns_the_answer(console_events):
    await runner.ensure_started()  # the console's server starts its supervisor before anything waits
    wire = pending(kind="input", prompt="Name?", data={"schema": {"type": "object"}}).metadata["pending"]
    waiting = asyncio.ensure_future(console_wait_for(wire))
    opened = await console_events.next("request.opened", request_id=wire.id)
    assert opened["request"]["kind"] == "input"
    await decisions.aresolve_request(wire.id, ok=True, data={"name": "Ada"})
    answer = await asyncio.wait_for(waiting, 10)
    assert (answer.id, answer.ok, answer.data) == (wire.id, True, {"name": "Ada"})
