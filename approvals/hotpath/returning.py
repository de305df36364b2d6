"""A conditional UPDATE that hands back the rows it changed, as it left them, in the same statement.

Django 5.2's ``QuerySet.update()`` returns a count: a caller that publishes the row reads it back with a
SELECT after the UPDATE. PostgreSQL and SQLite >= 3.35 take ``RETURNING`` on an UPDATE, so the row comes
back with the write. Two forms:

- ``UpdateReturning``: the ORM's own UPDATE (its WHERE clause, subqueries included, compiled as
  ``update()`` would), built once per database with sample values where each call's ids go; for an update
  whose SET is the same on every call (a run waits, a run resumes). Compiling it on every call cost ten
  times the statements it saves.
- ``CompiledUpdate``: the same compile-once for an UPDATE that returns only its count (a resume claimed).
- ``update_returning``: one row by primary key, guarded by ``field IN (...)``, with SET values of the call's
  own (a run's finish: its status, output, time), and a foreign key's few fields by scalar subqueries.

Each column is converted by its field as a read would (a whole REAL that SQLite's RETURNING gives back as an
integer included). On a database without ``RETURNING``: the update, then a read of the changed rows by
primary key, in the caller's transaction. Measurements: docs/performance.md ("Statement budget"),
bench/returning.py.
"""

from __future__ import annotations  # Field and ForeignKey take type arguments only in django-stubs

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from threading import Lock
from typing import Any, Generic, TypeVar, cast

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, FloatField, ForeignKey, Model, QuerySet
from django.db.models.expressions import BaseExpression
from django.db.models.sql import UpdateQuery

M = TypeVar("M", bound=Model)
# What an UpdateReturning's ``build`` gives: the rows to update, the values to set, and more values to hand back
# with each row (set on it as attributes, as ``annotate`` does: e.g. a Subquery with OuterRef to the row).
Update = tuple[QuerySet[Any], Mapping[str, Any], Mapping[str, BaseExpression]]


@dataclass(frozen=True)
class _Compiled:
    sql: str
    params: tuple[Any, ...]
    slots: tuple[int | None, ...]  # for each param, the index of the slot it takes, or None for a constant
    names: list[str]  # the model's attnames, in the returned columns' order
    fields: list[Any]  # the model's fields, in the same order
    also: list[str]
    converters: dict[int, Any]
    reading: Any  # the SQL compiler whose apply_converters converts a returned row


def _same(value: object, sample: object) -> bool:
    return type(value) is type(sample) and value == sample


class UpdateReturning(Generic[M]):
    """An ``UPDATE ... RETURNING`` of ``model``'s rows, compiled once per database from ``build(*samples)``, then
    run with other values.

    ``samples`` stand where each call's own values go (a primary key, an id): each must be a value no call
    uses (a negative key, a marked string) that ``build`` passes only into filters, never into a constant
    the statement needs for itself, so that the compiled parameters equal to it are exactly its places.
    """

    def __init__(self, model: type[M], build: Callable[..., Update], samples: Sequence[object]) -> None:
        self.model = model
        self.build = build
        self.samples = tuple(samples)
        self._compiled: dict[str, _Compiled] = {}
        self._lock = Lock()

    def __call__(self, *values: Any, using: str = "default") -> list[M]:
        """The rows the update with ``values`` in the samples' places changed, as it left them (none: [])."""
        if len(values) != len(self.samples):
            raise TypeError(f"expected {len(self.samples)} values, got {len(values)}")
        connection = connections[using]
        if not connection.features.can_return_columns_from_insert:  # the backends' RETURNING, as Django knows it
            queryset, changes, also = self.build(*values)
            return list(_update_then_read(queryset.using(using), changes, also))
        compiled = self._compiled.get(using) or self._compile(using)
        params = [value if slot is None else values[slot] for value, slot in zip(compiled.params, compiled.slots)]
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, params)
            raw = cursor.fetchall()
        return [_row(compiled, row, using) for row in raw]

    def _compile(self, using: str) -> _Compiled:
        with self._lock:
            if using not in self._compiled:
                self._compiled[using] = _compile(*self.build(*self.samples), using=using, samples=self.samples)
            return self._compiled[using]


