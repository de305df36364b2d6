"""The reviewer's inbox: which requests a query matches, in what order, page by page, and grouped.

One query (``InboxQuery``, parsed once from a URL's parameters by ``parse_query``) drives the
API's list, the dashboard's list and a bulk answer "to all N matching this filter", so the three
always agree on what matches. Every filter is a database condition; the policy filters (policy,
assigned to me, I may answer) turn the few distinct (kind, tool) pairs of open requests into
conditions, the way the dashboard's counts do.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.db.models import F, Q, QuerySet, TextField, Value
from django.db.models.functions import Cast, Coalesce, Concat
from django.utils import timezone

from approvals import keyset, selectors
from approvals.models import Request, RequestStatus
from approvals.team import policies

STATUSES = ("open", "resolved", "all")
SORTS = ("oldest", "newest", "deadline")
GROUPS = ("run", "alike")
EXPIRING_WITHIN = timedelta(hours=1)
MAX_SEARCH_CHARS = 200
PAGE_ROWS = 50
MAX_GROUPS = 50  # each group reads its oldest request and ids: a page of groups stays a few reads
# A deadline-sorted page puts requests without a deadline last: they sort as this moment.
NO_DEADLINE = datetime(9999, 12, 31, tzinfo=UTC)

ORDER = {
    "oldest": ("created_at", "id"),
    "newest": ("-created_at", "-id"),
    "deadline": ("deadline", "created_at", "id"),
}
CURSOR_KINDS: dict[str, tuple[type, ...]] = {
    "oldest": (datetime, str),
    "newest": (datetime, str),
    "deadline": (datetime, datetime, str),
}


class Params(Protocol):
    """A URL's query parameters: Django's QueryDict, or a plain dict of strings or lists of strings."""

    def get(self, key: str, default: Any = None) -> Any: ...


class QueryError(ValueError):
    """A parameter the inbox cannot use; the message names it and says what it takes."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


@dataclass(frozen=True)
class InboxQuery:
    q: str = ""
    status: str = "open"
    kinds: tuple[str, ...] = ()
    tool: str = ""
    host: str = ""
    policy: str = ""
    starter: str = ""
    assigned_to_me: bool = False
    may_answer: bool = False
    expiring: bool = False
    sort: str = "oldest"
    group: str = ""

    def as_params(self) -> dict[str, str]:
        """The query as URL parameters, leaving out defaults (for links, and a bulk answer's "filter")."""
        params = {
            "q": self.q,
            "status": "" if self.status == "open" else self.status,
            "kind": ",".join(self.kinds),
            "tool": self.tool,
            "host": self.host,
            "policy": self.policy,
            "starter": self.starter,
            "assigned": "me" if self.assigned_to_me else "",
            "may_answer": "1" if self.may_answer else "",
            "expiring": "1" if self.expiring else "",
            "sort": "" if self.sort == "oldest" else self.sort,
            "group": self.group,
        }
        return {name: value for name, value in params.items() if value}


def _values(params: Params | Mapping[str, Any], name: str) -> list[str]:
    getlist = getattr(params, "getlist", None)
    raw = getlist(name) if callable(getlist) else params.get(name)
    if raw is None:
        return []
    items = raw if isinstance(raw, (list, tuple)) else [raw]
    if not all(isinstance(item, str) for item in items):
        raise QueryError(name, f"{name!r} must be text.")
    return [part.strip() for item in items for part in item.split(",") if part.strip()]


def _one(params: Params | Mapping[str, Any], name: str, *, limit: int = 200) -> str:
    values = _values(params, name) if name != "q" else _text(params, name)
    if len(values) > 1:
        raise QueryError(name, f"{name!r} takes one value; got {len(values)}.")
    value = values[0] if values else ""
    if len(value) > limit:
        raise QueryError(name, f"{name!r} is at most {limit} characters.")
    return value


def _text(params: Params | Mapping[str, Any], name: str) -> list[str]:
    raw = params.get(name)
    if raw is None:
        return []
    if isinstance(raw, (list, tuple)):
        raw = raw[-1] if raw else ""
    if not isinstance(raw, str):
        raise QueryError(name, f"{name!r} must be text.")
    if "\x00" in raw:
        raise QueryError(name, f"{name!r} may not hold U+0000.")
    return [raw.strip()] if raw.strip() else []


def _choice(params: Params | Mapping[str, Any], name: str, choices: tuple[str, ...], default: str) -> str:
    value = _one(params, name) or default
    if value not in choices and value != default:
        raise QueryError(name, f"Unknown {name} {value!r}; use one of {', '.join(choices)}.")
    return value


