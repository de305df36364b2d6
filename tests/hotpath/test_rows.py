"""The hand-built statements of approvals/hotpath/rows.py write and read what the ORM does.

Runs on the embedded SQLite here, and on PostgreSQL from tests/cluster/test_rows_on_postgresql.py.
"""

import datetime

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.models import Count
from django.db.models.signals import post_save, pre_save
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.hotpath import rows
from approvals.models import ACTIVE_RUN_STATUSES, AuditEvent, Request, RequestApproval, Run, RunStatus

pytestmark = pytest.mark.django_db

MOMENT = datetime.datetime(2026, 12, 3, 15, 4, 5, 123456, tzinfo=datetime.UTC)


def stored(model, pk):
    """Every concrete field of the row, as the ORM reads it back."""
    row = model.objects.get(pk=pk)
    return {f.attname: getattr(row, f.attname) for f in model._meta.concrete_fields}


def request_fields(run, opened_by, **extra):
    return {
        "run": run,
        "kind": "input",
        "prompt": "Which region? «ünïcode»",
        "url": None,
        "data": {"schema": {"type": "object", "properties": {"region": {"type": "string"}}}, "n": [1, 2.5, None]},
        "expires_at_wire": "2026-12-03T16:00:00Z",
        "expires_at": MOMENT,
        "tool": "deploy",
        "args": {"env": "prod", "nested": {"ok": True}},
        "tool_input_schema": None,
        "host": "ci",
        "opened_by": opened_by,
        "resumable": True,
        "created_at": MOMENT,
        **extra,
    }


def test_an_inserted_request_is_the_row_save_writes(make_user):
    user = make_user("opener")
    run = Run.objects.create(tool="deploy", args={"env": "prod"}, started_by=user)
    Request.objects.create(id="by-save", **request_fields(run, user))
    by_rows = rows.insert(Request(id="by-rows", **request_fields(run, user)))

    assert not by_rows._state.adding and by_rows._state.db == "default"
    saved, inserted = stored(Request, "by-save"), stored(Request, "by-rows")
    assert inserted.pop("id") == "by-rows" and saved.pop("id") == "by-save"
    assert inserted == saved
    assert inserted["expires_at"] == MOMENT and inserted["answer_ok"] is None and inserted["resumable"] is True


def test_an_insert_keeps_the_models_defaults():
    request = rows.insert(Request(id="defaults", kind="approval", prompt="ok?"))
    row = Request.objects.get(pk="defaults")
    assert row.status == "open" and row.args == {} and row.data is None and row.run_id is None
    assert abs(row.created_at - request.created_at) < datetime.timedelta(microseconds=1)


def test_an_insert_without_a_primary_key_is_refused_saying_so():
    with pytest.raises(ValueError, match="needs the primary key of this Request set"):
        rows.insert(Request(id=None, kind="approval", prompt="ok?"))


def test_an_insert_of_an_existing_id_is_the_orms_integrity_error():
    rows.insert(Request(id="twice", kind="approval", prompt="ok?"))
    with pytest.raises(IntegrityError), transaction.atomic():
        rows.insert(Request(id="twice", kind="approval", prompt="again?"))


def test_get_reads_what_the_orm_reads_with_the_related_user_loaded(make_user):
    user = make_user("starter", first_name="Ada")
    run = Run.objects.create(
        tool="deploy",
        args={"env": "prod", "n": [1, {"x": None}]},
        timeout=2.5,
        started_by=user,
        result_output="done",
        result_is_error=False,
        created_at=MOMENT,
        finished_at=MOMENT,
        agent_messages=[{"a": 1}],
    )
    by_orm = Run.objects.select_related("started_by").get(pk=run.pk)
    with CaptureQueriesContext(connection) as queries:
        by_rows = rows.get(Run, run.pk, related=("started_by",))
        assert by_rows.started_by.get_username() == "starter" and by_rows.started_by.first_name == "Ada"
    assert len(queries) == 1  # the user came in the same query
    for f in Run._meta.concrete_fields:
        assert getattr(by_rows, f.attname) == getattr(by_orm, f.attname), f.name
        assert type(getattr(by_rows, f.attname)) is type(getattr(by_orm, f.attname)), f.name
    for f in type(user)._meta.concrete_fields:
        assert getattr(by_rows.started_by, f.attname) == getattr(by_orm.started_by, f.attname), f.name
    assert by_rows.created_at == MOMENT and by_rows.created_at.tzinfo is not None
    assert not by_rows._state.adding and by_rows._state.db == "default"


