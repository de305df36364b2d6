"""Replaces the ORM's statement compiling on the suspension's path: plain SQL built once per model and
database from the model's own metadata, each value still converted by its field both ways, so the rows
are the ones ``save()`` would write and ``get()`` would read (tests/hotpath/test_rows.py holds them to it).

Only for the hot path: no signals are sent (``insert_or_save`` uses ``save()`` when a receiver
listens), and every other write and read stays with the ORM. Measurements: docs/performance.md.
"""

from functools import cache

from django.db import connections
from django.db.models import signals


def has_save_receivers(model):
    """True when something listens to ``model``'s pre_save or post_save: then only ``save()`` will do."""
    return signals.pre_save.has_listeners(model) or signals.post_save.has_listeners(model)


@cache
def _insert_sql(model, alias):
    connection = connections[alias]
    quote = connection.ops.quote_name
    fields = model._meta.concrete_fields
    columns = ", ".join(quote(f.column) for f in fields)
    marks = ", ".join(["%s"] * len(fields))
    return f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES ({marks})"


def insert(instance, using="default"):
    """INSERT ``instance`` (its primary key already set) as ``save(force_insert=True)`` would, minus signals."""
    model = type(instance)
    if instance.pk is None:
        raise ValueError(f"rows.insert needs the primary key of this {model.__name__} set")
    connection = connections[using]
    values = [f.get_db_prep_save(f.pre_save(instance, True), connection) for f in model._meta.concrete_fields]
    with connection.cursor() as cursor:
        cursor.execute(_insert_sql(model, using), values)
    instance._state.adding = False
    instance._state.db = using
    return instance


def insert_or_save(instance, orm_save, using="default"):
    """Store a new ``instance`` (its primary key already set): by ``insert`` when nothing listens to its
    model's pre_save or post_save, else by calling ``orm_save()``, since only ``save()`` sends those signals."""
    if has_save_receivers(type(instance)):
        return orm_save()
    return insert(instance, using=using)


@cache
def _update_sql(model, changed, alias, guard, guard_count):
    quote = connections[alias].ops.quote_name
    meta = model._meta
    sets = ", ".join(f"{quote(meta.get_field(name).column)} = %s" for name in changed)
    sql = f"UPDATE {quote(meta.db_table)} SET {sets} WHERE {quote(meta.pk.column)} = %s"
    if guard is not None:
        sql += f" AND {quote(meta.get_field(guard).column)} IN ({', '.join(['%s'] * guard_count)})"
    return sql


def update(model, pk, changes, *, only_if=None, using="default"):
    """``model.objects.filter(pk=pk[, field__in=values]).update(**changes)``; returns the rows changed.

    ``only_if``: ``(field name, allowed values)``, the condition that makes it a conditional update.
    """
    connection = connections[using]
    meta = model._meta
    names = tuple(changes)
    params = [meta.get_field(name).get_db_prep_save(changes[name], connection) for name in names]
    params.append(meta.pk.get_db_prep_value(pk, connection))
    guard, allowed = only_if if only_if is not None else (None, ())
    if guard is not None and not allowed:
        return 0  # as the ORM's ``__in=[]``: no row can match
    if guard is not None:
        params += [meta.get_field(guard).get_db_prep_value(value, connection) for value in allowed]
    with connection.cursor() as cursor:
        cursor.execute(_update_sql(model, names, using, guard, len(allowed)), params)
        return cursor.rowcount


class _Columns:
    """Fields of one model in a SELECT, with the converters the ORM would apply to each (the backend's, then the field's)."""

    def __init__(self, model, fields, alias, connection):
        self.model = model
        self.fields = list(fields)
        self.names = [f.attname for f in self.fields]
        self.converters = []
        for position, f in enumerate(self.fields):
            column = f.get_col(alias)
            found = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
            if found:
                self.converters.append((position, column, found))

    def convert(self, values, connection):
        values = list(values)
        for position, column, converters in self.converters:
            value = values[position]
            for converter in converters:
                value = converter(value, column, connection)
            values[position] = value
        return values

    def build(self, values, using, connection):
        return self.model.from_db(using, self.names, self.convert(values, connection))