def _flag(params: Params | Mapping[str, Any], name: str, on: str = "1") -> bool:
    value = _one(params, name)
    if value == "" or (value == "0" and on == "1"):
        return False
    if value != on:
        raise QueryError(name, f"{name!r} is {on!r} to turn it on, or left out.")
    return True


def parse_query(params: Params | Mapping[str, Any], *, default_status: str = "open") -> InboxQuery:
    """An InboxQuery from URL parameters, or QueryError naming the first parameter it cannot use."""
    return InboxQuery(
        q=_one(params, "q", limit=MAX_SEARCH_CHARS),
        status=_choice(params, "status", (*STATUSES, *RequestStatus.values), default_status),
        kinds=tuple(_values(params, "kind")),
        tool=_one(params, "tool"),
        host=_one(params, "host"),
        policy=_one(params, "policy"),
        starter=_one(params, "starter", limit=150),
        assigned_to_me=_flag(params, "assigned", on="me"),
        may_answer=_flag(params, "may_answer"),
        expiring=_flag(params, "expiring"),
        sort=_choice(params, "sort", SORTS, "oldest"),
        group=_choice(params, "group", GROUPS, ""),
    )


# -- what matches ---------------------------------------------------------------------------


def _status_condition(status: str) -> Q:
    if status == "all":
        return Q()
    if status == "resolved":
        return ~Q(status=RequestStatus.OPEN)
    return Q(status=status)


def _pairs_where(rows: QuerySet[Request], keep: Any) -> Q:
    """A condition matching the requests whose (kind, tool) pair ``keep(rule)`` accepts: one read of the
    distinct pairs among ``rows``, each pair's policy deciding for all of its requests."""
    condition = Q(pk__in=[])
    for kind, tool in rows.order_by().values_list("kind", "tool").distinct():
        if keep(policies.rule_for(tool, kind)):
            condition |= Q(kind=kind, tool=tool)
    return condition


def matching(query: InboxQuery, viewer: policies.Viewer | None) -> QuerySet[Request]:
    """The requests ``query`` matches (unordered), as ``viewer`` sees them."""
    rows = Request.objects.filter(_status_condition(query.status))
    if query.kinds:
        rows = rows.filter(kind__in=query.kinds)
    if query.tool:
        rows = rows.filter(tool=query.tool)
    if query.host:
        rows = rows.filter(host=query.host)
    name = get_user_model().USERNAME_FIELD
    if query.starter:
        rows = rows.filter(
            Q(**{f"run__started_by__{name}": query.starter})
            | Q(run__isnull=True, **{f"opened_by__{name}": query.starter})
        )
    if query.expiring:
        rows = rows.filter(status=RequestStatus.OPEN, expires_at__lte=timezone.now() + EXPIRING_WITHIN)
    if query.q:
        text = query.q
        rows = rows.annotate(args_text=Cast("args", TextField())).filter(
            Q(prompt__icontains=text)
            | Q(tool__icontains=text)
            | Q(host__icontains=text)
            | Q(args_text__icontains=text)
            | Q(**{f"opened_by__{name}__icontains": text})
        )
    if query.policy:
        rows = rows.filter(_pairs_where(rows, lambda rule: rule.name == query.policy))
    if viewer is not None and query.assigned_to_me:
        rows = rows.filter(_assigned_to(rows, viewer))
    if viewer is not None and query.may_answer:
        rows = rows.filter(status=RequestStatus.OPEN)
        allowed = _pairs_where(rows, lambda rule: policies.may_be_among(rule.users, rule.groups, viewer))
        rows = rows.filter(allowed).exclude(pk__in=selectors.open_requests_kept_from(viewer))
    return rows


def _assigned_to(rows: QuerySet[Request], viewer: policies.Viewer) -> Q:
    """policies.is_assigned as a condition: handed to the viewer or their group, else named by the
    request's own ``data.assignees`` (read one by one: few requests name any), else by its policy."""
    handed = Q(handed_to=viewer.username) | Q(handed_to__in=[f"group:{group}" for group in viewer.groups])
    unhanded = rows.filter(handed_to="")
    own_names = unhanded.filter(data__has_key="assignees")
    named = [
        request.pk
        for request in own_names.only("pk", "data", "tool", "kind")
        if any(policies.names_viewer(name, viewer) for name in policies.assignees_of(request, _rule_of(request)))
    ]
    by_policy = _pairs_where(
        unhanded.exclude(pk__in=own_names.values("pk")),
        lambda rule: any(policies.names_viewer(name, viewer) for name in rule.assignees),
    )
    return handed | Q(pk__in=named) | (Q(handed_to="") & ~Q(pk__in=own_names.values("pk")) & by_policy)


