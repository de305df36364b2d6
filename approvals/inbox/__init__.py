"""The reviewer's inbox: one query (search, filters, sort, grouping, a page) and the reads that answer it.

``InboxQuery.from_params`` parses the query string of ``GET /api/v1/requests``, the ``filter``
of a bulk answer and the dashboard's URL, once; whatever it cannot take is a QueryError that
names the parameter and what it accepts. ``inbox_page`` reads one keyset page of the query
(docs/api.md); ``matching_requests`` reads the rows a bulk answer acts on.

The filters that depend on who is looking ("assigned to me", "I may answer") become SQL by
asking the policies once per distinct (tool, kind) among the candidate rows, as the
dashboard's totals do (``selectors.open_request_counts``): the verdict stays
``policies.refusal``'s and ``policies.is_assigned``'s, never a second copy of them.
"""

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.db.models import Count, F, Max, Min, Q, QuerySet, TextField
from django.db.models.functions import Cast
from django.db.models.lookups import IContains
from django.utils import timezone

from approvals import keyset, selectors, shapes
from approvals.models import Request, RequestApproval, RequestStatus
from approvals.team import policies

# status=: the open queue, everything decided, everything, or one stored status.
STATUS_CHOICES = ("open", "resolved", "all", *(s for s in RequestStatus.values if s != RequestStatus.OPEN))
SORTS = ("oldest", "newest", "deadline")
GROUPS = ("run", "alike")
FILTERS = ("q", "status", "kind", "tool", "host", "policy", "starter", "assigned", "may_answer", "expiring")
PAGING = ("sort", "group", "limit", "after")
FLAG_WORDS = {"1": True, "true": True, "0": False, "false": False, "": False}
# "Expiring soon": an open request whose deadline is at most this far away.
EXPIRING_WITHIN = timedelta(hours=1)
# The longest text each filter takes: as long as what it matches (a tool or host label, a policy's or
# user's name), and together, written as UTF-8 and percent-encoded, within the 16 KiB request line
# daphne reads.
TEXT_LIMITS = {"q": 200, "tool": 200, "host": 200, "policy": 100, "starter": 150}
MAX_KIND_VALUES, MAX_KIND_TEXT = 3, 100  # kind=: how many times, how long each (commas separate several)
# A group lists at most this many of its requests' ids (its "count" is always the whole group).
GROUP_IDS = 500
# ...and names at most this many of its hosts, and of its requesters ("host_count" counts them all).
GROUP_ORIGINS = 20


