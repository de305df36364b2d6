"""A conditional UPDATE that hands back the row as it left it (``UPDATE ... RETURNING``), where a writer
would otherwise read the row again in the same transaction to publish it: one statement instead of two.

The ORM has no update that returns rows. PostgreSQL and SQLite (3.35 and later) both take ``RETURNING``,
scalar subqueries in it included, which bring a foreign key's few fields a frame needs. Values are
converted by their fields as the ORM converts what it reads (tests/hotpath/test_returning.py holds the
instance to ``get()``'s). Measurements: docs/performance.md ("Statement budget").
"""

from __future__ import annotations  # Field and ForeignKey take type arguments only in django-stubs

from collections.abc import Callable, Collection, Mapping, Sequence
from functools import cache
from typing import Any, TypeVar, cast

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, FloatField, ForeignKey, Model

M = TypeVar("M", bound=Model)
Converter = Callable[[Any, Any, BaseDatabaseWrapper], Any]


def _stored(model: type[Model], name: str) -> Field[Any, Any]:
    field = model._meta.get_field(name)
    if not isinstance(field, Field) or field.column is None:
        raise ValueError(f"{model.__name__}.{name} is not stored in its table")
    return field


class _Read:
    """Fields of one model as a RETURNING clause gives them back, with the ORM's converters for each."""

    def __init__(self, model: type[Model], fields: Sequence[Field[Any, Any]], connection: BaseDatabaseWrapper) -> None:
        self.model = model
        # Model.from_db takes a subset of the fields in the model's own order (the others deferred).
        order = {f.attname: n for n, f in enumerate(model._meta.concrete_fields)}
        self.fields = sorted(fields, key=lambda f: order[f.attname])
        self.converters: list[list[Converter]] = []
        self.columns = []
        for f in self.fields:
            column = f.get_col(model._meta.db_table)
            self.columns.append(column)
            self.converters.append(connection.ops.get_db_converters(column) + column.get_db_converters(connection))

    def build(self, values: Sequence[Any], using: str, connection: BaseDatabaseWrapper) -> Model:
        converted = []
        for value, field, column, converters in zip(values, self.fields, self.columns, self.converters, strict=True):
            if isinstance(field, FloatField) and isinstance(value, int):
                # SQLite stores a whole REAL as an integer; its SELECT turns it back, its RETURNING does not.
                value = float(value)
            for converter in converters:
                value = converter(value, column, connection)
            converted.append(value)
        return self.model.from_db(using, [f.attname for f in self.fields], converted)


@cache
def _statement(
    model: type[Model],
    names: tuple[str, ...],
    guard: str,
    guard_count: int,
    related: tuple[tuple[str, tuple[str, ...]], ...],
    using: str,
) -> tuple[str, _Read, tuple[tuple[ForeignKey[Any, Any], _Read], ...]]:
    connection = connections[using]
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    sets = ", ".join(f"{quote(cast(str, _stored(model, name).column))} = %s" for name in names)
    pk_column = quote(cast(str, model._meta.pk.column))
    guard_column = quote(cast(str, _stored(model, guard).column))
    own = _Read(model, list(model._meta.concrete_fields), connection)
    returning = [f"{table}.{quote(cast(str, f.column))}" for f in own.fields]
    joined = []
    for name, wanted in related:
        foreign_key = model._meta.get_field(name)
        target = getattr(foreign_key, "related_model", None)
        if not isinstance(foreign_key, ForeignKey) or not (isinstance(target, type) and issubclass(target, Model)):
            raise ValueError(f"{model.__name__}.{name} is not a foreign key")
        reading = _Read(target, [target._meta.pk, *(_stored(target, n) for n in wanted if n != "pk")], connection)
        target_table = quote(target._meta.db_table)
        key = quote(cast(str, foreign_key.target_field.column))
        returning += [
            f"(SELECT {quote(cast(str, f.column))} FROM {target_table} "
            f"WHERE {key} = {table}.{quote(foreign_key.column)})"
            for f in reading.fields
        ]
        joined.append((foreign_key, reading))
    sql = (
        f"UPDATE {table} SET {sets} WHERE {pk_column} = %s AND {guard_column} IN ({', '.join(['%s'] * guard_count)}) "
        f"RETURNING {', '.join(returning)}"
    )
    return sql, own, tuple(joined)


def update_returning(
    model: type[M],
    pk: object,
    changes: Mapping[str, object],
    *,
    only_if: tuple[str, Collection[object]],
    related: Mapping[str, Sequence[str]] | None = None,
    using: str = "default",
) -> M | None:
    """``model.objects.filter(pk=pk, field__in=values).update(**changes)``, then the row as it left it (the
    instance ``get()`` would read), or None when no row matched.

    ``only_if``: ``(field name, allowed values)``. ``related``: foreign key name -> the fields of its
    target to load (its pk always; the others deferred), e.g. ``{"started_by": ("username",)}``.
    """
    guard, allowed = only_if
    if not allowed:
        return None  # as the ORM's ``__in=[]``: no row can match
    connection = connections[using]
    names = tuple(changes)
    wanted = tuple((name, tuple(fields)) for name, fields in (related or {}).items())
    sql, own, joined = _statement(model, names, guard, len(allowed), wanted, using)
    params = [_stored(model, name).get_db_prep_save(changes[name], connection) for name in names]
    params.append(model._meta.pk.get_db_prep_value(pk, connection))
    params += [_stored(model, guard).get_db_prep_value(value, connection) for value in allowed]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()  # to the end: SQLite applies the update as its rows are stepped through
    if not rows:
        return None
    row = rows[0]
    start = len(own.fields)
    instance = own.build(row[:start], using, connection)
    for foreign_key, reading in joined:
        part = row[start : start + len(reading.fields)]
        start += len(reading.fields)
        target_pk = part[reading.fields.index(reading.model._meta.pk)]
        foreign_key.set_cached_value(instance, None if target_pk is None else reading.build(part, using, connection))
    return cast(M, instance)
