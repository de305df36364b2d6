"""Keyset pages: the rows after a cursor in a fixed order, read with ``LIMIT n + 1``, never by OFFSET.

The audit page pages by id; dashboards and the API page requests by
``(created_at, id)`` and active runs by id. Page 40 costs what page 1 does, and a
row opened or closed between two pages never shifts another row into or out of
view: each page starts strictly after the last row the previous one showed.

A cursor leaves the process as an opaque, URL-safe string (``encode_cursor``);
``decode_cursor`` refuses anything this module did not make, with a message
that says what to send instead.
"""

import base64
import binascii
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar

from django.db.models import Model, Q, QuerySet

MAX_ID = 2**63 - 1  # the largest id SQLite's INTEGER and PostgreSQL's bigint hold

# One value of a row's key, as a cursor holds it.
KeyValue = datetime | str | int
RowT = TypeVar("RowT", bound=Model)


class CursorError(ValueError):
    """A cursor that this console did not hand out; the message says what to send instead."""


def page_size(value: Any, *, default: int, maximum: int) -> int:
    """A page size from a query parameter: a whole number clamped to 1..maximum, or ``default``."""
    try:
        size = int(value)
    except (TypeError, ValueError):
        return default
    return max(1, min(size, maximum))


def take_page(rows: QuerySet[RowT], limit: int) -> tuple[list[RowT], bool]:
    """The first ``limit`` rows of ``rows`` (a queryset in page order) and whether more follow.

    Reads ``limit + 1`` rows and never counts.
    """
    chunk = list(rows[: limit + 1])
    return chunk[:limit], len(chunk) > limit


def fitting(items: Sequence[Any], max_bytes: int) -> int:
    """How many of ``items`` (JSON values), from the first, fit in ``max_bytes`` of JSON; at least one.

    A page of large rows ends early instead of growing a frame without bound.
    """
    total = 0
    for index, item in enumerate(items):
        total += len(json.dumps(item)) + 1
        if total > max_bytes and index > 0:
            return index
    return len(items)


def encode_cursor(values: Sequence[KeyValue]) -> str:
    """An opaque, URL-safe cursor for a row's key (a tuple of JSON values and datetimes)."""
    plain = [value.isoformat() if isinstance(value, datetime) else value for value in values]
    text = json.dumps(plain, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def refused_cursor(name: str = "after") -> CursorError:
    """The refusal of a cursor this console did not hand out (or not for this order), saying what to send."""
    return CursorError(
        f"{name!r} is not a cursor this console gave out: pass the 'next' of the page before, or leave it "
        "out for the first page."
    )


def decode_cursor(cursor: object, kinds: Sequence[type], *, name: str = "after") -> tuple[KeyValue, ...]:
    """The key a cursor holds, each value converted by ``kinds`` (``datetime``, ``str`` or ``int``).

    Raises CursorError for anything ``encode_cursor`` did not make with that many values.
    """
    refusal = refused_cursor(name)
    if not isinstance(cursor, str) or not cursor or len(cursor) > 1000:
        raise refusal
    try:
        plain = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode())
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise refusal from None
    if not isinstance(plain, list) or len(plain) != len(kinds):
        raise refusal
    values: list[KeyValue] = []
    for value, kind in zip(plain, kinds):
        if kind is datetime:
            try:
                value = datetime.fromisoformat(value) if isinstance(value, str) else None
            except ValueError:
                value = None
            if value is None or value.tzinfo is None:
                raise refusal
        elif kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise refusal
        elif not isinstance(value, kind):
            raise refusal
        values.append(value)
    return tuple(values)


def strictly_after(fields: Sequence[str], values: Sequence[KeyValue]) -> Q:
    """A filter for the rows after ``values`` in ascending order of ``fields`` (a row-value comparison).

    ``(a, b) > (x, y)`` is written ``a > x OR (a = x AND b > y)``, which both SQLite
    and PostgreSQL answer from an index on ``a``.
    """
    condition = Q()
    for index in reversed(range(len(fields))):
        equal = {field: value for field, value in zip(fields[:index], values[:index])}
        condition |= Q(**equal, **{f"{fields[index]}__gt": values[index]})
    return condition


def strictly_before(fields: Sequence[str], values: Sequence[KeyValue]) -> Q:
    """``strictly_after`` for a descending order of ``fields``: the rows before ``values``."""
    condition = Q()
    for index in reversed(range(len(fields))):
        equal = {field: value for field, value in zip(fields[:index], values[:index])}
        condition |= Q(**equal, **{f"{fields[index]}__lt": values[index]})
    return condition
