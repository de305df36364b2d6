"""Who may answer which request: policies matched by tool name and kind, four-eyes and quorum.

A request's policy is the first enabled ``Policy`` row (lowest priority number)
whose tool pattern and kind match; when no row matches, the first matching entry
of ``TOOLNEXUS["POLICIES"]`` in settings; with neither, the built-in default:
anyone logged in may answer, one approval resolves it, and whoever started the run
may answer it too (approving your own agent's action is what the console is for).
Four-eyes (``starter_may_answer: false``), named answerers and a quorum are a
team's choice, made per policy. Whoever started a request may always decline or
cancel it, whatever the policy.

The verdict is computed in one function, ``refusal``, from plain facts about the
request (``facts``) and about the person (``Viewer``). The one door
(``decisions.resolve_request``) asks it with fresh database reads before any
answer is applied; dashboards ask it with the facts their request view carries, so
the card and the server never disagree about who may answer.
"""

import fnmatch
import threading
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any, TypedDict

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.db.models import prefetch_related_objects

from approvals.hotpath import rows
from approvals.models import ON_TIMEOUT_ORDER, OnTimeout, Policy, Request, RequestStatus, Run
from approvals.models.team import ESCALATION_STEP_MINUTES, MAX_ESCALATIONS, defaults_refusal, reject_options_refusal

# Dashboards may read policies this stale; the door always reads them fresh.
CACHE_SECONDS = 2.0
GROUP_PREFIX = "group:"  # how a group is named where a user's name could stand ("group:ops")


@dataclass(frozen=True)
class Rule:
    """One policy, whichever source it came from, in the shape the verdict needs."""

    name: str
    source: str  # "database" | "settings" | "default"
    tool_pattern: str = ""
    kind: str = ""
    users: frozenset[str] = frozenset()  # usernames
    groups: frozenset[str] = frozenset()  # group names
    quorum: int = 1
    starter_may_answer: bool = True  # False: four-eyes, someone else must approve
    confirm_approval: bool = False  # True: every approval is asked once more, the A key's too
    assignees: tuple[str, ...] = ()  # "alice" or "group:ops"
    webhook_url: str = ""
    # What happens when a request's deadline passes unanswered (models.OnTimeout; review/decisions.expire_request).
    on_timeout: str = OnTimeout.DECLINE
    fallback_users: frozenset[str] = frozenset()  # escalate: who may also answer once escalated
    fallback_groups: frozenset[str] = frozenset()
    escalation_step_minutes: int = ESCALATION_STEP_MINUTES
    max_escalations: int = MAX_ESCALATIONS
    remind_minutes_before: int | None = None  # re-notify the answerers this long before a deadline (None: never)
    # Named reasons a reviewer may pick when declining (models.team.reject_options_refusal checked them).
    reject_options: tuple[dict[str, str], ...] = field(default=(), hash=False)

    def matches(self, tool: str | None, kind: str) -> bool:
        if self.tool_pattern and not fnmatch.fnmatchcase(tool or "", self.tool_pattern):
            return False
        return not self.kind or self.kind == kind


DEFAULT_RULE = Rule(name="default", source="default")


@dataclass(frozen=True)
class Viewer:
    """Who is asking: a username, the names of their groups, and whether they are staff."""

    username: str
    groups: frozenset[str] = field(default_factory=frozenset)
    staff: bool = False


@dataclass(frozen=True)
class Refusal:
    rule: str  # not_allowed | four_eyes | already_approved
    message: str


class PolicyFacts(TypedDict):
    """What anyone needs to know to decide who may answer a request (``facts``): the view's ``policy``."""

    name: str
    source: str
    quorum: int
    approvals: list[str]  # usernames, in the order they approved
    users: list[str]
    groups: list[str]
    starter: str | None
    started: str | None  # "run" | "request": what the starter set going
    starter_may_answer: bool
    confirm_approval: bool  # the reviewer is asked once more before an approval is sent
    assignees: list[str]
    handed_to: str | None  # a username or "group:<name>" a reviewer handed it to (review/claims.py)
    reject_options: list[dict[str, str]]  # what a reviewer may pick when declining (``reject_options_of``)