class QueryError(ValueError):
    """A parameter the inbox cannot take; ``field`` names it, the message says what it accepts."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class InboxQuery:
    """What a reviewer asked to see: the filters (all must hold), the order, the grouping and the page."""

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
    limit: int = selectors.API_PAGE_ROWS
    after: str | None = None

    @classmethod
    def from_params(
        cls, params: Mapping[str, Any], *, default_status: str = "open", prefix: str = "", only_filters: bool = False
    ) -> "InboxQuery":
        """Parse a query string (a QueryDict: repeated keys kept) or a JSON object of the same names.

        Unknown names are ignored in a query string; with ``only_filters`` (a bulk answer's
        ``filter``, where a misspelt name must not widen what is answered) anything but a
        filter or ``sort`` is refused. ``prefix`` goes before each name in a refusal ("filter.").
        Raises QueryError.
        """
        reader = _Reader(params, prefix)
        if only_filters:
            unknown = sorted(set(params) - set(FILTERS) - {"sort"})
            if unknown:
                raise QueryError(
                    prefix + unknown[0],
                    f"A bulk filter takes only {', '.join(FILTERS)} and sort; {', '.join(map(repr, unknown))} "
                    "is not one of them.",
                )
        return cls(
            q=reader.text("q").strip(),
            status=reader.choice("status", STATUS_CHOICES) or default_status,
            kinds=reader.kinds(),
            tool=reader.text("tool").strip(),
            host=reader.text("host").strip(),
            policy=reader.text("policy").strip(),
            starter=reader.text("starter").strip(),
            assigned_to_me=reader.choice("assigned", ("me",)) == "me",
            may_answer=reader.flag("may_answer"),
            expiring=reader.flag("expiring"),
            sort=reader.choice("sort", SORTS) or "oldest",
            group="" if only_filters else reader.choice("group", GROUPS),
            limit=selectors.API_PAGE_ROWS if only_filters else reader.limit(),
            after=None if only_filters else reader.one("after"),
        )


class _Reader:
    """One parameter at a time from a QueryDict or a JSON object, each refusal naming it.

    A query string's values are all text; a JSON object's must be text too, but for a flag
    (true or false) and ``kind`` (a list of texts).
    """

    def __init__(self, params: Mapping[str, Any], prefix: str) -> None:
        self.params = params
        self.prefix = prefix
        self.is_json = not hasattr(params, "getlist")

    def refuse(self, name: str, message: str) -> QueryError:
        return QueryError(self.prefix + name, message)

    def _name(self, name: str) -> str:
        return f"'{self.prefix}{name}'"

    def values(self, name: str, *, flag: bool = False, listed: bool = False) -> list[str] | None:
        """The parameter's values as text, or None when it is not given."""
        if name not in self.params:
            return None
        if not self.is_json:
            return list(self.params.getlist(name))  # type: ignore[attr-defined]  # a QueryDict
        value = self.params[name]
        if flag and isinstance(value, bool):
            return ["1" if value else "0"]
        items = value if listed and isinstance(value, list) else [value]
        if not all(isinstance(item, str) for item in items):
            what = "true, false or text" if flag else "text or a list of texts" if listed else "text"
            raise self.refuse(name, f"{self._name(name)} must be {what}; got {json.dumps(value)}.")
        return items

    def one(self, name: str, *, flag: bool = False) -> str | None:
        values = self.values(name, flag=flag)
        if values is None:
            return None
        if len(values) != 1:
            raise self.refuse(name, f"Give {self._name(name)} once; it was given {len(values)} times.")
        if "\x00" in values[0]:
            raise self.refuse(name, f"{self._name(name)} may not contain the character U+0000.")
        return values[0]

    def text(self, name: str) -> str:
        text = self.one(name) or ""
        most = TEXT_LIMITS[name]
        if len(text) > most:
            raise self.refuse(name, f"{self._name(name)} is {len(text)} characters long; give at most {most}.")
        return text

    def kinds(self) -> tuple[str, ...]:
        """``kind``, repeated or comma-separated (or, in JSON, a list): each kind once, in order."""
        values = self.values("kind", listed=True) or []
        if len(values) > MAX_KIND_VALUES:
            raise self.refuse(
                "kind", f"Give {self._name('kind')} at most {MAX_KIND_VALUES} times; separate kinds by commas."
            )
        for value in values:
            if len(value) > MAX_KIND_TEXT or "\x00" in value:
                raise self.refuse(
                    "kind", f"Each {self._name('kind')} is at most {MAX_KIND_TEXT} characters, without U+0000."
                )
        return tuple(dict.fromkeys(kind.strip() for value in values for kind in value.split(",") if kind.strip()))

    def choice(self, name: str, choices: Iterable[str]) -> str:
        """One of ``choices``, or "" when left out or empty (as a form's empty field sends it)."""
        value = self.one(name)
        if not value:
            return ""
        allowed = tuple(choices)
        if value not in allowed:
            raise self.refuse(name, f"Unknown {self._name(name)} {value!r}; use one of {', '.join(allowed)}.")
        return value

    def flag(self, name: str) -> bool:
        """On (1, true) or off (0, false, empty or left out)."""
        value = self.one(name, flag=True)
        if not value:
            return False
        if value not in FLAG_WORDS:
            raise self.refuse(name, f"{self._name(name)} is 1 (on) or 0 (off); got {value!r}.")
        return FLAG_WORDS[value]

    def limit(self) -> int:
        value = self.one("limit")
        if value is None:
            return selectors.API_PAGE_ROWS
        if not (value.isascii() and value.isdigit() and 1 <= int(value) <= selectors.API_MAX_PAGE_ROWS):
            raise self.refuse(
                "limit", f"'limit' must be a whole number from 1 to {selectors.API_MAX_PAGE_ROWS}; got {value!r}."
            )
        return int(value)


# -- which requests -------------------------------------------------------------------------------------


def _statuses(status: str) -> Q:
    if status == "open":
        return Q(status=RequestStatus.OPEN)
    if status == "resolved":
        return ~Q(status=RequestStatus.OPEN)
    if status == "all":
        return Q()
    return Q(status=status)


