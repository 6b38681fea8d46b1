"""The cursor the hand-written statements of hitl/core/db run on, and their rows made
model instances.

Those statements (run_statements, answer_statements, locked_reads) are single-statement
forms of the review cycle's hottest writes and SQL built once for its locked reads:
this module binds their parameters on the server, prepares them once per session, logs
them as Django logs its own, and converts their columns as the ORM would. Measured in
bench/peers.py; the statement counts are guarded in tests/core/test_query_counts.py
and, for the web process's cycle, tests/api/test_web_cycle_cost.py.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.postgresql.base import CursorDebugWrapper
from django.db.backends.utils import CursorWrapper
from django.db.models import Model

from hitl.core.models import Run, Thread


def available() -> bool:
    return db().vendor == "postgresql"


def db():
    """This thread's default database wrapper. Each attribute read through
    `django.db.connection` looks the wrapper up again in a context-local store (about
    1.5 µs); a statement binding a few dozen values looks it up once."""
    return connections[DEFAULT_DB_ALIAS]


def cursor():
    """A cursor for this module's statements, wrapped as Django wraps its own (database
    errors translated, queries logged and counted), that binds parameters on the server
    and prepares each statement on first use: PostgreSQL then parses and plans these
    CTEs once per session instead of on every call (about 3 ms of Postgres CPU per
    review cycle). Django's own cursors bind on the client, which never prepares, and
    stay as they are. Inside a transaction such a statement keeps its snapshot until
    the next statement or the end of the transaction: these transactions are short.
    Behind a pooler in transaction mode (HITL_DB_PREPARE off) nothing is prepared: the
    next transaction may run on another server session.
    """
    wrapper = db()
    if not available():
        return wrapper.cursor()
    import psycopg

    wrapper.ensure_connection()
    conn = wrapper.connection
    if conn.prepare_threshold is None and settings.HITL_DB_PREPARE:
        # Only server-binding cursors ever prepare, so this changes these alone.
        conn.prepare_threshold = 0
    raw = psycopg.Cursor(conn)
    if wrapper.queries_logged:
        return _LoggedCursor(raw, wrapper)
    return wrapper.make_cursor(raw)


class _LoggedCursor(CursorDebugWrapper):
    """Django's query log for these cursors: each statement with its values inlined, as
    Django logs its own server-bound statements (psycopg keeps no text of a prepared one)."""

    def execute(self, sql, params=None):
        with self.debug_sql(self.db.ops.compose_sql(sql, params)):
            return CursorWrapper.execute(self, sql, params)


@cache
def concrete_fields(model: type[Model]) -> list[Any]:
    return list(model._meta.concrete_fields)


def select(model: type[Model], alias: str) -> str:
    """The model's columns under `alias`, in `concrete_fields` order."""
    return ", ".join(f'{alias}."{f.column}"' for f in concrete_fields(model))


def instance(model: type[Model], fields: list[Any], values: tuple) -> Model:
    """A model instance from raw column values, converted as the ORM converts them (the
    database backend's converters, then the field's own)."""
    wrapper = db()
    converted = []
    for (converters, column), value in zip(_converters(model, wrapper.vendor), values, strict=True):
        for convert in converters:
            value = convert(value, column, wrapper)
        converted.append(value)
    return model.from_db(wrapper.alias, [f.attname for f in fields], converted)


@cache
def _converters(model: type[Model], vendor: str) -> list[tuple[list[Any], Any]]:
    """Per column of `concrete_fields(model)`: (converters, column expression)."""
    out = []
    for field in concrete_fields(model):
        column = field.get_col(model._meta.db_table)
        converters = connection.ops.get_db_converters(column) + field.get_db_converters(connection)
        out.append((converters, column))
    return out


def run_and_thread(row: tuple) -> tuple[Run, Thread, tuple]:
    """A statement's row of run columns, then thread columns (then any others)."""
    run_fields, thread_fields = concrete_fields(Run), concrete_fields(Thread)
    split = len(run_fields)
    end = split + len(thread_fields)
    run = instance(Run, run_fields, row[:split])
    run.thread = thread = instance(Thread, thread_fields, row[split:end])
    return run, thread, row[end:]


def insert_values(obj: Model, prefix: str) -> tuple[str, str, dict[str, Any]]:
    """(columns, typed placeholders, params) to insert `obj` as the ORM would."""
    _, columns, placeholders = _insert_shape(type(obj), prefix)
    return columns, placeholders, insert_params(obj, prefix)


def insert_params(obj: Model, prefix: str) -> dict[str, Any]:
    """`obj`'s values as the ORM inserts them, one per `concrete_fields` column, named
    `{prefix}0`, `{prefix}1`, ..."""
    return save_params(obj, concrete_fields(type(obj)), prefix, adding=True)


def save_params(obj: Model, fields: Any, prefix: str, *, adding: bool) -> dict[str, Any]:
    """`fields` of `obj` as the ORM binds them when it saves `obj` (`adding`: an insert),
    named `{prefix}0`, `{prefix}1`, ...; like save(), this sets auto_now fields on `obj`."""
    wrapper = db()
    return {
        f"{prefix}{i}": f.get_db_prep_save(f.pre_save(obj, adding), wrapper)
        for i, f in enumerate(fields)
    }


@cache
def assignments(
    model: type[Model], names: tuple[str, ...], prefix: str, *, typed: bool = False
) -> tuple[tuple[Any, ...], str]:
    """The fields `names` of `model` and an UPDATE's SET list for them, `"column" =
    %({prefix}0)s, ...`, built once; `typed` casts each to its column's type (Postgres:
    a data-modifying CTE's parameters have none of their own). Bind with save_params."""
    fields = tuple(model._meta.get_field(name) for name in names)
    sets = ", ".join(
        f'"{f.column}" = %({prefix}{i})s' + (f"::{f.db_type(connection)}" if typed else "")
        for i, f in enumerate(fields)
    )
    return fields, sets


@cache
def _insert_shape(model: type[Model], prefix: str) -> tuple[tuple[Any, ...], str, str]:
    """A model's insert columns and typed placeholders, built once (Postgres only: the
    statements that use them run nowhere else)."""
    fields = tuple(model._meta.concrete_fields)
    columns = ", ".join(f'"{f.column}"' for f in fields)
    placeholders = ", ".join(
        f"%({prefix}{i})s::{f.db_type(connection)}" for i, f in enumerate(fields)
    )
    return fields, columns, placeholders
