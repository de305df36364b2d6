"""A conditional UPDATE that hands back the rows it changed, as it left them, in the same statement.

Django 5.2's ``QuerySet.update()`` returns a count: a caller that publishes the row reads it back with a
SELECT after the UPDATE. PostgreSQL and SQLite >= 3.35 take ``RETURNING`` on an UPDATE, so the row comes
back with the write. The statement is the ORM's own (its WHERE clause, subqueries included, compiled as
``update()`` would), built once per database (``UpdateReturning``): compiling it on every call cost ten
times the statements it saves. Each column is converted by its field as a read would. On a database
without ``RETURNING``: the update, then a read of the changed rows by primary key, in the caller's
transaction. Measurements: docs/performance.md ("Statement budget"), bench/returning.py.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from threading import Lock
from typing import Any, Generic, TypeVar

from django.db import connections
from django.db.models import Model, QuerySet
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
    slots = tuple(next((i for i, sample in enumerate(samples) if _same(p, sample)), None) for p in every)
    missing = [sample for i, sample in enumerate(samples) if i not in slots]
    if missing:
        raise ValueError(f"the samples {missing!r} are not among the statement's parameters")
    reading = model._default_manager.using(using).all().query.get_compiler(using)
    return _Compiled(
        sql=f"{sql} RETURNING {', '.join(returned)}",
        params=every,
        slots=slots,
        names=[field.attname for field in fields],
        also=list(also),
        converters=reading.get_converters([field.get_col(model._meta.db_table) for field in fields]),
        reading=reading,
    )


def _row(compiled: _Compiled, row: Sequence[Any], using: str) -> Any:
    count = len(compiled.names)
    own = list(row[:count])
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