def _username(path: str) -> str:
    return f"{path}__{get_user_model().USERNAME_FIELD}"


def _search(text: str) -> Q:
    """Case-insensitive text in the prompt, tool, args (as JSON text), host or requester's username.

    The requesters whose username holds the text are read first, so the request's own condition is an OR
    of its columns and ids alone: on PostgreSQL each branch is an index (trigrams, migration 0020, and
    the requester's foreign key) and the OR one bitmap, where a join to the users put it out of reach."""
    args = Cast("args", TextField())
    users = get_user_model().objects.filter(**{f"{get_user_model().USERNAME_FIELD}__icontains": text})
    found = (
        Q(prompt__icontains=text)
        | Q(tool__icontains=text)
        | Q(host__icontains=text)
        | Q(opened_by_id__in=list(users.values_list("pk", flat=True)))
        | Q(IContains(args, text))
    )
    # JSON text may hold the text escaped ("caf\u00e9", "\"quoted\""), as SQLite stores it.
    escaped = json.dumps(text)[1:-1]
    return found | Q(IContains(args, escaped)) if escaped != text else found


def _pairs(rows: QuerySet[Request]) -> list[tuple[str, str]]:
    """The distinct (tool, kind) among ``rows``: what decides each request's policy."""
    return list(rows.order_by().values_list("tool", "kind").distinct())


def _any_pair(pairs: Iterable[tuple[str, str]]) -> Q:
    """Requests of one of ``pairs`` (tool, kind); none when there are none."""
    tools_by_kind: dict[str, list[str]] = {}
    for tool, kind in pairs:
        tools_by_kind.setdefault(kind, []).append(tool)
    condition = Q(pk__in=[])
    for kind, tools in tools_by_kind.items():
        condition |= Q(kind=kind, tool__in=tools)
    return condition


def _started_by(username: str) -> Q:
    """Requests ``username`` set going (policies.starter_of): its run's starter, else whoever opened it."""
    return Q(**{_username("run__started_by"): username}) | Q(
        run__started_by__isnull=True, **{_username("opened_by"): username}
    )


def _may_answer(rows: QuerySet[Request], viewer: policies.Viewer) -> Q:
    """Open requests ``viewer`` may answer now: the rows where policies.refusal has no objection."""
    allowed, four_eyes = [], []
    for tool, kind in _pairs(rows.filter(status=RequestStatus.OPEN)):
        rule = policies.rule_for(tool, kind)
        if policies.may_be_among(rule.users, rule.groups, viewer):
            allowed.append((tool, kind))
            if not rule.starter_may_answer:
                four_eyes.append((tool, kind))
    open_rows = Request.objects.filter(status=RequestStatus.OPEN)
    started = open_rows.filter(_started_by(viewer.username), _any_pair(four_eyes)).values("pk")
    approved = RequestApproval.objects.filter(**{_username("user"): viewer.username}).values("request_id")
    return Q(status=RequestStatus.OPEN) & _any_pair(allowed) & ~Q(pk__in=started) & ~Q(pk__in=approved)


def _assigned_to(rows: QuerySet[Request], viewer: policies.Viewer) -> Q:
    """Requests assigned to ``viewer`` (policies.is_assigned): handed to them or their group, else named
    by the request's own ``data.assignees``, else by its policy's assignees."""
    names = [viewer.username, *(policies.group_name(group) for group in viewer.groups)]
    not_handed = rows.filter(handed_to="")
    own_names, own_fallback = [], []
    for pk, named in not_handed.filter(data__has_key="assignees").values_list("pk", "data__assignees"):
        if isinstance(named, list) and named and all(isinstance(name, str) for name in named):
            if any(policies.names_viewer(name, viewer) for name in named[:50]):
                own_names.append(pk)
        else:
            own_fallback.append(pk)  # not a list of names: the policy's assignees apply
    by_policy = [
        (tool, kind)
        for tool, kind in _pairs(not_handed)
        if any(policies.names_viewer(name, viewer) for name in policies.rule_for(tool, kind).assignees)
    ]
    policy_named = Q(handed_to="") & _any_pair(by_policy) & (~Q(data__has_key="assignees") | Q(pk__in=own_fallback))
    return Q(handed_to__in=names) | Q(pk__in=own_names) | policy_named


