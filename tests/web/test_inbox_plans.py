"""The inbox's "I may answer" total and a dashboard's totals are counted from an index alone; on
PostgreSQL a search of open requests reads trigram indexes.

Counting what a reviewer may answer leaves out the requests they already approved (their ids), and
the totals by kind and tool count ids, so both need each open request's status, kind, tool and id.
With all four in one index the database counts from the index; without the id it read every open
request's row: at 100,000 open on PostgreSQL 34 and 38 ms of each call (docs/performance.md, "The
inbox at 100,000 open requests on PostgreSQL"). Checked in each database's own plan, as its planner
chooses it for a queue long enough that the table costs more to read than the index.
"""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from approvals import inbox, selectors
from approvals.models import Request, RequestApproval
from approvals.team import policies
from tests.support.long_queue import open_requests_in_bulk

pytestmark = pytest.mark.django_db(transaction=True)

# Long enough that reading the rows costs the planner more than reading the index (ten times as wide).
QUEUE = 2000


def statistics_gathered():
    """What autovacuum leaves after a bulk load: the planner's statistics and, on PostgreSQL, the visibility
    map an index-only scan relies on. The test server commits asynchronously: until its WAL is flushed (the
    CHECKPOINT), VACUUM may not mark the new rows visible to all."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("CHECKPOINT")
            cursor.execute("VACUUM ANALYZE approvals_request")
        else:
            cursor.execute("ANALYZE")


def plan_of(sql):
    """The database's plan for ``sql``, as one text."""
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("EXPLAIN " + sql)
        else:
            cursor.execute("EXPLAIN QUERY PLAN " + sql)
        return "\n".join(" ".join(str(value) for value in row) for row in cursor.fetchall())


def reads_the_index_alone(plan):
    if connection.vendor == "postgresql":
        return "Index Only Scan using request_status_kind_tool_id on approvals_request" in plan
    return "USING COVERING INDEX request_status_kind_tool_id" in plan


def test_i_may_answer_is_counted_from_the_index_alone(alice):
    ids = open_requests_in_bulk(QUEUE)
    RequestApproval.objects.create(request=Request.objects.get(pk=ids[0]), user=alice)
    statistics_gathered()
    rows = inbox.matching(inbox.InboxQuery(may_answer=True), policies.Viewer(username=alice.username))
    with CaptureQueriesContext(connection) as captured:
        count = rows.count()

    assert count == QUEUE - 1  # every open request but the one alice already approved
    (sql,) = [query["sql"] for query in captured if query["sql"].startswith("SELECT COUNT(*)")]
    plan = plan_of(sql)
    assert reads_the_index_alone(plan), plan


def test_the_dashboards_totals_are_counted_from_the_index_alone(alice):
    open_requests_in_bulk(QUEUE)
    statistics_gathered()
    with CaptureQueriesContext(connection) as captured:
        counts = selectors.open_request_counts(policies.Viewer(username=alice.username))

    assert counts["requests"] == QUEUE and counts["for_me"] == QUEUE
    (sql,) = [query["sql"] for query in captured if "GROUP BY" in query["sql"]]
    plan = plan_of(sql)
    assert reads_the_index_alone(plan), plan


TRIGRAM_INDEXES = [f"request_open_{column}_trgm" for column in ("prompt", "tool", "host", "args")]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="pg_trgm is PostgreSQL's; SQLite's search reads its rows")
def test_a_search_of_open_requests_reads_the_trigram_indexes_on_postgresql(alice):
    # At 100,000 open the search read every row (190 ms); with one trigram index per searched column and the
    # requesters' ids read first, the OR of them is one bitmap (migration 0020, docs/performance.md).
    open_requests_in_bulk(QUEUE)
    statistics_gathered()
    rows = inbox.matching(inbox.InboxQuery(q="a-0001"), policies.Viewer(username=alice.username))
    with CaptureQueriesContext(connection) as captured:
        count = rows.count()

    assert count == 100  # orders A-000100 to A-000199, in any case
    (sql,) = [query["sql"] for query in captured if query["sql"].startswith("SELECT COUNT(*)")]
    plan = plan_of(sql)
    assert "BitmapOr" in plan and "Seq Scan on approvals_request" not in plan, plan
    for name in TRIGRAM_INDEXES:
        assert f"Bitmap Index Scan on {name}" in plan, plan