def _rule_of(request: Request) -> policies.Rule:
    return policies.rule_for(request.tool, request.kind)


def _ordered(rows: QuerySet[Request], sort: str) -> QuerySet[Request]:
    if sort == "deadline":
        rows = rows.annotate(deadline=Coalesce(F("expires_at"), Value(NO_DEADLINE)))
    return rows.order_by(*ORDER[sort])


def _cursor_of(request: Request, sort: str) -> str:
    key: list[keyset.KeyValue] = [request.created_at, request.pk]
    if sort == "deadline":
        key.insert(0, request.deadline)  # type: ignore[attr-defined]  # annotated by _ordered
    return keyset.encode_cursor(key)


def _after(sort: str, cursor: str) -> Q:
    values = keyset.decode_cursor(cursor, CURSOR_KINDS[sort])
    if sort == "newest":
        return keyset.strictly_before(("created_at", "id"), values)
    return keyset.strictly_after(tuple(name.lstrip("-") for name in ORDER[sort]), values)


@dataclass
class InboxPage:
    """One page of an inbox query: the rows' views (or its groups), how many match, the next page's cursor."""

    requests: list[dict[str, Any]]
    count: int
    next: str | None
    groups: list[dict[str, Any]] | None = None


def page(
    query: InboxQuery, viewer: policies.Viewer | None, *, after: str | None = None, limit: int = PAGE_ROWS
) -> InboxPage:
    """The page of ``query`` after the cursor ``after``; each view is as ``viewer`` sees it (selectors.for_user).

    Raises keyset.CursorError for a cursor this query's sort did not give out.
    """
    rows = matching(query, viewer)
    count = rows.count()
    if query.group:
        return InboxPage([], count, None, _groups(rows, query, viewer))
    ordered = _ordered(rows, query.sort)
    if after is not None:
        ordered = ordered.filter(_after(query.sort, after))
    chunk, more = keyset.take_page(
        ordered.select_related(*selectors.REQUEST_USERS).prefetch_related("approvals__user"), limit
    )
    views = [_seen_by(selectors.request_view(request), viewer) for request in chunk]
    return InboxPage(views, count, _cursor_of(chunk[-1], query.sort) if chunk and more else None)


apage = database_sync_to_async(page)


def _seen_by(view: dict[str, Any], viewer: policies.Viewer | None) -> dict[str, Any]:
    return (selectors.for_user(view, viewer) or view) if viewer is not None else view


def matching_ids(query: InboxQuery, viewer: policies.Viewer | None, *, limit: int) -> list[str]:
    """The ids ``query`` matches in its sort order, at most ``limit`` of them (a bulk answer's selection)."""
    return list(_ordered(matching(query, viewer), query.sort).values_list("pk", flat=True)[:limit])


amatching_ids = database_sync_to_async(matching_ids)


def _groups(rows: QuerySet[Request], query: InboxQuery, viewer: policies.Viewer | None) -> list[dict[str, Any]]:
    """The matching requests in groups (by run, or by identical tool and args), largest first; each group's
    oldest request stands for it, with its ids (at most PAGE_ROWS shown).

    Three reads whatever the number of groups: the matching rows' keys in order, then the MAX_GROUPS
    representatives' rows.
    """
    if query.group == "run":
        keys = rows.annotate(group_key=Cast("run_id", TextField())).values_list("pk", "group_key")
    else:
        keys = rows.annotate(
            group_key=Concat(F("tool"), Value(" "), Cast("args", TextField()), output_field=TextField())
        ).values_list("pk", "group_key")
    found: dict[str | None, list[str]] = {}
    for pk, key in keys.order_by("created_at", "id"):
        found.setdefault(key, []).append(pk)
    order = {key: index for index, key in enumerate(found)}  # first seen = oldest first request
    largest = sorted(found, key=lambda key: (-len(found[key]), order[key]))[:MAX_GROUPS]
    first_ids = [found[key][0] for key in largest]
    requests = Request.objects.select_related(*selectors.REQUEST_USERS).prefetch_related("approvals__user")
    by_id = {request.pk: request for request in requests.filter(pk__in=first_ids)}
    return [
        {
            "key": key if key is not None else "",
            "count": len(found[key]),
            "request": _seen_by(selectors.request_view(by_id[found[key][0]]), viewer),
            "ids": found[key][:PAGE_ROWS],
        }
        for key in largest
        if found[key][0] in by_id
    ]
