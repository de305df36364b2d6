"""The audit trail as evidence: the hash chain, verify_audit, append-only everywhere, the audit page and its export."""

import csv
import importlib
import io
import json
import os
import subprocess
import sys
from datetime import UTC, datetime

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings
from django.contrib import admin
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.db.models import ProtectedError
from django.test import AsyncClient, Client, RequestFactory
from django.test.utils import CaptureQueriesContext

from approvals import events, frames
from approvals.audit import chain as audit
from approvals.audit import pages
from approvals.audit.sealer import Sealer
from approvals.models import AuditEvent, Policy, Request, Run, sealing
from approvals.review import decisions
from tests.support.dashboard import waiting_request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
A = AuditEvent.Action

# reset_sequences: ids start at 1, so "#2" below is the second event.
pytestmark = pytest.mark.django_db(transaction=True, reset_sequences=True)
# The pages are async views: their database work runs in another thread, so the data must be committed.


def record(n, chain=True, **fields):
    """n events through events.record (the way the console writes them), then chained as the sealer chains
    them after their commit (``chain=False``: left as committed, each with only its own MAC)."""
    made = []
    for i in range(n):
        with transaction.atomic():
            made.append(
                events.record(
                    fields.get("action", A.RUN_STARTED),
                    actor=fields.get("actor", f"user{i}"),
                    payload={"i": i, "note": "ünïcode ✓", "nested": {"b": [1, 2.5], "a": None}},
                )
            )
    if not chain:
        return made
    AuditEvent.objects.seal_pending()
    stored = AuditEvent.objects.in_bulk([event.pk for event in made])
    return [stored[event.pk] for event in made]


def verify(*args):
    """verify_audit's verdict, its first line (the key ranges and the head follow it)."""
    return verify_output(*args).splitlines()[0]


def verify_output(*args):
    out = io.StringIO()
    call_command("verify_audit", *args, stdout=out)
    return out.getvalue().strip()


def verify_fails(*args):
    with pytest.raises(CommandError) as failed:
        verify(*args)
    assert failed.value.returncode == 1
    return str(failed.value)


def eventually(check, deadline=10.0):
    """``check()`` once it is true (another thread's commit cannot be awaited from here), or its last value."""
    import time

    end = time.monotonic() + deadline
    while not (result := check()) and time.monotonic() < end:
        time.sleep(0.02)
    return result


def raw(sql, params=()):
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


# -- the chain ----------------------------------------------------------------------------------------


def test_each_event_is_chained_to_the_one_before():
    first, second, third = record(3)
    assert first.prev_hash == "" and second.prev_hash == first.hash and third.prev_hash == second.hash
    assert [first.position, second.position, third.position] == [1, 2, 3]
    stored = AuditEvent.objects.get(pk=second.pk)
    key = django_settings.CONSOLE_AUDIT_KEYS[stored.key_version]
    assert stored.hash == audit.compute_hash(stored.prev_hash, audit.canonical_fields(stored), key) == second.hash
    assert len({first.hash, second.hash, third.hash}) == 3
    assert verify() == "3 events verified."


def test_events_copy_the_tool_and_kind_of_their_request(make_user):
    waiting_request("chain-req", starter=make_user("alice"), tool="refund", kind="approval")
    opened = AuditEvent.objects.get(request_id="chain-req", action=A.REQUEST_OPENED)
    assert (opened.tool, opened.kind) == ("refund", "approval")
    assert verify("--seal") == "1 event verified."


def test_verify_finds_an_edited_row():
    record(4)
    raw(f"UPDATE {AuditEvent._meta.db_table} SET payload = %s WHERE id = 2", ['{"i": 99}'])
    message = verify_fails()
    assert "after 1 good event(s)" in message
    assert "Event #2 was altered: its contents no longer match its hash." in message


def test_verify_finds_an_edit_that_was_re_hashed():
    record(4)
    tampered = AuditEvent.objects.get(pk=2)
    tampered.actor = "mallory"
    raw(
        f"UPDATE {AuditEvent._meta.db_table} SET actor = %s, hash = %s WHERE id = 2",
        [
            "mallory",
            audit.compute_hash(
                tampered.prev_hash,
                audit.canonical_fields(tampered),
                django_settings.CONSOLE_AUDIT_KEYS[tampered.key_version],
            ),
        ],
    )
    assert "Event #3 does not follow #2" in verify_fails()