def _known_policies() -> list[str]:
    names = [rule.name for rule in policies.database_rules()] + [rule.name for rule in policies.settings_rules()]
    return list(dict.fromkeys([*names, policies.DEFAULT_RULE.name]))


def _under_policy(rows: QuerySet[Request], name: str) -> Q:
    known = _known_policies()
    if name not in known:
        raise QueryError("policy", f"There is no policy named {name!r}; use one of {', '.join(map(repr, known))}.")
    return _any_pair(pair for pair in _pairs(rows) if policies.rule_for(*pair).name == name)


def matching(query: InboxQuery, viewer: policies.Viewer | None) -> QuerySet[Request]:
    """Every request ``query``'s filters select for ``viewer``, unordered (raises QueryError)."""
    rows = Request.objects.filter(_statuses(query.status))
    if query.kinds:
        rows = rows.filter(kind__in=query.kinds)
    if query.tool:
        rows = rows.filter(tool=query.tool)
    if query.host:
        rows = rows.filter(host=query.host)
    if query.starter:
        rows = rows.filter(_started_by(query.starter))
    if query.expiring:
        rows = rows.filter(status=RequestStatus.OPEN, expires_at__lte=timezone.now() + EXPIRING_WITHIN)
    if query.q:
        rows = rows.filter(_search(query.q))
    if query.policy:
        rows = rows.filter(_under_policy(rows, query.policy))
    if (query.assigned_to_me or query.may_answer) and viewer is None:
        raise QueryError("assigned" if query.assigned_to_me else "may_answer", "Log in to filter by who you are.")
    if query.may_answer and viewer is not None:
        rows = rows.filter(_may_answer(rows, viewer))
    if query.assigned_to_me and viewer is not None:
        rows = rows.filter(_assigned_to(rows, viewer))
    return rows


# -- in which order ---------------------------------------------------------------------------------


def _in_order(rows: QuerySet[Request], sort: str) -> QuerySet[Request]:
    if sort == "newest":
        return rows.order_by("-created_at", "-id")
    if sort == "deadline":  # the nearest deadline first; requests without one last, oldest first
        return rows.order_by(F("expires_at").asc(nulls_last=True), "created_at", "id")
    return rows.order_by(*selectors.REQUEST_ORDER)


def _cursor_of(request: Request, sort: str) -> str:
    if sort == "newest":
        return keyset.encode_cursor(("newest", request.created_at, request.id))
    if sort == "deadline":
        deadline = request.expires_at.isoformat() if request.expires_at is not None else ""
        return keyset.encode_cursor(("deadline", deadline, request.created_at, request.id))
    return selectors.request_cursor(request)  # oldest first: the same cursor as the dashboard's pages


def _after_cursor(rows: QuerySet[Request], sort: str, cursor: str) -> QuerySet[Request]:
    """The rows after ``cursor`` in ``sort`` order; keyset.CursorError for a cursor of another order."""
    if sort == "oldest":
        return rows.filter(
            keyset.strictly_after(selectors.REQUEST_ORDER, keyset.decode_cursor(cursor, (datetime, str)))
        )
    if sort == "newest":
        tag, created_at, pk = keyset.decode_cursor(cursor, (str, datetime, str))
        if tag != "newest":
            raise keyset.refused_cursor()
        return rows.filter(keyset.strictly_before(("created_at", "id"), (created_at, pk)))
    tag, deadline, created_at, pk = keyset.decode_cursor(cursor, (str, str, datetime, str))
    if tag != "deadline":
        raise keyset.refused_cursor()
    if not isinstance(deadline, str) or deadline == "":  # among the requests without a deadline, which come last
        return rows.filter(Q(expires_at__isnull=True), keyset.strictly_after(("created_at", "id"), (created_at, pk)))
    try:
        expires_at = datetime.fromisoformat(deadline)
    except ValueError:
        raise keyset.refused_cursor() from None
    if expires_at.tzinfo is None:
        raise keyset.refused_cursor()
    later = keyset.strictly_after(("expires_at", "created_at", "id"), (expires_at, created_at, pk))
    return rows.filter(Q(expires_at__isnull=True) | (Q(expires_at__isnull=False) & later))


# -- one page ---------------------------------------------------------------------------------------


def _views(rows: Iterable[Request]) -> list[dict[str, Any]]:
    return [shapes.request_view(r) for r in rows]


