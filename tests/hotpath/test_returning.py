"""approvals/hotpath/returning.py: one UPDATE statement hands back the rows as the ORM would read them after it,
compiled once (``UpdateReturning``) or with the call's own values (``update_returning``).

Runs on the embedded SQLite here, and on PostgreSQL from tests/cluster/test_modules_on_postgresql.py.
"""

import datetime

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Subquery
from django.test.utils import CaptureQueriesContext

from approvals.hotpath import returning
from approvals.hotpath.returning import CompiledUpdate, UpdateReturning
from approvals.models import ACTIVE_RUN_STATUSES, Request, RequestStatus, Run, RunStatus
from tests.support.statements import counting_statements

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


def claiming(run_id):
    running = Run.objects.filter(pk=run_id, status=RunStatus.RUNNING)
    return Request.objects.filter(Exists(running), run_id=run_id, resumed_by=""), {"resumed_by": "here"}


claim = CompiledUpdate(claiming, (SAMPLE_RUN,))


def test_a_compiled_update_changes_what_the_orms_update_changes_and_counts_it():
    runs = [Run.objects.create(tool="deploy", status=RunStatus.RUNNING) for _ in range(2)]
    waiting = Run.objects.create(tool="deploy", status=RunStatus.WAITING)
    for n, run in enumerate([*runs, waiting]):
        Request.objects.create(id=f"claim-{n}", run=run, kind="approval", prompt="Go?")
    for run in runs:  # the second call reuses the statement, with its own run in both places
        with CaptureQueriesContext(connection) as queries:
            assert claim(run.pk) == 1
        assert [q["sql"].split()[0] for q in queries.captured_queries] == ["UPDATE"]
    assert claim(runs[0].pk) == 0  # claimed already
    assert claim(waiting.pk) == 0  # the subquery's condition
    claimed = dict(Request.objects.values_list("id", "resumed_by"))
    assert claimed == {"claim-0": "here", "claim-1": "here", "claim-2": ""}
    with pytest.raises(ValueError, match="samples"):
        CompiledUpdate(lambda run_id: (Run.objects.filter(pk=1), {"status": RunStatus.RUNNING}), (-1,))(5)


# -- update_returning: one row, the call's own values --------------------------------------------


FINISHED = {
    "status": RunStatus.SUCCEEDED,
    "result_output": "done «ünï»",
    "result_is_error": False,
    "finished_at": MOMENT,
}


def fields(run):
    return {f.attname: getattr(run, f.attname) for f in Run._meta.concrete_fields}


def test_the_returned_run_is_the_one_the_orm_reads_after_the_update_in_one_statement(make_user):
    starter = make_user("starter", password=None)
    run = Run.objects.create(tool="deploy", args={"env": "prod", "n": [1, 2.5, None]}, timeout=30.0, started_by=starter)

    with counting_statements() as counter:
        returned = returning.update_returning(
            Run, run.pk, FINISHED, only_if=("status", ACTIVE_RUN_STATUSES), related={"started_by": ("username",)}
        )
    assert [s.verb for s in counter.taken()] == ["UPDATE"]

    read = Run.objects.select_related("started_by").get(pk=run.pk)
    assert fields(returned) == fields(read)
    assert [type(v) for v in fields(returned).values()] == [type(v) for v in fields(read).values()]  # 30.0, not 30
    assert returned.finished_at == MOMENT
    with counting_statements() as counter:
        assert (returned.started_by.pk, returned.started_by.get_username()) == (starter.pk, "starter")
    assert counter.taken() == []  # loaded with the row, not read on first use


def test_a_run_nobody_started_comes_back_without_a_starter():
    run = Run.objects.create(tool="deploy")
    returned = returning.update_returning(
        Run, run.pk, FINISHED, only_if=("status", ACTIVE_RUN_STATUSES), related={"started_by": ("username",)}
    )
    with counting_statements() as counter:
        assert returned.started_by is None
    assert counter.taken() == []


def test_a_row_that_does_not_meet_the_condition_is_left_alone_and_none_comes_back():
    run = Run.objects.create(tool="deploy", status=RunStatus.CANCELLED)
    assert returning.update_returning(Run, run.pk, FINISHED, only_if=("status", ACTIVE_RUN_STATUSES)) is None
    assert returning.update_returning(Run, run.pk, FINISHED, only_if=("status", ())) is None
    assert returning.update_returning(Run, run.pk + 1, FINISHED, only_if=("status", ACTIVE_RUN_STATUSES)) is None
    run.refresh_from_db()
    assert (run.status, run.result_output) == (RunStatus.CANCELLED, None)
