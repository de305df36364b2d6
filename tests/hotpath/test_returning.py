"""approvals/hotpath/returning.py: one UPDATE statement hands back the rows as the ORM would read them after it.

Runs on the embedded SQLite here, and on PostgreSQL from tests/cluster/test_modules_on_postgresql.py.
"""

import datetime

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Subquery
from django.test.utils import CaptureQueriesContext

from approvals.hotpath.returning import UpdateReturning
from approvals.models import Request, RequestStatus, Run, RunStatus

pytestmark = pytest.mark.django_db

MOMENT = datetime.datetime(2026, 12, 3, 15, 4, 5, 123456, tzinfo=datetime.UTC)
SAMPLE_RUN, SAMPLE_OUTPUT = -424242, "sample:output:424242"


def every_field(row):
    return {f.attname: getattr(row, f.attname) for f in type(row)._meta.concrete_fields}


def finishing(run_id, output):
    return (
        Run.objects.filter(pk=run_id, status=RunStatus.WAITING),
        {"status": RunStatus.SUCCEEDED, "finished_at": MOMENT, "result_output": output},
        {"starter": Subquery(User.objects.filter(pk=OuterRef("started_by_id")).values("username")[:1])},
    )


finish = UpdateReturning(Run, finishing, (SAMPLE_RUN, SAMPLE_OUTPUT))


def resuming(run_id):
    blocked = Exists(Request.objects.filter(run_id=OuterRef("pk"), status=RequestStatus.OPEN))
    return Run.objects.filter(~blocked, pk=run_id), {"status": RunStatus.RUNNING}, {}


resume = UpdateReturning(Run, resuming, (SAMPLE_RUN,))


def test_the_returned_row_is_the_row_a_read_after_the_update_gives(make_user):
    user = make_user("starter")
    args = {"env": "prod", "n": [1, 2.5, None]}
    runs = [Run.objects.create(tool="deploy", args=args, started_by=user, status=RunStatus.WAITING) for _ in range(2)]
    for run, output in zip(runs, ["done «ü»", "second"], strict=True):  # the second call reuses the statement
        with CaptureQueriesContext(connection) as queries, transaction.atomic():
            (returned,) = finish(run.pk, output)
        sent = [q["sql"].split()[0] for q in queries.captured_queries]
        assert [verb for verb in sent if verb not in ("SAVEPOINT", "RELEASE", "BEGIN", "COMMIT")] == ["UPDATE"]
        assert every_field(returned) == every_field(Run.objects.get(pk=run.pk))
        assert returned.result_output == output and returned.finished_at == MOMENT and returned.args == args
        assert returned.starter == "starter"
        assert not returned._state.adding and returned._state.db == "default"
    assert every_field(Run.objects.get(pk=runs[0].pk))["result_output"] == "done «ü»"


def test_a_row_the_condition_leaves_alone_is_not_returned_nor_changed():
    run = Run.objects.create(tool="deploy", args={}, status=RunStatus.WAITING)
    Request.objects.create(id="still-open", run=run, kind="approval", prompt="Go?", status=RequestStatus.OPEN)
    assert resume(run.pk) == []
    assert Run.objects.get(pk=run.pk).status == RunStatus.WAITING

    Request.objects.filter(pk="still-open").update(status=RequestStatus.ANSWERED)
    (resumed,) = resume(run.pk)
    assert resumed.status == RunStatus.RUNNING == Run.objects.get(pk=run.pk).status


def test_a_sample_the_statement_does_not_take_is_refused():
    unused = UpdateReturning(Run, lambda run_id: (Run.objects.filter(pk=1), {"status": RunStatus.RUNNING}, {}), (-1,))
    with pytest.raises(ValueError, match="samples"):
        unused(5)