def with_users(rows: QuerySet[Request]) -> QuerySet[Request]:
    """``rows`` read with the users and approvals a request view names, in the same queries."""
    return rows.select_related(*selectors.REQUEST_USERS).prefetch_related("approvals__user")


def inbox_page(query: InboxQuery, viewer: policies.Viewer | None) -> dict[str, Any]:
    """One page of ``query`` as ``GET /api/v1/requests`` answers it: ``requests`` (views, not yet seen
    through the viewer's eyes), ``count`` (all that match), ``next`` (the cursor of the page after,
    or None) and, with a ``group``, ``groups``: one per run or per identical tool and args, each with
    its ``count``, the ``ids`` of its requests (at most GROUP_IDS) and its first ``request``, whose
    views ``requests`` lists too. Raises QueryError or keyset.CursorError."""
    rows = matching(query, viewer)
    if query.group:
        return _group_page(rows, query)
    count = rows.count()
    ordered = _in_order(rows, query.sort)
    if query.after is not None:
        ordered = _after_cursor(ordered, query.sort, query.after)
    page, more = keyset.take_page(with_users(ordered), query.limit)
    return {
        "requests": _views(page),
        "count": count,
        "next": _cursor_of(page[-1], query.sort) if page and more else None,
    }


ainbox_page = database_sync_to_async(inbox_page)


def matching_requests(query: InboxQuery, viewer: policies.Viewer | None, most: int) -> list[Request]:
    """The requests ``query`` selects, in its order, at most ``most`` (with their users, for the door's
    policy facts); raises QueryError."""
    return list(with_users(_in_order(matching(query, viewer), query.sort))[:most])


# -- groups -----------------------------------------------------------------------------------------
#
# A group is ordered by its first request in the list's order; ties are broken by its lowest (or, newest
# first, highest) request id, which no other group shares. The database orders and pages the groups
# (one aggregate read, keyset by HAVING), so a page costs the same whatever the number of groups.

GROUP_ORDER: dict[str, tuple[str, ...]] = {
    "oldest": ("first", "low"),
    "newest": ("last", "high"),
    "deadline": ("deadline", "first", "low"),
}


def _grouped(rows: QuerySet[Request], group: str) -> tuple[QuerySet[Request], tuple[str, ...]]:
    """``rows`` with what makes two requests one group, and the names of those fields."""
    if group == "run":
        return rows, ("run_id",)
    return rows.annotate(args_text=Cast("args", TextField())), ("tool", "args_text")


def _group_totals(rows: QuerySet[Request], query: InboxQuery) -> QuerySet[Request, dict[str, Any]]:
    """One row per group (its identity, size, first and last moments, deadline, lowest and highest id),
    in the query's order, after the cursor ``query.after`` (raises keyset.CursorError)."""
    annotated, fields = _grouped(rows, query.group)
    totals = (
        annotated.order_by()
        .values(*fields)
        .annotate(
            n=Count("pk"),
            first=Min("created_at"),
            last=Max("created_at"),
            deadline=Min("expires_at"),
            low=Min("id"),
            high=Max("id"),
        )
    )
    if query.after is not None:
        totals = totals.filter(_groups_after(query.sort, query.after))
    if query.sort == "newest":
        return totals.order_by("-last", "-high")
    if query.sort == "deadline":
        return totals.order_by(F("deadline").asc(nulls_last=True), "first", "low")
    return totals.order_by("first", "low")


def _groups_after(sort: str, cursor: str) -> Q:
    """The groups after a group cursor of ``sort`` (a filter on the aggregates: SQL's HAVING)."""
    if sort != "deadline":
        tag, moment, pk = keyset.decode_cursor(cursor, (str, datetime, str))
        if tag != f"group:{sort}":
            raise keyset.refused_cursor()
        if sort == "newest":
            return keyset.strictly_before(GROUP_ORDER[sort], (moment, pk))
        return keyset.strictly_after(GROUP_ORDER[sort], (moment, pk))
    tag, deadline, first, pk = keyset.decode_cursor(cursor, (str, str, datetime, str))
    if tag != "group:deadline":
        raise keyset.refused_cursor()
    if not isinstance(deadline, str) or deadline == "":  # among the groups without a deadline, which come last
        return Q(deadline__isnull=True) & keyset.strictly_after(("first", "low"), (first, pk))
    try:
        due = datetime.fromisoformat(deadline)
    except ValueError:
        raise keyset.refused_cursor() from None
    if due.tzinfo is None:
        raise keyset.refused_cursor()
    return Q(deadline__isnull=True) | keyset.strictly_after(GROUP_ORDER[sort], (due, first, pk))