def test_verify_finds_a_deleted_row():
    record(4)
    raw(f"DELETE FROM {AuditEvent._meta.db_table} WHERE id = 3")
    assert "Event #3 is missing: the trail jumps from #2 to #4." in verify_fails()


def test_verify_finds_deleted_oldest_and_newest_rows():
    record(4)
    raw(f"DELETE FROM {AuditEvent._meta.db_table} WHERE id = 4")
    assert "Event #4 is missing: the newest event left is #3, but ids up to #4 were issued." in verify_fails()
    raw(f"DELETE FROM {AuditEvent._meta.db_table} WHERE id = 1")
    assert "Events before #2 are missing" in verify_fails()


def test_a_new_event_after_a_deleted_newest_one_does_not_hide_the_gap():
    record(3)
    raw(f"DELETE FROM {AuditEvent._meta.db_table} WHERE id = 3")
    [fourth] = record(1)
    assert fourth.pk == 4  # never the deleted id again
    assert "Event #3 is missing" in verify_fails()


def test_verify_audit_exit_codes_from_the_command_line():
    record(2)
    env = {
        **os.environ,
        "CONSOLE_SQLITE_PATH": connection.settings_dict["NAME"],
        "DJANGO_SETTINGS_MODULE": "toolnexus_site.settings",
    }

    def run():
        return subprocess.run(
            [sys.executable, "manage.py", "verify_audit"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
        )

    good = run()
    assert (good.returncode, good.stdout.splitlines()[0]) == (0, "2 events verified."), good.stderr
    raw(f"UPDATE {AuditEvent._meta.db_table} SET actor = 'mallory' WHERE id = 1")
    bad = run()
    assert bad.returncode == 1
    assert "Event #1 was altered" in bad.stderr


KEY_1 = b"k" * 32
KEY_2 = b"q" * 32
ATTACKERS_KEY = b"m" * 32


def test_rewriting_the_trail_without_the_deployments_key_is_found(settings):
    """The probe's attack: edit #3, delete the newest event, hide the deletion, re-hash the chain."""
    settings.CONSOLE_AUDIT_KEYS = {1: KEY_1}
    record(5)
    raw(f"UPDATE {AuditEvent._meta.db_table} SET payload = %s WHERE id = 3", ['{"i": 99}'])
    raw(f"DELETE FROM {AuditEvent._meta.db_table} WHERE id = 5")
    raw("UPDATE sqlite_sequence SET seq = 4 WHERE name = %s", [AuditEvent._meta.db_table])
    settings.CONSOLE_AUDIT_KEYS = {1: ATTACKERS_KEY}  # a copy of the database does not hold the key
    audit.backfill_chain()
    settings.CONSOLE_AUDIT_KEYS = {1: KEY_1}
    assert "Event #1 was altered: its contents no longer match its hash" in verify_fails()


def test_verify_names_the_key_version_of_each_range_and_prints_the_head(settings):
    settings.CONSOLE_AUDIT_KEYS = {1: KEY_1}
    record(2)
    settings.CONSOLE_AUDIT_KEYS = {1: KEY_1, 2: KEY_2}  # rotation: a new version seals from now on
    third, fourth = record(2)
    lines = verify_output().splitlines()
    assert lines == [
        "4 events verified.",
        "#1–#2 sealed with key version 1.",
        "#3–#4 sealed with key version 2.",
        f"Head: #4:{fourth.hash}",
    ]
    assert third.key_version == fourth.key_version == 2


def test_a_dropped_key_version_is_named_and_reseal_audit_moves_the_trail_to_the_newest(settings):
    settings.CONSOLE_AUDIT_KEYS = {1: KEY_1}
    record(2)
    settings.CONSOLE_AUDIT_KEYS = {2: KEY_2}
    assert "Event #1 was sealed with key version 1, which CONSOLE_AUDIT_KEYS does not hold" in verify_fails()
    settings.CONSOLE_AUDIT_KEYS = {1: KEY_1, 2: KEY_2}
    out = io.StringIO()
    call_command("reseal_audit", stdout=out)
    assert out.getvalue().strip() == "2 events re-sealed with key version 2."
    settings.CONSOLE_AUDIT_KEYS = {2: KEY_2}
    assert verify_output().splitlines()[1] == "#1–#2 sealed with key version 2."


def test_reseal_audit_refuses_a_trail_that_does_not_verify(settings):
    settings.CONSOLE_AUDIT_KEYS = {1: KEY_1}
    record(3)
    raw(f"UPDATE {AuditEvent._meta.db_table} SET actor = 'mallory' WHERE id = 2")
    with pytest.raises(CommandError, match="Not re-sealed: .*Event #2 was altered"):
        call_command("reseal_audit")
    assert "Event #2 was altered" in verify_fails()


def test_events_removed_from_the_end_are_found_against_a_recorded_head():
    record(4)
    head = verify_output().splitlines()[-1].removeprefix("Head: ")
    raw(f"DELETE FROM {AuditEvent._meta.db_table} WHERE id IN (3, 4)")
    raw("UPDATE sqlite_sequence SET seq = 2 WHERE name = %s", [AuditEvent._meta.db_table])
    assert verify() == "2 events verified."  # nothing inside the database shows it
    assert "Event #4, the head recorded earlier, is missing" in verify_fails("--head", head)
    with pytest.raises(CommandError, match="A head looks like"):
        verify("--head", "not-a-head")


def test_bulk_create_chains_each_event():
    record(1)
    AuditEvent.objects.bulk_create([AuditEvent(action=A.RUN_STARTED, actor=f"bulk{i}") for i in range(5)])
    assert list(AuditEvent.objects.values_list("id", flat=True)) == [1, 2, 3, 4, 5, 6]
    assert AuditEvent.objects.seal_pending() == 5
    assert list(AuditEvent.objects.values_list("position", flat=True)) == [1, 2, 3, 4, 5, 6]
    assert verify() == "6 events verified."


def test_an_event_is_one_insert_in_its_transaction():
    """No lock, no read of the chain's head or of sqlite_sequence, no savepoint: the event's INSERT alone."""
    record(2)
    with CaptureQueriesContext(connection) as captured, transaction.atomic():
        event = events.record(A.RUN_STARTED, actor="alice", payload={"n": 1})
    statements = [q["sql"] for q in captured.captured_queries if q["sql"] not in ("BEGIN IMMEDIATE", "BEGIN", "COMMIT")]
    assert len(statements) == 1, statements
    assert statements[0].startswith(f'INSERT INTO "{AuditEvent._meta.db_table}"'), statements
    assert event.pk == 3 and event.position is None and event.mac and event.nonce


def test_an_event_not_chained_yet_verifies_by_its_own_mac_and_is_chained_after_the_head():
    record(2)
    third, fourth = record(2, chain=False)
    lines = verify_output().splitlines()
    assert lines[0] == "4 events verified, 2 of them not chained yet (each checked against its own MAC)."
    assert lines[-1].startswith("Head: #2:")
    assert AuditEvent.objects.seal_pending() == 2
    chained = AuditEvent.objects.get(pk=fourth.pk)
    assert (chained.position, chained.prev_hash) == (4, AuditEvent.objects.get(pk=third.pk).hash)
    assert verify() == "4 events verified."


def test_an_edit_of_an_event_not_chained_yet_is_found_and_never_chained():
    record(1)
    record(2, chain=False)
    raw(f"UPDATE {AuditEvent._meta.db_table} SET payload = %s WHERE id = 3", ['{"i": 99}'])
    assert "Event id 3 (not chained yet) was altered" in verify_fails()
    with pytest.raises(sealing.Unsealable, match="event id 3 does not match its own MAC"):
        AuditEvent.objects.seal_pending()
    assert AuditEvent.objects.get(pk=2).position == 2  # those before it are chained
    assert AuditEvent.objects.get(pk=3).position is None  # it stays out of the chain, named by verify_audit
    assert "Event id 3 (not chained yet) was altered" in verify_fails()


def test_a_copy_of_an_event_under_a_new_id_is_refused_or_found():
    record(1, chain=False)
    columns = "action, actor, payload, created_at, tool, kind, key_version, nonce, mac, prev_hash, hash"
    copy = f"INSERT INTO {AuditEvent._meta.db_table} ({columns}) SELECT {columns} FROM {AuditEvent._meta.db_table} WHERE id = 1"
    with pytest.raises(IntegrityError), transaction.atomic():
        raw(copy)  # the same nonce: the column is unique
    # A nonce of its own ("x" is never a hex digit, so never the original's): the MAC no longer matches.
    raw(copy.replace(" nonce, mac, prev_hash, hash FROM", " 'x' || substr(nonce, 2), mac, prev_hash, hash FROM"))
    assert AuditEvent.objects.count() == 2
    assert "Event id 2 (not chained yet) was altered" in verify_fails()


def test_verify_finds_reordered_events():
    record(4)
    table = AuditEvent._meta.db_table
    raw(f"UPDATE {table} SET position = 100 WHERE id = 2")
    raw(f"UPDATE {table} SET position = 2 WHERE id = 3")
    raw(f"UPDATE {table} SET position = 3 WHERE id = 2")
    with connection.cursor() as cursor:  # SQLite's ids would show it too: look at the positions alone
        cursor.execute(f"SELECT id, position FROM {table} ORDER BY position")
        assert cursor.fetchall() == [(1, 1), (3, 2), (2, 3), (4, 4)]
    assert "Event #2 is missing: the trail jumps from #1 to #3." in verify_fails()


def test_reordered_positions_are_found_by_the_chain_where_ids_have_gaps(monkeypatch):
    """On PostgreSQL ids may have gaps (a rolled-back insert) and are not the commit order: positions are."""
    record(4)
    table = AuditEvent._meta.db_table
    raw(f"UPDATE {table} SET position = 100 WHERE id = 2")
    raw(f"UPDATE {table} SET position = 2 WHERE id = 3")
    raw(f"UPDATE {table} SET position = 3 WHERE id = 2")
    monkeypatch.setattr(connection, "vendor", "postgresql")  # verify as it does where ids may have gaps
    monkeypatch.setattr(audit, "issued_up_to", lambda table, using: None)
    report = audit.verify_chain()
    assert report.problem is not None and report.problem.startswith("Event #2 (id 3) does not follow #1"), report


def test_the_sealer_chains_what_commits_after_it_wakes():
    sealer = Sealer(delay=0.0)
    sealer.start()
    try:
        [event] = record(1, chain=False)
        chained = eventually(lambda: AuditEvent.objects.filter(pk=event.pk, position__isnull=False).exists())
    finally:
        sealer.stop()
    assert chained and verify() == "1 event verified."
    assert not sealing.listening()


# -- append-only -----------------------------------------------------------------------------------


def test_the_orm_refuses_to_update_or_delete_events():
    first, second = record(2)
    with pytest.raises(PermissionError, match="append-only"):
        AuditEvent.objects.filter(pk=first.pk).update(actor="mallory")
    with pytest.raises(PermissionError, match="append-only"):
        AuditEvent.objects.all().delete()
    with pytest.raises(PermissionError, match="append-only"):
        AuditEvent.objects.bulk_update([first], ["actor"])
    with pytest.raises(PermissionError, match="append-only"):
        first.delete()
    first.actor = "mallory"
    with pytest.raises(PermissionError, match="append-only"):
        first.save()
    assert list(AuditEvent.objects.order_by("id").values_list("actor", flat=True)) == ["user0", "user1"]


def test_a_user_who_acted_cannot_be_deleted_and_their_name_stays(make_user):
    alice = make_user("alice")
    with transaction.atomic():
        events.record(A.RUN_STARTED, actor="alice", actor_user=alice)
    with pytest.raises(ProtectedError):
        alice.delete()
    assert AuditEvent.objects.get().actor == "alice"


def test_a_run_or_request_with_events_cannot_be_deleted(make_user):
    request = waiting_request("keep-me", starter=make_user("alice"))
    with pytest.raises(ProtectedError):
        Request.objects.filter(pk=request.pk).delete()
    with pytest.raises(ProtectedError):
        Run.objects.get(pk=request.run_id).delete()


# -- the admin ----------------------------------------------------------------------------------------


@pytest.fixture
def admin_client_for(make_user):
    def login():
        user = make_user("root", is_staff=True, is_superuser=True)
        client = Client()
        client.force_login(user)
        return client

    return login


def test_the_admin_shows_the_audit_trail_read_only(admin_client_for):
    client = admin_client_for()
    [event] = record(1)
    model_admin = admin.site._registry[AuditEvent]
    request = RequestFactory().get("/admin/")
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request, event)
    assert not model_admin.has_delete_permission(request, event)

    assert client.get("/admin/approvals/auditevent/").status_code == 200
    assert client.get("/admin/approvals/auditevent/add/").status_code == 403
    assert client.get(f"/admin/approvals/auditevent/{event.pk}/delete/").status_code == 403
    change = client.get(f"/admin/approvals/auditevent/{event.pk}/change/")
    assert change.status_code == 200 and b'name="_save"' not in change.content
    posted = client.post(f"/admin/approvals/auditevent/{event.pk}/change/", {"actor": "mallory"})
    assert posted.status_code == 403
    listing = client.post("/admin/approvals/auditevent/", {"action": "delete_selected", "_selected_action": [event.pk]})
    assert AuditEvent.objects.get(pk=event.pk).actor == "user0"
    assert listing.status_code in (200, 302)


