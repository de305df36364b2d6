"""The frames the door publishes from the rows in hand say what a read back after the commit says.

A suspension's frame takes its run from the wait's UPDATE (RETURNING) and an answer's from the resume's; the
open requests come from what those updates established, and are read only when they cannot know them.
Each frame published at a commit is compared with ``frames.event_frame``, which reads everything back.
"""

import pytest
import toolnexus
from asgiref.sync import sync_to_async

from approvals import frames
from approvals.models import AuditEvent, Run, RunStatus
from approvals.review import decisions

pytestmark = pytest.mark.django_db(transaction=True)


def read_back(seq):
    return frames.event_frame(AuditEvent.objects.get(pk=seq))


async def published_and_read_back(console_events, action, request_id):
    frame = await console_events.next(action, request_id=request_id)
    return frame, await sync_to_async(read_back)(frame["seq"])


def open_on(run, request_id, *, mark_run_waiting=True):
    wire = toolnexus.Request(id=request_id, kind="approval", prompt=f"Go ahead with {request_id}?")
    return decisions.open_request(
        wire, run_id=run.pk, tool="deploy", args={"env": "prod"}, mark_run_waiting=mark_run_waiting
    )


async def test_a_suspension_and_its_answer_publish_what_a_read_back_gives(console_events, make_user):
    starter = await sync_to_async(make_user)("starter")
    reviewer = await sync_to_async(make_user)("reviewer")
    run = await Run.objects.acreate(tool="deploy", args={"env": "prod"}, started_by=starter)

    await sync_to_async(open_on)(run, "only-one")
    opened, now = await published_and_read_back(console_events, "request.opened", "only-one")
    assert opened == now
    assert opened["run"]["status"] == RunStatus.WAITING and opened["run"]["started_by"] == "starter"
    assert [r["name"] for r in opened["run"]["cancel"]["requests"]] == ["default"]

    await sync_to_async(decisions.resolve_request)("only-one", ok=True, user=reviewer, via="api")
    answered, now = await published_and_read_back(console_events, "request.answered", "only-one")
    assert answered == now
    assert answered["run"]["status"] == RunStatus.RUNNING and answered["run"]["cancel"]["requests"] == []
    assert answered["request"]["policy"]["approvals"] == []


async def test_with_another_request_open_the_frames_still_list_both(console_events, make_user):
    starter = await sync_to_async(make_user)("starter")
    reviewer = await sync_to_async(make_user)("reviewer")
    run = await Run.objects.acreate(tool="deploy", args={"env": "prod"}, started_by=starter)
    await sync_to_async(open_on)(run, "first", mark_run_waiting=False)  # as an agent run's other tool call does
    await console_events.next("request.opened", request_id="first")

    await sync_to_async(open_on)(run, "second")
    opened, now = await published_and_read_back(console_events, "request.opened", "second")
    assert opened == now and len(opened["run"]["cancel"]["requests"]) == 2

    await sync_to_async(decisions.resolve_request)("second", ok=True, user=reviewer, via="api")
    answered, now = await published_and_read_back(console_events, "request.answered", "second")
    assert answered == now
    assert answered["run"]["status"] == RunStatus.WAITING and len(answered["run"]["cancel"]["requests"]) == 1
