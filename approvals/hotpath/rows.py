"""Replaces the ORM's statement compiling on the suspension's path: plain SQL built once per model and
database from the model's own metadata, each value still converted by its field both ways, so the rows
are the ones ``save()`` would write and ``get()`` would read (tests/hotpath/test_rows.py holds them to it).

Only for the hot path: no signals are sent (``insert_or_save`` uses ``save()`` when a receiver
listens), and every other write and read stays with the ORM. Measurements: docs/performance.md.
"""

from __future__ import annotations  # Field and ForeignKey take type arguments only in django-stubs

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Generic, TypeVar, cast

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, ForeignKey, Model, QuerySet, signals
from django.db.models.expressions import Col

M = TypeVar("M", bound=Model)
# A converter the ORM applies to a column's value as read: (value, expression, connection) -> value.
Converter = Callable[[Any, Any, BaseDatabaseWrapper], Any]


def _field(model: type[Model], name: str) -> Field[Any, Any]:
    """The field ``name`` of ``model`` that is stored in its table (a reverse relation is not)."""
    field = model._meta.get_field(name)
    if not isinstance(field, Field):
        raise ValueError(f"{model.__name__}.{name} is not stored in its table")
    return field


def _column(field: Field[Any, Any]) -> str:
    """The column a concrete field is stored in."""
    if field.column is None:
        raise ValueError(f"{field} is not stored in a column")
    return field.column


def _foreign_key(model: type[Model], name: str) -> tuple[ForeignKey[Any, Any], type[Model]]:
    """The foreign key ``name`` of ``model`` and the model it points to."""
    field = model._meta.get_field(name)
    target = getattr(field, "related_model", None)
    if not isinstance(field, ForeignKey) or not isinstance(target, type):
        raise ValueError(f"{model.__name__}.{name} is not a foreign key")
    return field, target


def has_save_receivers(model: type[Model]) -> bool:
    """True when something listens to ``model``'s pre_save or post_save: then only ``save()`` will do."""
    return signals.pre_save.has_listeners(model) or signals.post_save.has_listeners(model)


def _generated_pk(model: type[Model]) -> bool:
    """True when the database assigns ``model``'s primary key (an AutoField): an insert may leave it out."""
    return bool(getattr(model._meta.pk, "db_returning", False))


@cache
def _insert_sql(model: type[Model], alias: str, returning_pk: bool = False) -> str:
    connection = connections[alias]
    quote = connection.ops.quote_name
    meta = model._meta
    fields = [f for f in meta.concrete_fields if not (returning_pk and f is meta.pk)]
    columns = ", ".join(quote(_column(f)) for f in fields)
    marks = ", ".join(["%s"] * len(fields))
    sql = f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES ({marks})"
    return f"{sql} RETURNING {quote(_column(meta.pk))}" if returning_pk else sql