class RunFacts(TypedDict):
    """What anyone needs to know to decide who may cancel a run (``run_facts``): the view's ``cancel``."""

    run: int
    starter: str | None
    requests: list[PolicyFacts]  # of each request the run waits on


# -- where rules come from ----------------------------------------------------------------


def may_escalate(on_timeout: str) -> bool:
    """Whether a request under a policy choosing ``on_timeout`` may escalate: the policy escalates, or it approves
    with defaults and the request asks for the stricter ``escalate`` (models.team.stricter)."""
    return on_timeout in (OnTimeout.ESCALATE, OnTimeout.APPLY_DEFAULTS)


def _rule_from_row(row: Policy) -> Rule:
    assignees = tuple(u.get_username() for u in row.assigned_users.all()) + tuple(
        f"group:{g.name}" for g in row.assigned_groups.all()
    )
    return Rule(
        name=row.name,
        source="database",
        tool_pattern=row.tool_pattern,
        kind=row.kind,
        users=frozenset(u.get_username() for u in row.allowed_users.all()),
        groups=frozenset(g.name for g in row.allowed_groups.all()),
        quorum=max(1, row.quorum),
        starter_may_answer=row.starter_may_answer,
        confirm_approval=row.confirm_approval,
        assignees=assignees,
        webhook_url=row.webhook_url,
        on_timeout=row.on_timeout,
        # Read only for a policy that may escalate (database_rules prefetches them for those alone).
        fallback_users=frozenset(u.get_username() for u in row.fallback_users.all())
        if may_escalate(row.on_timeout)
        else frozenset(),
        fallback_groups=frozenset(g.name for g in row.fallback_groups.all())
        if may_escalate(row.on_timeout)
        else frozenset(),
        escalation_step_minutes=row.escalation_step_minutes,
        max_escalations=row.max_escalations,
        remind_minutes_before=row.remind_minutes_before or None,
        reject_options=_options(row.reject_options),
    )


def _options(value: object) -> tuple[dict[str, str], ...]:
    """Reject options as stored, each with its three keys (an option without a text reads as its label)."""
    if not isinstance(value, list) or reject_options_refusal(value):
        return ()
    return tuple(
        {"key": o["key"], "label": o["label"], "text": o.get("text") or ""} for o in value if isinstance(o, dict)
    )


SETTINGS_KEYS = {
    "name",
    "tool",
    "kind",
    "users",
    "groups",
    "quorum",
    "starter_may_answer",
    "confirm_approval",
    "assignees",
    "webhook_url",
    "on_timeout",
    "fallback_users",
    "fallback_groups",
    "escalation_step_minutes",
    "max_escalations",
    "remind_minutes_before",
    "reject_options",
}


def _names(entry: dict[str, Any], key: str, where: str) -> list[str]:
    value = entry.get(key) or []
    if isinstance(value, str) or not all(isinstance(item, str) for item in value):
        raise ImproperlyConfigured(f'{where}[{key!r}] must be a list of names, e.g. ["alice"].')
    return value