class CompiledUpdate:
    """A conditional UPDATE, compiled once per database from ``build(*samples)`` as ``UpdateReturning`` compiles
    its own (the same rules for ``samples``), then run with other values; it hands back how many rows changed,
    as ``QuerySet.update()`` does. For an update whose SET is the same on every call (a resume claimed)."""

    def __init__(
        self, build: Callable[..., tuple[QuerySet[Any], Mapping[str, Any]]], samples: Sequence[object]
    ) -> None:
        self.build = build
        self.samples = tuple(samples)
        self._compiled: dict[str, tuple[str, tuple[Any, ...], tuple[int | None, ...]]] = {}
        self._lock = Lock()

    def __call__(self, *values: Any, using: str = "default") -> int:
        if len(values) != len(self.samples):
            raise TypeError(f"expected {len(self.samples)} values, got {len(values)}")
        sql, constants, slots = self._compiled.get(using) or self._compile(using)
        params = [value if slot is None else values[slot] for value, slot in zip(constants, slots)]
        with connections[using].cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.rowcount

    def _compile(self, using: str) -> tuple[str, tuple[Any, ...], tuple[int | None, ...]]:
        with self._lock:
            if using not in self._compiled:
                queryset, changes = self.build(*self.samples)
                query = queryset.query.chain(UpdateQuery)
                assert isinstance(query, UpdateQuery)  # chain() hands back the class it was given
                query.add_update_values(dict(changes))
                sql, params = query.get_compiler(using).as_sql()
                if not sql:
                    raise ValueError("the update changes nothing")
                self._compiled[using] = (sql, tuple(params), _slots(tuple(params), self.samples))
            return self._compiled[using]


def _slots(params: tuple[Any, ...], samples: tuple[object, ...]) -> tuple[int | None, ...]:
    """For each parameter, the index of the sample it stands for, or None for a constant of the statement."""
    slots = tuple(next((i for i, sample in enumerate(samples) if _same(p, sample)), None) for p in params)
    missing = [sample for i, sample in enumerate(samples) if i not in slots]
    if missing:
        raise ValueError(f"the samples {missing!r} are not among the statement's parameters")
    return slots


def _compile(
    queryset: QuerySet[Any],
    changes: Mapping[str, Any],
    also: Mapping[str, BaseExpression],
    *,
    using: str,
    samples: tuple[object, ...],
) -> _Compiled:
    model = queryset.model
    connection = connections[using]
    query = queryset.query.chain(UpdateQuery)
    assert isinstance(query, UpdateQuery)  # chain() hands back the class it was given
    query.add_update_values(dict(changes))
    query.annotations = {}
    compiler = query.get_compiler(using)
    sql, params = compiler.as_sql()
    if not sql:
        raise ValueError("the update changes nothing")
    fields = [field for field in model._meta.concrete_fields if field.column is not None]
    returned = [connection.ops.quote_name(field.column) for field in fields if field.column is not None]
    returned_params: list[Any] = []
    for expression in also.values():
        extra_sql, extra_params = compiler.compile(expression.resolve_expression(query, allow_joins=False))
        returned.append(extra_sql)
        returned_params += extra_params
    every = (*params, *returned_params)
    slots = _slots(every, samples)
    reading = model._default_manager.using(using).all().query.get_compiler(using)
    return _Compiled(
        sql=f"{sql} RETURNING {', '.join(returned)}",
        params=every,
        slots=slots,
        names=[field.attname for field in fields],
        fields=fields,
        also=list(also),
        converters=reading.get_converters([field.get_col(model._meta.db_table) for field in fields]),
        reading=reading,
    )


def _row(compiled: _Compiled, row: Sequence[Any], using: str) -> Any:
    count = len(compiled.names)
    own = [_as_stored(value, field) for value, field in zip(row[:count], compiled.fields, strict=True)]
    if compiled.converters:
        own = list(next(iter(compiled.reading.apply_converters([own], compiled.converters))))
    model = compiled.reading.query.model
    instance = model.from_db(using, compiled.names, own)
    for name, value in zip(compiled.also, row[count:], strict=True):  # as the driver returns them
        setattr(instance, name, value)
    return instance


def _update_then_read(
    queryset: QuerySet[Any], changes: Mapping[str, Any], also: Mapping[str, BaseExpression]
) -> list[Any]:
    model = queryset.model
    pks = list(queryset.values_list("pk", flat=True))
    changed = model._default_manager.using(queryset.db).filter(pk__in=pks)
    changed.update(**changes)
    return list(changed.annotate(**also))


def _as_stored(value: Any, field: Any) -> Any:
    """SQLite stores a whole REAL as an integer: its SELECT turns it back into a float, its RETURNING does not."""
    return float(value) if isinstance(field, FloatField) and isinstance(value, int) else value


# -- one row, SET values of the call's own ---------------------------------------------------------------

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
            value = _as_stored(value, field)
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