def insert(instance: M, using: str = "default") -> M:
    """INSERT ``instance`` as ``save(force_insert=True)`` would, minus signals: its primary key set, or left
    None for the database to assign (an AutoField), read back by the same statement's RETURNING."""
    model = type(instance)
    returning_pk = instance.pk is None
    if returning_pk and not _generated_pk(model):
        raise ValueError(f"rows.insert needs the primary key of this {model.__name__} set")
    connection = connections[using]
    fields = [f for f in model._meta.concrete_fields if not (returning_pk and f is model._meta.pk)]
    values = [f.get_db_prep_save(f.pre_save(instance, True), connection) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(_insert_sql(model, using, returning_pk), values)
        if returning_pk:
            row = cursor.fetchone()
            if row is None:
                raise RuntimeError(f"the INSERT of a {model.__name__} returned no id")
            instance.pk = row[0]
    instance._state.adding = False
    instance._state.db = using
    return instance


def insert_or_save(instance: Model, orm_save: Callable[[], object], using: str = "default") -> object:
    """Store a new ``instance`` (its primary key set, or None for an AutoField): by ``insert`` when nothing listens to its
    model's pre_save or post_save, else by calling ``orm_save()``, since only ``save()`` sends those signals."""
    if has_save_receivers(type(instance)):
        return orm_save()
    return insert(instance, using=using)


@cache
def _update_sql(model: type[Model], changed: tuple[str, ...], alias: str, guard: str | None, guard_count: int) -> str:
    quote = connections[alias].ops.quote_name
    meta = model._meta
    sets = ", ".join(f"{quote(_column(_field(model, name)))} = %s" for name in changed)
    sql = f"UPDATE {quote(meta.db_table)} SET {sets} WHERE {quote(_column(meta.pk))} = %s"
    if guard is not None:
        sql += f" AND {quote(_column(_field(model, guard)))} IN ({', '.join(['%s'] * guard_count)})"
    return sql


def update(
    model: type[Model],
    pk: object,
    changes: Mapping[str, object],
    *,
    only_if: tuple[str, Collection[object]] | None = None,
    using: str = "default",
) -> int:
    """``model.objects.filter(pk=pk[, field__in=values]).update(**changes)``; returns the rows changed.

    ``only_if``: ``(field name, allowed values)``, the condition that makes it a conditional update.
    """
    connection = connections[using]
    meta = model._meta
    names = tuple(changes)
    params = [_field(model, name).get_db_prep_save(changes[name], connection) for name in names]
    params.append(meta.pk.get_db_prep_value(pk, connection))
    guard, allowed = only_if if only_if is not None else (None, ())
    if guard is not None and not allowed:
        return 0  # as the ORM's ``__in=[]``: no row can match
    if guard is not None:
        params += [_field(model, guard).get_db_prep_value(value, connection) for value in allowed]
    with connection.cursor() as cursor:
        cursor.execute(_update_sql(model, names, using, guard, len(allowed)), params)
        return cursor.rowcount


class _Columns:
    """Fields of one model in a SELECT, with the converters the ORM would apply to each (the backend's, then the field's)."""

    def __init__(
        self, model: type[Model], fields: Iterable[Field[Any, Any]], alias: str, connection: BaseDatabaseWrapper
    ) -> None:
        self.model = model
        self.fields = list(fields)
        self.names = [f.attname for f in self.fields]
        self.converters: list[tuple[int, Col, list[Converter]]] = []
        for position, f in enumerate(self.fields):
            column = f.get_col(alias)
            found = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
            if found:
                self.converters.append((position, column, found))

    def convert(self, values: Sequence[Any], connection: BaseDatabaseWrapper) -> list[Any]:
        values = list(values)
        for position, column, converters in self.converters:
            value = values[position]
            for converter in converters:
                value = converter(value, column, connection)
            values[position] = value
        return values

    def build(self, values: Sequence[Any], using: str, connection: BaseDatabaseWrapper) -> Model:
        return self.model.from_db(using, self.names, self.convert(values, connection))


def _one_row(sql: str, model: type[Model], pk: object, using: str) -> tuple[Any, ...] | None:
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(sql, [model._meta.pk.get_db_prep_value(pk, connection)])
        return cursor.fetchone()


@cache
def _values_statement(model: type[Model], names: tuple[str, ...], using: str) -> tuple[str, _Columns]:
    connection = connections[using]
    quote = connection.ops.quote_name
    table = model._meta.db_table
    columns = _Columns(model, [_field(model, name) for name in names], table, connection)
    sql = (
        f"SELECT {', '.join(quote(_column(f)) for f in columns.fields)} FROM {quote(table)} "
        f"WHERE {quote(_column(model._meta.pk))} = %s"
    )
    return sql, columns


def values(model: type[Model], pk: object, names: Sequence[str], *, using: str = "default") -> dict[str, Any] | None:
    """``model.objects.filter(pk=pk).values(*names).first()``: a dict of those fields, or None if no row."""
    sql, columns = _values_statement(model, tuple(names), using)
    row = _one_row(sql, model, pk, using)
    return None if row is None else dict(zip(names, columns.convert(row, connections[using])))


@dataclass(frozen=True)
class _Joined:
    """One followed foreign key of a ``get``: set on the instance read at ``parent`` (-1: the row itself)."""

    foreign_key: ForeignKey[Any, Any]
    parent: int
    columns: _Columns


@cache
def _get_statement(
    model: type[Model], related: tuple[str, ...], exists: tuple[tuple[str, type[Model], str], ...], using: str
) -> tuple[str, _Columns, tuple[_Joined, ...]]:
    """``model.objects.select_related(*related).annotate(name=Exists(child rows))..filter(pk=%s)``: the SQL,
    the model's own _Columns and each followed foreign key's, in the order the columns come (``exists``'
    booleans last). A path ``a__b`` follows ``b`` of the model ``a`` points to; ``a`` is followed too."""
    connection = connections[using]
    quote = connection.ops.quote_name
    own = _Columns(model, model._meta.concrete_fields, "t0", connection)
    columns = [f"t0.{quote(_column(f))}" for f in model._meta.concrete_fields]
    joined: list[_Joined] = []
    joins = []
    at: dict[str, int] = {}  # a followed path -> its index in ``joined``

    def follow(path: str) -> int:
        if path in at:
            return at[path]
        parent_path, _, name = path.rpartition("__")
        parent = follow(parent_path) if parent_path else -1
        parent_model = joined[parent].columns.model if parent >= 0 else model
        foreign_key, target = _foreign_key(parent_model, name)
        alias, parent_alias = f"t{len(joined) + 1}", f"t{parent + 1}"
        joined.append(_Joined(foreign_key, parent, _Columns(target, target._meta.concrete_fields, alias, connection)))
        columns.extend(f"{alias}.{quote(_column(f))}" for f in target._meta.concrete_fields)
        joins.append(
            f"LEFT OUTER JOIN {quote(target._meta.db_table)} {alias} "
            f"ON {alias}.{quote(_column(foreign_key.target_field))} = {parent_alias}.{quote(_column(foreign_key))}"
        )
        at[path] = len(joined) - 1
        return at[path]

    for path in related:
        follow(path)
    pk_column = f"t0.{quote(_column(model._meta.pk))}"
    for _, child, foreign_key_name in exists:
        child_key, _ = _foreign_key(child, foreign_key_name)
        columns.append(
            f"EXISTS(SELECT 1 FROM {quote(child._meta.db_table)} WHERE {quote(_column(child_key))} = {pk_column})"
        )
    sql = f"SELECT {', '.join(columns)} FROM {quote(model._meta.db_table)} t0 {' '.join(joins)} WHERE {pk_column} = %s"
    return sql, own, tuple(joined)


def get(
    model: type[M],
    pk: object,
    *,
    related: Iterable[str] = (),
    exists: Mapping[str, tuple[type[Model], str]] | None = None,
    using: str = "default",
) -> M | None:
    """``model.objects.select_related(*related).get(pk=pk)``, None if no row; ``related`` as select_related
    takes it (``"run__started_by"`` included). ``exists`` maps an attribute name to a model and its foreign key
    to ``model``: set to whether any such row points at this one, as ``annotate(name=Exists(...))`` would."""
    connection = connections[using]
    wanted = tuple((name, child, key) for name, (child, key) in (exists or {}).items())
    sql, own, joined = _get_statement(model, tuple(related), wanted, using)
    row = _one_row(sql, model, pk, using)
    if row is None:
        return None
    start = len(own.fields)
    instance = own.build(row[:start], using, connection)
    read: list[Model | None] = []
    for join in joined:
        part = row[start : start + len(join.columns.fields)]
        start += len(join.columns.fields)
        parent = instance if join.parent < 0 else read[join.parent]
        target = None
        if parent is not None and getattr(parent, join.foreign_key.attname) is not None:
            target = join.columns.build(part, using, connection)
        if parent is not None:
            join.foreign_key.set_cached_value(parent, target)
        read.append(target)
    for (name, _, _), value in zip(wanted, row[start:], strict=True):
        setattr(instance, name, bool(value))
    # own.build made it with model.from_db: an M, which the statement cache's signature cannot carry.
    return cast(M, instance)


@cache
def _pks_statement(model: type[Model], names: tuple[str, ...], order_by: str, using: str) -> str:
    quote = connections[using].ops.quote_name
    meta = model._meta
    where = " AND ".join(f"{quote(_column(_field(model, name)))} = %s" for name in names)
    return (
        f"SELECT {quote(_column(meta.pk))} FROM {quote(meta.db_table)} WHERE {where} "
        f"ORDER BY {quote(_column(_field(model, order_by)))}"
    )


def pks(model: type[Model], where: Mapping[str, object], *, order_by: str, using: str = "default") -> list[Any]:
    """``model.objects.filter(**where).order_by(order_by).values_list("pk", flat=True)`` for a primary key
    the database returns as it is (text or integer); ``where`` maps field names to values."""
    connection = connections[using]
    sql = _pks_statement(model, tuple(where), order_by, using)
    params = [_field(model, name).get_db_prep_value(value, connection) for name, value in where.items()]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


class CompiledRead(Generic[M]):
    """A read with no values of its own (``build()`` gives the queryset: a filter on constants, an order),
    compiled once per database, its rows built as ``QuerySet.raw`` builds them (each column converted by its
    field). ``select_related`` and ``prefetch_related`` are not carried over: prefetch on the rows returned."""

    def __init__(self, build: Callable[[], QuerySet[M]]) -> None:
        self.build = build
        self._compiled: dict[str, tuple[type[M], str, tuple[Any, ...]]] = {}

    def __call__(self, using: str = "default") -> list[M]:
        compiled = self._compiled.get(using)
        if compiled is None:
            queryset = self.build()
            query = queryset.query
            if query.select_related or query.annotations or query.extra:
                raise ValueError(
                    "a CompiledRead builds only the model's own columns: no select_related, annotate, extra"
                )
            sql, params = query.get_compiler(using).as_sql()
            compiled = self._compiled[using] = (queryset.model, sql, tuple(params))
        model, sql, params = compiled
        return list(model._default_manager.db_manager(using).raw(sql, params))