def settings_rules() -> list[Rule]:
    """``TOOLNEXUS["POLICIES"]``, checked: a list of dicts with the keys in SETTINGS_KEYS."""
    entries = settings.TOOLNEXUS.get("POLICIES") or []
    rules: list[Rule] = []
    for index, entry in enumerate(entries):
        where = f'TOOLNEXUS["POLICIES"][{index}]'
        if not isinstance(entry, dict):
            raise ImproperlyConfigured(f"{where} must be a dict such as {{'tool': 'refund*', 'quorum': 2}}.")
        unknown = set(entry) - SETTINGS_KEYS
        if unknown:
            raise ImproperlyConfigured(f"{where} has unknown keys {sorted(unknown)}; use {sorted(SETTINGS_KEYS)}.")
        quorum = entry.get("quorum", 1)
        if isinstance(quorum, bool) or not isinstance(quorum, int) or quorum < 1:
            raise ImproperlyConfigured(f"{where}['quorum'] must be a whole number of at least 1.")
        starter_may_answer = entry.get("starter_may_answer", True)
        if not isinstance(starter_may_answer, bool):
            raise ImproperlyConfigured(f"{where}['starter_may_answer'] must be true or false (false: four-eyes).")
        confirm_approval = entry.get("confirm_approval", False)
        if not isinstance(confirm_approval, bool):
            raise ImproperlyConfigured(f"{where}['confirm_approval'] must be true or false (true: ask once more).")
        on_timeout = entry.get("on_timeout", OnTimeout.DECLINE)
        if on_timeout not in ON_TIMEOUT_ORDER:
            raise ImproperlyConfigured(f"{where}['on_timeout'] must be one of {', '.join(ON_TIMEOUT_ORDER)}.")
        refused = defaults_refusal(on_timeout, quorum, starter_may_answer)
        if refused:
            raise ImproperlyConfigured(f"{where}: {refused}")
        counts = {"escalation_step_minutes": ESCALATION_STEP_MINUTES, "max_escalations": MAX_ESCALATIONS}
        for key, default in counts.items():
            value, least = entry.get(key, default), 1 if key == "escalation_step_minutes" else 0
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ImproperlyConfigured(f"{where}[{key!r}] must be a whole number of at least {least}.")
            counts[key] = value
        remind = entry.get("remind_minutes_before")
        if remind is not None and (isinstance(remind, bool) or not isinstance(remind, int) or remind < 1):
            raise ImproperlyConfigured(
                f"{where}['remind_minutes_before'] must be a whole number of minutes, at least 1."
            )
        options_refused = reject_options_refusal(entry.get("reject_options", []))
        if options_refused:
            raise ImproperlyConfigured(f"{where}: {options_refused}")
        rules.append(
            Rule(
                name=entry.get("name") or f"settings #{index + 1}",
                source="settings",
                tool_pattern=entry.get("tool") or "",
                kind=entry.get("kind") or "",
                users=frozenset(_names(entry, "users", where)),
                groups=frozenset(_names(entry, "groups", where)),
                quorum=quorum,
                starter_may_answer=starter_may_answer,
                confirm_approval=confirm_approval,
                assignees=tuple(_names(entry, "assignees", where)),
                webhook_url=entry.get("webhook_url") or "",
                on_timeout=on_timeout,
                fallback_users=frozenset(_names(entry, "fallback_users", where)),
                fallback_groups=frozenset(_names(entry, "fallback_groups", where)),
                **counts,
                remind_minutes_before=remind,
                reject_options=_options(entry.get("reject_options", [])),
            )
        )
    return rules


_cache_lock = threading.Lock()
_cache: dict[str, Any] = {"rules": None, "at": 0.0}


def forget_cached_policies(**_ignored: object) -> None:
    """Signal receiver: a Policy (or its users and groups) changed in this process."""
    with _cache_lock:
        _cache["rules"] = None


# Read at every answer (``rule_for(fresh=True)``): compiled once (hotpath/rows.py).
_enabled_policies = rows.CompiledRead(lambda: Policy.objects.filter(enabled=True).order_by("priority", "id"))


def database_rules(fresh: bool = False) -> list[Rule]:
    with _cache_lock:
        if not fresh and _cache["rules"] is not None and time.monotonic() - _cache["at"] < CACHE_SECONDS:
            return _cache["rules"]
    enabled = _enabled_policies()
    if enabled:
        prefetch_related_objects(enabled, "allowed_users", "allowed_groups", "assigned_users", "assigned_groups")
        # Fallback answerers matter only to a policy that may escalate: the others' answers read nothing more.
        escalating = [row for row in enabled if may_escalate(row.on_timeout)]
        if escalating:
            prefetch_related_objects(escalating, "fallback_users", "fallback_groups")
    rules = [_rule_from_row(row) for row in enabled]
    with _cache_lock:
        _cache["rules"], _cache["at"] = rules, time.monotonic()
    return rules


def rule_for(tool: str | None, kind: str, fresh: bool = False) -> Rule:
    """The policy that governs requests of this tool and kind (fresh=True: no cache, for the door)."""
    for rule in database_rules(fresh=fresh):
        if rule.matches(tool, kind):
            return rule
    for rule in settings_rules():
        if rule.matches(tool, kind):
            return rule
    return DEFAULT_RULE