def _one_row(sql, model, pk, using):
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(sql, [model._meta.pk.get_db_prep_value(pk, connection)])
        return cursor.fetchone()


@cache
def _values_statement(model, names, using):
    connection = connections[using]
    quote = connection.ops.quote_name
    table = model._meta.db_table
    columns = _Columns(model, [model._meta.get_field(name) for name in names], table, connection)
    sql = (
        f"SELECT {', '.join(quote(f.column) for f in columns.fields)} FROM {quote(table)} "
        f"WHERE {quote(model._meta.pk.column)} = %s"
    )
    return sql, columns


def values(model, pk, names, *, using="default"):
    """``model.objects.filter(pk=pk).values(*names).first()``: a dict of those fields, or None if no row."""
    sql, columns = _values_statement(model, tuple(names), using)
    row = _one_row(sql, model, pk, using)
    return None if row is None else dict(zip(names, columns.convert(row, connections[using])))


@cache
def _get_statement(model, related, using):
    """``model.objects.select_related(*related).filter(pk=%s)``: the SQL and the _Columns of each model in it."""
    connection = connections[using]
    quote = connection.ops.quote_name
    base = "t0"
    readings = [(None, _Columns(model, model._meta.concrete_fields, base, connection))]
    columns = [f"{base}.{quote(f.column)}" for f in model._meta.concrete_fields]
    joins = []
    for n, name in enumerate(related, start=1):
        foreign_key = model._meta.get_field(name)
        target, alias = foreign_key.related_model, f"t{n}"
        readings.append((foreign_key, _Columns(target, target._meta.concrete_fields, alias, connection)))
        columns += [f"{alias}.{quote(f.column)}" for f in target._meta.concrete_fields]
        joins.append(
            f"LEFT OUTER JOIN {quote(target._meta.db_table)} {alias} "
            f"ON {alias}.{quote(foreign_key.target_field.column)} = {base}.{quote(foreign_key.column)}"
        )
    sql = (
        f"SELECT {', '.join(columns)} FROM {quote(model._meta.db_table)} {base} {' '.join(joins)} "
        f"WHERE {base}.{quote(model._meta.pk.column)} = %s"
    )
    return sql, tuple(readings)


def get(model, pk, *, related=(), using="default"):
    """``model.objects.select_related(*related).get(pk=pk)`` for foreign keys of ``model`` itself; None if no row."""
    connection = connections[using]
    sql, readings = _get_statement(model, tuple(related), using)
    row = _one_row(sql, model, pk, using)
    if row is None:
        return None
    start, instance = 0, None
    for foreign_key, reading in readings:
        part = row[start : start + len(reading.fields)]
        start += len(reading.fields)
        if foreign_key is None:
            instance = reading.build(part, using, connection)
        elif getattr(instance, foreign_key.attname) is None:
            foreign_key.set_cached_value(instance, None)
        else:
            foreign_key.set_cached_value(instance, reading.build(part, using, connection))
    return instance


@cache
def _pks_statement(model, names, order_by, using):
    quote = connections[using].ops.quote_name
    meta = model._meta
    where = " AND ".join(f"{quote(meta.get_field(name).column)} = %s" for name in names)
    return (
        f"SELECT {quote(meta.pk.column)} FROM {quote(meta.db_table)} WHERE {where} "
        f"ORDER BY {quote(meta.get_field(order_by).column)}"
    )


def pks(model, where, *, order_by, using="default"):
    """``model.objects.filter(**where).order_by(order_by).values_list("pk", flat=True)`` for a primary key
    the database returns as it is (text or integer); ``where`` maps field names to values."""
    connection = connections[using]
    sql = _pks_statement(model, tuple(where), order_by, using)
    params = [model._meta.get_field(name).get_db_prep_value(value, connection) for name, value in where.items()]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]