def test_get_of_a_run_nobody_started_caches_no_user():
    run = Run.objects.create(tool="deploy")
    with CaptureQueriesContext(connection) as queries:
        read = rows.get(Run, run.pk, related=("started_by",))
        assert read.started_by is None
    assert len(queries) == 1


def test_get_follows_a_path_through_a_related_row_and_says_whether_child_rows_exist(make_user):
    starter, answerer = make_user("starter"), make_user("answerer")
    run = Run.objects.create(tool="deploy", started_by=starter)
    request = Request.objects.create(id="nested", answered_by=answerer, **request_fields(run, starter))
    RequestApproval.objects.create(request=request, user=answerer)
    bare = Request.objects.create(id="bare", **request_fields(None, None))
    paths = ("answered_by", "run__started_by", "run__cancel_requested_by")
    exists = {"approved_any": (RequestApproval, "request")}
    by_orm = Request.objects.select_related(*paths).get(pk="nested")
    with CaptureQueriesContext(connection) as queries:
        read = rows.get(Request, "nested", related=paths, exists=exists)
        assert read.run.started_by.get_username() == "starter" and read.answered_by.get_username() == "answerer"
        assert read.run.cancel_requested_by is None and read.approved_any is True
        empty = rows.get(Request, bare.pk, related=paths, exists=exists)
        assert empty.run is None and empty.answered_by is None and empty.approved_any is False
    assert len(queries) == 2  # every related row in its own row's query
    for f in Request._meta.concrete_fields:
        assert getattr(read, f.attname) == getattr(by_orm, f.attname), f.name
    for f in Run._meta.concrete_fields:
        assert getattr(read.run, f.attname) == getattr(by_orm.run, f.attname), f.name


def test_get_of_a_missing_row_is_none():
    assert rows.get(Run, 987654, related=("started_by",)) is None


def test_a_conditional_update_changes_only_a_row_that_meets_it():
    active = Run.objects.create(tool="deploy", status=RunStatus.RUNNING)
    finished = Run.objects.create(tool="deploy", status=RunStatus.SUCCEEDED)
    guard = ("status", ACTIVE_RUN_STATUSES)
    assert rows.update(Run, active.pk, {"status": RunStatus.WAITING}, only_if=guard) == 1
    assert rows.update(Run, finished.pk, {"status": RunStatus.WAITING}, only_if=guard) == 0
    assert Run.objects.get(pk=active.pk).status == "waiting"
    assert Run.objects.get(pk=finished.pk).status == "succeeded"
    assert rows.update(Run, active.pk, {"status": RunStatus.RUNNING}, only_if=("status", ())) == 0  # as __in=[]
    assert Run.objects.get(pk=active.pk).status == "waiting"


def test_an_update_converts_its_values_as_the_orm_does():
    run = Run.objects.create(tool="deploy")
    assert rows.update(Run, run.pk, {"finished_at": MOMENT, "args": {"k": ["v"]}, "cancel_requested": True}) == 1
    row = Run.objects.get(pk=run.pk)
    assert (row.finished_at, row.args, row.cancel_requested) == (MOMENT, {"k": ["v"]}, True)


def test_audit_events_written_through_rows_keep_the_hash_chain():
    from approvals.audit import chain as audit

    for n in range(3):
        AuditEvent.objects.create(action=AuditEvent.Action.RUN_STARTED, actor=f"a{n}", payload={"n": n})
    assert audit.verify_chain().problem is None


def test_with_a_save_receiver_an_audit_event_goes_through_save_and_is_heard():
    heard = []

    def receiver(sender, instance, created, **kwargs):
        heard.append((instance.pk, created))

    post_save.connect(receiver, sender=AuditEvent, dispatch_uid="test_rows.receiver")
    try:
        assert rows.has_save_receivers(AuditEvent)
        event = AuditEvent.objects.create(
            action=AuditEvent.Action.RUN_STARTED, actor="someone", created_at=timezone.now()
        )
    finally:
        post_save.disconnect(dispatch_uid="test_rows.receiver", sender=AuditEvent)
    assert heard == [(event.pk, True)]
    assert not rows.has_save_receivers(AuditEvent)