# -- facts about a request, the same for every viewer ------------------------------------------


def starter_of(request: Request) -> tuple[str, str] | tuple[None, None]:
    """(username, "run" | "request") of whoever set this request going, or (None, None)."""
    run = request.run if request.run_id else None
    if run is not None and run.started_by is not None:
        return run.started_by.get_username(), "run"
    if request.opened_by is not None:
        return request.opened_by.get_username(), "request"
    return None, None


def assignees_of(request: Request, rule: Rule) -> list[str]:
    """The request's own ``data.assignees`` when it names any, else the policy's."""
    own = request.data.get("assignees") if isinstance(request.data, dict) else None
    if isinstance(own, list) and own and all(isinstance(name, str) for name in own):
        return own[:50]
    return list(rule.assignees)


def reject_options_of(request: Request, rule: Rule) -> list[dict[str, str]]:
    """What a reviewer may pick when declining ``request``: its policy's options first, then its own
    ``data.reject_options`` (checked when it was opened) whose keys the policy does not use. The admin's words
    win: a request's option with a key the policy uses is dropped, not refused (a tool must not break when an
    admin adds an option)."""
    own = request.data.get("reject_options") if isinstance(request.data, dict) else None
    used = {option["key"] for option in rule.reject_options}
    return list(rule.reject_options) + [
        option for option in (_options(own) if own else []) if option["key"] not in used
    ]


def approvals_of(request: Request) -> list[str]:
    """Who approved so far, in order (uses a prefetch of ``approvals__user`` when the caller made one)."""
    if "approvals" in getattr(request, "_prefetched_objects_cache", {}):
        return [a.user.get_username() for a in sorted(request.approvals.all(), key=lambda a: a.pk)]
    # Only the names: read on every answer and every frame, whole user rows cost more to build than to fetch.
    username = f"user__{get_user_model().USERNAME_FIELD}"
    return list(request.approvals.order_by("id").values_list(username, flat=True))


def answerers(rule: Rule, *, escalated: bool) -> tuple[frozenset[str], frozenset[str]]:
    """The users and groups who may answer under ``rule``; once a request is escalated (``Request.escalations``),
    its policy's fallback answerers too. A policy naming nobody lets anyone logged in answer: escalating adds
    no one to that, and never narrows it."""
    if not escalated or not (rule.users or rule.groups):
        return rule.users, rule.groups
    return rule.users | rule.fallback_users, rule.groups | rule.fallback_groups


def facts(request: Request, rule: Rule | None = None, approvals: Iterable[str] | None = None) -> PolicyFacts:
    """What anyone needs to know to decide who may answer ``request`` (JSON, user-independent).

    ``approvals``: the approvers' usernames when the caller knows them (a request just opened has none).
    """
    rule = rule or rule_for(request.tool, request.kind)
    starter, started = starter_of(request)
    users, groups = answerers(rule, escalated=request.escalations > 0)
    return {
        "name": rule.name,
        "source": rule.source,
        "quorum": rule.quorum,
        "approvals": approvals_of(request) if approvals is None else list(approvals),
        "users": sorted(users),
        "groups": sorted(groups),
        "starter": starter,
        "started": started,
        "starter_may_answer": rule.starter_may_answer,
        "confirm_approval": rule.confirm_approval,
        "assignees": assignees_of(request, rule),
        # A reviewer handed it to this user or group (review/claims.py): they are its assignees now.
        "handed_to": request.handed_to or None,
        "reject_options": reject_options_of(request, rule),
    }


# -- the verdict ----------------------------------------------------------------------------