def _group_cursor(total: dict[str, Any], sort: str) -> str:
    if sort == "deadline":
        deadline = total["deadline"].isoformat() if total["deadline"] is not None else ""
        return keyset.encode_cursor(("group:deadline", deadline, total["first"], total["low"]))
    return keyset.encode_cursor((f"group:{sort}", *(total[name] for name in GROUP_ORDER[sort])))


def _group_key(group: str, identity: tuple[Any, ...]) -> str:
    """``run:12``, ``run:none`` (requests without a run: a host's) or ``alike:<digest of tool and args>``."""
    if group == "run":
        return f"run:{identity[0]}" if identity[0] is not None else "run:none"
    return "alike:" + hashlib.sha256("\x00".join(identity).encode()).hexdigest()[:20]


def _members(
    rows: QuerySet[Request], query: InboxQuery, identities: list[tuple[Any, ...]]
) -> tuple[dict[tuple[Any, ...], list[str]], dict[tuple[Any, ...], tuple[set[str], set[str]]]]:
    """{identity: the ids of its requests in the query's order, at most GROUP_IDS} and {identity: (its
    hosts, the requesters of its requests without a host)}, in one read."""
    annotated, fields = _grouped(rows, query.group)
    members = Q(pk__in=[])
    for identity in identities:
        if query.group == "run" and identity[0] is None:
            members |= Q(run__isnull=True)
        else:
            members |= Q(**dict(zip(fields, identity)))
    ids: dict[tuple[Any, ...], list[str]] = {identity: [] for identity in identities}
    origins: dict[tuple[Any, ...], tuple[set[str], set[str]]] = {identity: (set(), set()) for identity in identities}
    read = _in_order(annotated.filter(members), query.sort).values_list(*fields, "pk", "host", "opened_by__username")
    for *identity, pk, host, requester in read:
        listed = ids[tuple(identity)]
        if len(listed) < GROUP_IDS:
            listed.append(pk)
        hosts, requesters = origins[tuple(identity)]
        if host:
            hosts.add(host)
        elif requester:
            requesters.add(requester)
    return ids, origins


def _origins(hosts: set[str], requesters: set[str]) -> dict[str, Any]:
    """Where a group's requests came from, as its row says it ("from 4 hosts", each named in its title)."""
    return {
        "hosts": sorted(hosts)[:GROUP_ORIGINS],
        "host_count": len(hosts),
        "requesters": sorted(requesters)[:GROUP_ORIGINS],
        "requester_count": len(requesters),
    }


def _origins_of_one(view: dict[str, Any]) -> tuple[set[str], set[str]]:
    if view["host"]:
        return {view["host"]}, set()
    return set(), {view["requester"]} if view["requester"] else set()


def _group_page(rows: QuerySet[Request], query: InboxQuery) -> dict[str, Any]:
    fields = _grouped(rows, query.group)[1]
    totals = list(_group_totals(rows, query)[: query.limit + 1])
    page, more = totals[: query.limit], len(totals) > query.limit
    identities = [tuple(total[name] for name in fields) for total in page]
    # A group of one is its lowest id; only larger groups need their ids (and where they came from) read.
    ids, origins = _members(rows, query, [i for i, total in zip(identities, page) if total["n"] > 1])
    for identity, total in zip(identities, page):
        ids.setdefault(identity, [total["low"]])
    firsts = [ids[identity][0] for identity in identities if ids[identity]]
    views = {view["id"]: view for view in _views(with_users(Request.objects.filter(pk__in=firsts)))}
    shown = [
        {
            "key": _group_key(query.group, identity),
            "count": total["n"],
            "request": views[ids[identity][0]],
            "ids": ids[identity],
            **_origins(*origins.get(identity, _origins_of_one(views[ids[identity][0]]))),
        }
        for identity, total in zip(identities, page)
        if ids[identity] and ids[identity][0] in views
    ]
    return {
        "requests": [group["request"] for group in shown],
        "count": rows.count(),
        "next": _group_cursor(page[-1], query.sort) if page and more else None,
        "groups": shown,
    }
