import pytest
from asgiref.sync import sync_to_async

from approvals import decisions, runner
from approvals.models import Run, RunStatus


@pytest.mark.django_db(transaction=True)
async def test_deploy_suspends_and_resumes_with_the_answer(make_user, console_events):
    user = await sync_to_async(make_user)()
    run = await runner.start_run(tool="deploy", args={}, user=user)
    opened = await console_events.next("request.opened", run_id=run.pk)
    await decisions.aresolve_request(opened["request_id"], ok=True, data={"env": "staging"}, user=user)
    await runner.wait_for_run(run.pk)
    finished = await Run.objects.aget(pk=run.pk)
    assert finished.status == RunStatus.SUCCEEDED
    assert finished.result_output == "deployed to staging"