def test_runs_requests_and_policies_are_searchable_in_the_admin(admin_client_for, make_user):
    client = admin_client_for()
    waiting_request("find-me-1", starter=make_user("alice"), prompt="Refund order A-77?")
    for path in (
        "/admin/approvals/run/?q=refund",
        "/admin/approvals/request/?q=A-77",
        "/admin/approvals/policy/?q=refund",
        "/admin/approvals/auditevent/?q=alice",
        "/admin/approvals/run/?q=12",
        "/admin/approvals/auditevent/?q=7",
    ):
        assert client.get(path).status_code == 200, path
    found = client.get("/admin/approvals/request/?q=A-77")
    assert b"find-me-1" in found.content
    assert client.get("/admin/approvals/request/add/").status_code == 403
    assert client.get("/admin/approvals/policy/add/").status_code == 200


# -- the audit page --------------------------------------------------------------------------------------


def at(day, hour=12):
    return datetime(2030, 1, day, hour, tzinfo=UTC)


def seed_trail():
    """A small varied trail: three days, two users, two tools, runs and requests."""
    rows = []
    for i in range(30):
        rows.append(
            AuditEvent(
                action=[A.RUN_STARTED, A.REQUEST_OPENED, A.REQUEST_ANSWERED][i % 3],
                actor=["alice", "bob"][i % 2],
                tool=["refund", "deploy"][(i // 2) % 2],
                kind="approval" if i % 3 else "",
                payload={"i": i},
                created_at=at(1 + i // 10, hour=i % 10),
            )
        )
    AuditEvent.objects.bulk_create(rows)


@pytest.fixture
def reviewer_client(make_user):
    client = Client()
    client.force_login(make_user("reviewer"))
    return client


def page_rows(client, query):
    response = client.get("/audit/", query)
    assert response.status_code == 200
    return response, response.context["page"]


def test_the_audit_page_needs_a_login(client):
    response = client.get("/audit/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_the_audit_page_filters(reviewer_client):
    seed_trail()
    everything = list(AuditEvent.objects.order_by("-id"))

    def expect(query, keep):
        _, page = page_rows(reviewer_client, {**query, "limit": 500})
        assert [r["seq"] for r in page.rows] == [e.pk for e in everything if keep(e)], query

    expect({"user": "alice"}, lambda e: e.actor == "alice")
    expect({"tool": "deploy"}, lambda e: e.tool == "deploy")
    expect({"kind": "approval"}, lambda e: e.kind == "approval")
    expect({"action": "request.answered"}, lambda e: e.action == "request.answered")
    expect({"action": "request.*"}, lambda e: e.action.startswith("request."))
    expect({"since": "2030-01-02"}, lambda e: e.created_at >= at(2, 0))
    expect({"since": "2030-01-02", "until": "2030-01-02"}, lambda e: at(2, 0) <= e.created_at < at(3, 0))
    expect(
        {"user": "bob", "tool": "refund", "until": "2030-01-01"},
        lambda e: e.actor == "bob" and e.tool == "refund" and e.created_at < at(2, 0),
    )


def test_bad_filters_are_named_and_ignored(reviewer_client):
    seed_trail()
    response = reviewer_client.get("/audit/", {"since": "yesterday", "action": "nope"})
    assert response.status_code == 400
    assert len(response.context["page"].rows) == 30  # the bad filters are ignored, not applied
    content = response.content.decode()
    assert 'name="since" value="yesterday"' in content  # what was typed stays in its field
    assert "&#x27;yesterday&#x27; is not a date; use YYYY-MM-DD." in content
    assert "Unknown action &#x27;nope&#x27;." in content


def test_the_audit_page_pages_by_id_both_ways(reviewer_client):
    AuditEvent.objects.bulk_create(
        [AuditEvent(action=A.RUN_STARTED, actor="pager", payload={"i": i}) for i in range(23)]
    )
    newest_first = list(AuditEvent.objects.order_by("-id").values_list("id", flat=True))
    seen, pages, query = [], [], {"limit": 10}
    while True:
        response, page = page_rows(reviewer_client, query)
        pages.append(page)
        seen += [r["seq"] for r in page.rows]
        if page.older is None:
            break
        assert f"before={page.older}" in response.context["older_url"]
        query = {"limit": 10, "before": page.older}
    assert seen == newest_first
    assert [len(p.rows) for p in pages] == [10, 10, 3]
    assert pages[0].newer is None and pages[1].newer is not None
    # "Newer" from the last page leads back to the middle page exactly.
    _, back = page_rows(reviewer_client, {"limit": 10, "after": pages[2].newer})
    assert [r["seq"] for r in back.rows] == [r["seq"] for r in pages[1].rows]


async def test_export_matches_the_filtered_pages(make_user):
    await sync_to_async(seed_trail)()
    client = AsyncClient()
    await client.aforce_login(await sync_to_async(make_user)("reviewer"))
    query = {"user": "alice", "action": "request.*"}
    page = await sync_to_async(pages.audit_page)(pages.parse_filters(query), limit=500)
    expected = [r["seq"] for r in page.rows]
    assert expected  # the filter keeps some, drops others
    assert len(expected) < 30

    response = await client.get("/audit/export.jsonl", query)
    assert response.status_code == 200 and response["Content-Type"].startswith("application/x-ndjson")
    assert response.streaming
    body = b"".join([chunk async for chunk in response.streaming_content]).decode()
    lines = [json.loads(line) for line in body.splitlines()]
    assert [row["seq"] for row in lines] == expected
    assert lines[0] == json.loads(json.dumps(page.rows[0]))
    assert set(lines[0]) == {
        "seq",
        "at",
        "actor",
        "action",
        "what",
        "decision",
        "tool",
        "kind",
        "run",
        "request",
        "payload",
        "prev_hash",
        "hash",
    }

    response = await client.get("/audit/export.csv", query)
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert "attachment;" in response["Content-Disposition"]
    body = b"".join([chunk async for chunk in response.streaming_content]).decode()
    table = list(csv.DictReader(io.StringIO(body)))
    assert [int(row["seq"]) for row in table] == expected
    assert json.loads(table[0]["payload"]) == page.rows[0]["payload"]
    assert table[0]["hash"] == page.rows[0]["hash"]

    assert (await client.get("/audit/export.csv", {"since": "soon"})).status_code == 400
    assert (await client.get("/audit/export.xml")).status_code == 404


async def test_the_export_walks_past_one_chunk(make_user, monkeypatch):
    monkeypatch.setattr(pages, "EXPORT_CHUNK", 7)
    await sync_to_async(AuditEvent.objects.bulk_create)(
        [AuditEvent(action=A.RUN_STARTED, actor="x") for _ in range(20)]
    )
    client = AsyncClient()
    await client.aforce_login(await sync_to_async(make_user)("reviewer"))
    response = await client.get("/audit/export.jsonl")
    body = b"".join([chunk async for chunk in response.streaming_content]).decode()
    assert [json.loads(line)["seq"] for line in body.splitlines()] == list(range(20, 0, -1))


def test_the_filter_choices_are_the_distinct_values_in_the_trail():
    seed_trail()
    AuditEvent.objects.bulk_create([AuditEvent(action=A.RUN_STARTED, actor="system", tool="")])
    choices = pages.known_values()
    assert choices["users"] == ["alice", "bob", "system"]
    assert choices["tools"] == ["deploy", "refund"]  # the empty tool is not a choice
    assert choices["kinds"] == ["approval"]
    assert "request.*" in choices["actions"] and "request.answer_refused" in choices["actions"]


def test_csv_cells_defuse_spreadsheet_formulas():
    row = {
        "seq": 1,
        "at": "2030-01-01T00:00:00Z",
        "actor": '=HYPERLINK("x")',
        "action": "run.started",
        "what": "-x: run 1",
        "decision": None,
        "tool": "+cmd",
        "kind": "",
        "run": None,
        "request": "@evil",
        "payload": {"a": 1},
        "prev_hash": "",
        "hash": "h",
    }
    cells = pages.csv_cells(row)
    assert cells[2] == '\'=HYPERLINK("x")' and cells[6] == "'+cmd" and cells[9] == "'@evil"
    assert cells[4] == "'-x: run 1" and cells[5] == ""
    assert cells[10] == '{"a": 1}' and cells[8] == ""


# -- the run page's timeline -----------------------------------------------------------------------------


def test_the_run_timeline_includes_its_requests_events(make_user):
    alice, bob = make_user("alice"), make_user("bob")
    Policy.objects.create(name="four-eyes", tool_pattern="refund*", starter_may_answer=False)  # refuses alice below
    request = waiting_request("timeline-1", starter=alice)
    with pytest.raises(decisions.DecisionError):
        decisions.resolve_request("timeline-1", ok=True, user=alice)
    decisions.resolve_request("timeline-1", ok=True, user=bob)
    with transaction.atomic():  # an event about the request recorded without its run
        events.record(A.REQUEST_CREDENTIALS_REFUSED, actor="system", request=request)
    run = Run.objects.get(pk=request.run_id)
    assert [e["action"] for e in frames.run_timeline(run.pk).events] == [
        "request.opened",
        "request.answer_refused",
        "request.answered",
        "request.credentials_refused",
    ]


def test_the_run_page_shows_the_full_timeline(make_user):
    alice, bob = make_user("alice"), make_user("bob")
    Policy.objects.create(name="four-eyes", tool_pattern="refund*", starter_may_answer=False)  # refuses alice below
    request = waiting_request("timeline-2", starter=alice)
    with pytest.raises(decisions.DecisionError):
        decisions.resolve_request("timeline-2", ok=True, user=alice)
    client = Client()
    client.force_login(bob)
    response = client.get(f"/runs/{request.run_id}/")
    assert response.status_code == 200
    assert [e["action"] for e in response.context["timeline"]] == ["request.opened", "request.answer_refused"]
    assert django_settings.TOOLNEXUS is not None


def _migrate(target):
    executor = MigrationExecutor(connection)
    executor.migrate(target)
    return executor.loader.project_state(target).apps


def _unkeyed_trail(apps, count):
    """Events as a console before migration 0008 wrote them: chained by sha256, with no key."""
    legacy_hash = importlib.import_module("approvals.migrations.0008_audit_key_version")._legacy_hash
    OldEvent = apps.get_model("approvals", "AuditEvent")
    prev_hash = ""
    for n in range(count):
        event = OldEvent(action="run.started", actor=f"user{n}", payload={"n": n}, created_at=datetime.now(UTC))
        event.save()  # a historical model: no seal of its own
        event.prev_hash, event.hash = prev_hash, legacy_hash(prev_hash, event)
        raw(
            f"UPDATE {AuditEvent._meta.db_table} SET prev_hash = %s, hash = %s WHERE id = %s",
            [event.prev_hash, event.hash, event.pk],
        )
        prev_hash = event.hash


def test_upgrading_seals_an_unkeyed_trail_that_verifies():
    apps = _migrate([("approvals", "0007_request_expiry_index")])
    _unkeyed_trail(apps, 3)
    _migrate(_leaf_nodes())
    assert verify() == "3 events verified."


def test_upgrading_refuses_to_seal_an_unkeyed_trail_that_was_tampered_with(monkeypatch):
    apps = _migrate([("approvals", "0007_request_expiry_index")])
    _unkeyed_trail(apps, 3)
    raw(f"UPDATE {AuditEvent._meta.db_table} SET actor = 'mallory' WHERE id = 2")
    with pytest.raises(RuntimeError, match="does not verify at event #2"):
        _migrate(_leaf_nodes())
    monkeypatch.setenv("CONSOLE_AUDIT_SEAL_UNVERIFIED", "1")  # sealed as it stands, when the operator says so
    _migrate(_leaf_nodes())
    assert verify() == "3 events verified."


def _leaf_nodes():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()
