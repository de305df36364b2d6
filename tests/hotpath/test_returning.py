"""approvals/hotpath/returning.py's UPDATE ... RETURNING gives back the row the ORM reads after the update.

Runs on the embedded SQLite here, and on PostgreSQL from tests/cluster/test_modules_on_postgresql.py.
"""

import datetime

import pytest

from approvals.hotpath import returning
from approvals.models import ACTIVE_RUN_STATUSES, Run, RunStatus
from tests.support.statements import counting_statements

pytestmark = pytest.mark.django_db

MOMENT = datetime.datetime(2026, 12, 3, 15, 4, 5, 123456, tzinfo=datetime.UTC)
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