def _either(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def who_may_answer(users: Collection[str], groups: Collection[str]) -> str:
    """ "bob or members of group ops"; empty when the policy names nobody (anyone logged in may)."""
    parts = []
    if users:
        parts.append(_either(sorted(users)))
    if groups:
        word = "group" if len(groups) == 1 else "groups"
        parts.append(f"members of {word} {_either(sorted(groups))}")
    return " or ".join(parts)


def may_be_among(users: Collection[str], groups: Collection[str], viewer: Viewer) -> bool:
    return not (users or groups) or viewer.username in users or bool(viewer.groups & set(groups))


def _where_to_change(facts: PolicyFacts) -> str:
    if facts["source"] == "settings":
        return 'in TOOLNEXUS["POLICIES"] or CONSOLE_POLICIES'
    return "in the admin, Approvals > Policies"


def _make_answerer(facts: PolicyFacts, username: str) -> str:
    """The step that lets ``username`` answer under this policy."""
    if facts["groups"]:
        return f"manage.py add_reviewer {username} --group {sorted(facts['groups'])[0]}"
    if facts["users"]:
        return f"add {username} to the policy's users ({_where_to_change(facts)})"
    return f"manage.py add_reviewer {username}"


def _not_allowed(facts: PolicyFacts, viewer: Viewer, is_starter: bool) -> str:
    still = " You may still decline or cancel it." if is_starter else ""
    return (
        f'Only {who_may_answer(facts["users"], facts["groups"])} may answer this (policy "{facts["name"]}").{still} '
        f"To answer it yourself, ask an admin: {_make_answerer(facts, viewer.username)}."
    )


def _four_eyes(facts: PolicyFacts, viewer: Viewer) -> str:
    what = "started this run" if facts["started"] == "run" else "opened this request"
    others = set(facts["users"]) - {viewer.username}
    if others or facts["groups"]:
        who = who_may_answer(others, facts["groups"]) + (", not you," if facts["groups"] else "")
    elif facts["users"]:
        who = "no one else (the policy names only you)"
    else:
        who = "anyone but you"
    return (
        f'You {what}, and policy "{facts["name"]}" is four-eyes: {who} may approve it. '
        f"You may still decline or cancel it. To unblock it, ask another reviewer to approve "
        f"(a new one: {_make_answerer(facts, 'NAME')}), or set starter_may_answer on the policy "
        f"({_where_to_change(facts)})."
    )


def refusal(facts: PolicyFacts, viewer: Viewer, *, ok: bool = True) -> Refusal | None:
    """Why ``viewer`` may not give this answer (a Refusal), or None when they may.

    Declining or withdrawing what you started yourself is always allowed: four-eyes
    and named answerers keep people from approving their own work, never from
    stopping it. Every refusal names who may answer and how to unblock the request.
    """
    is_starter = facts["starter"] is not None and viewer.username == facts["starter"]
    if is_starter and not ok:
        return None
    if not may_be_among(facts["users"], facts["groups"], viewer):
        return Refusal("not_allowed", _not_allowed(facts, viewer, is_starter))
    if is_starter and not facts["starter_may_answer"]:
        return Refusal("four_eyes", _four_eyes(facts, viewer))
    if ok and viewer.username in facts["approvals"]:
        remaining = max(facts["quorum"] - len(facts["approvals"]), 1)
        more = "1 more approval" if remaining == 1 else f"{remaining} more approvals"
        return Refusal("already_approved", f"You already approved this; it needs {more} from someone else.")
    return None


def extend_refusal(facts: PolicyFacts, viewer: Viewer) -> Refusal | None:
    """Why ``viewer`` may not move this request's deadline (review/deadlines.py), or None when they may: whoever
    may answer it may, a reviewer who already approved it under a quorum included (they are still among its
    answerers; only a second approval of theirs would be refused)."""
    return refusal({**facts, "approvals": []}, viewer)


def names_viewer(name: str, viewer: Viewer) -> bool:
    """True when ``name`` ("alice" or "group:ops") is the viewer or one of their groups."""
    if name.startswith(GROUP_PREFIX):
        return name.removeprefix(GROUP_PREFIX) in viewer.groups
    return name == viewer.username


def group_name(group: str) -> str:
    """How ``group`` is named where a user's name could stand: ``group:<name>``."""
    return GROUP_PREFIX + group


def is_assigned(facts: PolicyFacts, viewer: Viewer) -> bool:
    """Assigned by the request's policy, or handed to the viewer (or their group) by a reviewer."""
    handed_to = facts.get("handed_to")
    if handed_to:
        return names_viewer(handed_to, viewer)
    return any(names_viewer(name, viewer) for name in facts.get("assignees") or ())


def viewer_bits(facts: PolicyFacts, viewer: Viewer, status: str) -> dict[str, Any]:
    """What this viewer may do with the request: added to a view by ``shapes.for_user``."""
    is_open = status == RequestStatus.OPEN
    verdict = refusal(facts, viewer) if is_open else None
    return {
        "may_answer": is_open and verdict is None,
        # Decline and cancel only (no approving): the starter under four-eyes, a reviewer who already approved.
        "may_decline": is_open and refusal(facts, viewer, ok=False) is None,
        "why_not": verdict.message if verdict else None,
        # May move the deadline later (review/deadlines.py): whoever may answer, an earlier approver included.
        "may_extend": is_open and (verdict is None or extend_refusal(facts, viewer) is None),
        "assigned_to_me": is_assigned(facts, viewer),
        "approved_by_me": viewer.username in (facts.get("approvals") or ()),
    }


def viewer_of(user: User) -> Viewer:
    """A Viewer for a logged-in user, with their groups read now."""
    return Viewer(
        username=user.get_username(), groups=frozenset(user.groups.values_list("name", flat=True)), staff=user.is_staff
    )


aviewer_of = database_sync_to_async(viewer_of)


def answerer_of(user: User, rule: Rule) -> Viewer:
    """A Viewer for judging ``user``'s answer under ``rule`` (``refusal``): their groups are read only when
    the rule names groups, the only part of the verdict they take part in."""
    if not rule.groups:
        return Viewer(username=user.get_username(), staff=user.is_staff)
    return viewer_of(user)


# -- who may cancel a run -------------------------------------------------------------------------


def run_facts(run: Run, open_requests: Iterable[Request], *, fresh: bool = False) -> RunFacts:
    """What anyone needs to know to decide who may cancel ``run`` (JSON, user-independent).

    ``open_requests`` are the run's open requests (cancelling the run withdraws each
    of them), read with their ``run`` set; ``fresh=True`` reads policies uncached, for the service.
    """
    return {
        "run": run.pk,
        "starter": run.started_by.get_username() if run.started_by is not None else None,
        # A withdrawal is not an approval: who approved so far does not change who may withdraw.
        "requests": [facts(r, rule_for(r.tool, r.kind, fresh=fresh), approvals=()) for r in open_requests],
    }


def cancel_refusal(run_facts: RunFacts, viewer: Viewer, *, by_token: bool = False) -> Refusal | None:
    """Why ``viewer`` may not cancel this run (a Refusal), or None when they may.

    Its starter may. A call made with an API token may cancel nothing else: a host
    stops its own runs. Staff may cancel any run, and so may whoever the policies let
    withdraw every request the run waits on, since cancelling the run withdraws them.
    """
    run, starter = run_facts["run"], run_facts["starter"]
    if starter is not None and viewer.username == starter:
        return None
    refused = f"You may not cancel run {run}:"
    if by_token:
        return Refusal(
            "token_not_starter",
            (
                f"{refused} an API token may cancel only the runs its own user started "
                f"(this token is {viewer.username}'s; {starter or 'the console'} started this one)."
            ),
        )
    if viewer.staff:
        return None
    if not run_facts["requests"]:
        who = f"its starter ({starter}) or staff" if starter else "staff"
        return Refusal("not_starter", f"{refused} only {who} may cancel it while it waits on no request.")
    for request_facts in run_facts["requests"]:
        verdict = refusal(request_facts, viewer, ok=False)
        if verdict is not None:
            who = f"Its starter ({starter}), staff" if starter else "Staff"
            return Refusal(
                verdict.rule,
                (
                    f"{refused} it waits on a request you may not answer. {verdict.message} "
                    f"{who} or whoever may answer that request can cancel the run."
                ),
            )
    return None


def cancel_bits(run_facts: RunFacts, viewer: Viewer) -> dict[str, Any]:
    """What this viewer may do with the run: added to a run view by ``frames.frame_for_user``."""
    verdict = cancel_refusal(run_facts, viewer)
    return {"may_cancel": verdict is None, "why_not": verdict.message if verdict else None}