def test_insert_or_save_calls_save_only_when_someone_listens():
    orm_saves, heard = [], []
    quiet = Request(id="quiet", kind="input", prompt="?")
    rows.insert_or_save(quiet, lambda: orm_saves.append(quiet.pk))

    def receiver(sender, instance, **kwargs):
        heard.append(instance.pk)

    pre_save.connect(receiver, sender=Request, dispatch_uid="test_rows.insert_or_save")
    try:
        loud = Request(id="loud", kind="input", prompt="?")
        rows.insert_or_save(loud, lambda: loud.save(force_insert=True))
    finally:
        pre_save.disconnect(dispatch_uid="test_rows.insert_or_save", sender=Request)
    assert orm_saves == [] and heard == ["loud"]
    assert set(Request.objects.values_list("id", flat=True)) == {"quiet", "loud"}


def test_values_reads_the_fields_the_orm_reads(make_user):
    user = make_user("answerer")
    Request.objects.create(
        id="answered",
        kind="input",
        prompt="?",
        status="answered",
        answer_ok=True,
        answer_data={"region": "eu", "n": [1, None]},
        answered_by=user,
        answered_at=MOMENT,
    )
    names = ("status", "answer_ok", "answer_data", "answer_reason", "answered_by", "answered_at", "resumable")
    by_orm = Request.objects.filter(pk="answered").values(*names).first()
    assert rows.values(Request, "answered", names) == by_orm
    assert rows.values(Request, "answered", ("answered_at",))["answered_at"] == MOMENT
    assert rows.values(Request, "no-such-request", names) is None


def test_pks_are_the_ids_the_orm_filters_and_orders():
    run, other = Run.objects.create(tool="deploy"), Run.objects.create(tool="deploy")
    for n, (of, status) in enumerate([(run, "open"), (other, "open"), (run, "answered"), (run, "open")]):
        Request.objects.create(
            id=f"pk-{3 - n}",
            run=of,
            kind="approval",
            prompt="ok?",
            status=status,
            created_at=MOMENT + datetime.timedelta(seconds=n),
        )
    where = {"run": run.pk, "status": "open"}
    orm = list(Request.objects.filter(**where).order_by("created_at").values_list("pk", flat=True))
    assert rows.pks(Request, where, order_by="created_at") == orm == ["pk-3", "pk-0"]
    assert rows.pks(Request, {"run": 424242, "status": "open"}, order_by="created_at") == []


def test_with_a_save_receiver_on_requests_a_suspension_goes_through_save_and_is_heard():
    from toolnexus import pending, pending_of

    from approvals.review import decisions

    heard = []
    post_save.connect(
        lambda sender, instance, created, **kw: heard.append((instance.pk, created)),
        sender=Request,
        dispatch_uid="test_rows.request_receiver",
        weak=False,
    )
    try:
        run = Run.objects.create(tool="deploy", status=RunStatus.RUNNING)
        wire = pending_of(pending(kind="approval", id="heard-1", prompt="ok?"))
        decisions.open_request(wire, run_id=run.pk, tool="deploy")
    finally:
        post_save.disconnect(dispatch_uid="test_rows.request_receiver", sender=Request)
    assert heard == [("heard-1", True)]
    assert Run.objects.get(pk=run.pk).status == RunStatus.WAITING


def test_a_compiled_read_gives_the_rows_the_orm_gives_in_its_order_each_time():
    done = Run.objects.create(tool="deploy", status=RunStatus.SUCCEEDED, timeout=2.5, args={"n": [1]})
    Run.objects.create(tool="other", status=RunStatus.SUCCEEDED)
    Run.objects.create(tool="deploy", status=RunStatus.RUNNING)
    build = lambda: Run.objects.filter(status=RunStatus.SUCCEEDED).order_by("-tool", "id")  # noqa: E731
    read = rows.CompiledRead(build)
    for _ in range(2):  # the second call reuses the statement
        with CaptureQueriesContext(connection) as queries:
            got = read()
        assert len(queries) == 1
        assert [stored_row(run) for run in got] == [stored_row(run) for run in build()]
    assert got[1].pk == done.pk and got[1].args == {"n": [1]} and got[1].timeout == 2.5
    Run.objects.filter(pk=done.pk).update(status=RunStatus.FAILED)
    assert [run.tool for run in read()] == ["other"]


def test_a_compiled_read_refuses_what_it_would_not_build():
    for build in (
        lambda: Run.objects.select_related("started_by"),
        lambda: Run.objects.annotate(n=Count("requests")),
    ):
        with pytest.raises(ValueError, match="own columns"):
            rows.CompiledRead(build)()


def stored_row(instance):
    return {f.attname: getattr(instance, f.attname) for f in type(instance)._meta.concrete_fields}
