"""The audit page (/audit/) and its CSV and JSON Lines export: thin views over approvals.audit.pages.

The export streams the filtered view from an async generator, one keyset chunk
at a time, so a 100,000-event export never sits in memory (a plain iterator
under ASGI would be read whole before the first byte goes out).
"""

import csv
import io
import json
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from django.http import Http404, HttpResponse, HttpResponseBase, JsonResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode

from approvals.audit import pages
from approvals.web.decorators import LoggedInRequest, login_required_async

EXPORT_TYPES = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson; charset=utf-8"}


def _url(name: str, query: Mapping[str, str | int | None], *args: str) -> str:
    kept = {key: value for key, value in query.items() if value is not None and value != ""}
    return reverse(name, args=args) + ("?" + urlencode(kept) if kept else "")


@login_required_async
async def audit_page(request: LoggedInRequest) -> HttpResponse:
    """The filtered trail, a page at a time; a refused filter is named beside the form (status 400) and ignored."""
    form = pages.AuditFilterForm(request.GET)
    filters = form.filters()
    limit = pages.page_size(request.GET.get("limit"))
    before, after = pages.record_id(request.GET.get("before")), pages.record_id(request.GET.get("after"))
    page = await pages.aaudit_page(filters, before=before, after=after, limit=limit)
    query = filters.as_query()
    if limit != pages.PAGE_SIZE:
        query["limit"] = str(limit)
    return render(
        request,
        "approvals/audit.html",
        {
            "form": form,
            "filters": filters,
            "page": page,
            "choices": await pages.aknown_values(),
            "newer_url": _url("audit", {**query, "after": page.newer}) if page.newer else None,
            "older_url": _url("audit", {**query, "before": page.older}) if page.older else None,
            "first_url": _url("audit", query),
            # The same view with run.transcript events shown or hidden again (from its newest page).
            "transcript_toggle_url": _url("audit", {**query, "transcript": "" if filters.transcript else "1"}),
            "csv_url": _url("audit-export", filters.as_query(), "csv"),
            "jsonl_url": _url("audit-export", filters.as_query(), "jsonl"),
        },
        status=400 if filters.errors else 200,
    )


async def _rows(filters: pages.AuditFilters) -> AsyncIterator[dict[str, Any]]:
    before = None
    while True:
        chunk = await pages.aexport_chunk(filters, before)
        if not chunk:
            return
        for row in chunk:
            yield row
        before = chunk[-1]["seq"]


def _csv_line(cells: Iterable[str]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer).writerow(cells)
    return buffer.getvalue()


async def _csv(filters: pages.AuditFilters) -> AsyncIterator[str]:
    yield _csv_line(pages.CSV_COLUMNS)
    async for row in _rows(filters):
        yield _csv_line(pages.csv_cells(row))


async def _jsonl(filters: pages.AuditFilters) -> AsyncIterator[str]:
    async for row in _rows(filters):
        yield json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n"


@login_required_async
async def audit_export(request: LoggedInRequest, fmt: str) -> HttpResponseBase:
    """The filtered audit trail, newest first (the page's order), as CSV or JSON Lines.

    The filters are checked before the response starts: once streaming, a failure could only cut the download short.
    """
    if fmt not in EXPORT_TYPES:
        raise Http404("Export as .csv or .jsonl.")
    filters = pages.parse_filters(request.GET)
    if filters.errors:
        return JsonResponse(
            {"error": "bad_request", "message": "Fix the filters first.", "field_errors": filters.errors}, status=400
        )
    body = _csv(filters) if fmt == "csv" else _jsonl(filters)
    response = StreamingHttpResponse(body, content_type=EXPORT_TYPES[fmt])
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    response["Content-Disposition"] = f'attachment; filename="audit-{stamp}.{fmt}"'
    response["Cache-Control"] = "no-store"
    return response
