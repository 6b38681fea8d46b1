"""An answer's statements: the locked read of a resume's rows (SQL built once, on every
database; on PostgreSQL also with its thread's, in one statement), and an answer saved
with its audit event (and the resume run it completes) in one statement on PostgreSQL,
the ORM's saves elsewhere.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.db.models import Model

from hitl.core.db import locked_reads, prepared, run_statements, run_statements_sqlite
from hitl.core.models import AuditEvent, HumanInterrupt, Run, Thread

# The order a resume answers a thread's rows in.
_ORDER = ("hi.created_at", "hi.interrupt_id", "hi.position")


def _answerable_query(columns: str) -> str:
    """The rows of the thread's paused runs with their run, reviewer group and answerer,
    after `columns`; neither ordered nor locked."""
    user = get_user_model()
    rows, runs = HumanInterrupt._meta.db_table, Run._meta.db_table
    return f"""
        SELECT {columns}{prepared.select(HumanInterrupt, "hi")}, {prepared.select(Run, "r")},
               {prepared.select(Group, "g")}, {prepared.select(user, "u")}
        FROM "{rows}" hi
        JOIN "{runs}" r ON r.id = hi.run_id
        LEFT JOIN "{Group._meta.db_table}" g ON g.id = hi.reviewer_group_id
        LEFT JOIN "{user._meta.db_table}" u ON u.id = hi.responded_by_id
        WHERE hi.thread_id = %(thread_id)s
          AND hi.run_id IN (
              SELECT run_id FROM "{rows}" WHERE thread_id = %(thread_id)s AND status = %(pending)s
          )"""


@cache
def _answerable_sql(vendor: str) -> str:
    lock = " FOR UPDATE OF hi" if connection.features.has_select_for_update_of else ""
    return f"{_answerable_query('')} ORDER BY {', '.join(_ORDER)}{lock}"


@cache
def _thread_and_answerable_sql(vendor: str) -> str:
    """The thread locked, then its answerable rows locked, in one statement (PostgreSQL):
    `t` is read (and locked) before any row, as every service that changes a thread locks
    them. One row per answerable row, after the thread's columns; one with the thread's
    and NULLs when there is none; none when there is no such thread. The rows' order
    columns (`_ORDER`, as o0, o1, ...) come between the two."""
    order = "".join(f"{column} AS o{i}, " for i, column in enumerate(_ORDER))
    outer_order = ", ".join(f"answerable.o{i}" for i in range(len(_ORDER)))
    return f"""
        WITH t AS MATERIALIZED (
            SELECT {prepared.select(Thread, "t")} FROM "{Thread._meta.db_table}" t
            WHERE t.id = %(thread_id)s FOR UPDATE
        ), answerable AS MATERIALIZED (
            {_answerable_query(order)} AND EXISTS (SELECT 1 FROM t)
            FOR UPDATE OF hi
        )
        SELECT t.*, answerable.* FROM t LEFT JOIN answerable ON true
        ORDER BY {outer_order}
    """


def _answerable_rows(found: list[tuple]) -> list[HumanInterrupt]:
    """Rows of HumanInterrupt, Run, Group and user columns, as instances."""
    models = (HumanInterrupt, Run, Group, get_user_model())
    fields = [prepared.concrete_fields(model) for model in models]
    bounds = []
    start = 0
    for model_fields in fields:
        bounds.append((start, start + len(model_fields)))
        start += len(model_fields)
    rows = []
    for values in found:
        row, run, group, answerer = (
            prepared.instance(model, model_fields, values[a:b]) if values[a] is not None else None
            for model, model_fields, (a, b) in zip(models, fields, bounds, strict=True)
        )
        row.run, row.reviewer_group, row.responded_by = run, group, answerer
        rows.append(row)
    return rows


def _answerable_params(thread_id: Any) -> dict[str, Any]:
    return {
        "thread_id": Thread._meta.pk.get_db_prep_value(thread_id, connection),
        "pending": HumanInterrupt.Status.PENDING,
    }


def interrupts_answerable_locked(thread_id: Any) -> list[HumanInterrupt]:
    """Every row of the thread's paused runs, locked, with its run, reviewer group and
    answerer: what `services.interrupt_rows_for_update` reads for answering, without
    building the ORM query on each call (on every database)."""
    with prepared.cursor() as cursor:
        cursor.execute(_answerable_sql(connection.vendor), _answerable_params(thread_id))
        return _answerable_rows(cursor.fetchall())


def thread_and_answerable_locked(
    thread_id: Any,
) -> tuple[Thread | None, list[HumanInterrupt] | None]:
    """The thread locked (`locked_reads.thread_locked`) and, on PostgreSQL, its
    answerable rows locked too (`interrupts_answerable_locked`), in one statement: a
    resume needs both. Elsewhere the rows are None (read them when needed)."""
    if not prepared.available():
        return locked_reads.thread_locked(thread_id), None
    thread_fields = prepared.concrete_fields(Thread)
    split = len(thread_fields)
    with prepared.cursor() as cursor:
        cursor.execute(_thread_and_answerable_sql(connection.vendor), _answerable_params(thread_id))
        found = cursor.fetchall()
    if not found:
        return None, []
    thread = prepared.instance(Thread, thread_fields, found[0][:split])
    if found[0][split] is None:  # the thread alone: no answerable row
        return thread, []
    return thread, _answerable_rows([values[split + len(_ORDER) :] for values in found])


def _save_with_audit_part(
    obj: Model, fields: list[str], event: AuditEvent
) -> tuple[str, dict[str, Any]]:
    """The CTEs `u` (the row's update) and `a` (the event's insert, when `u` updated a
    row) of save_with_audit, with their parameters."""
    sql, updated, audit_fields = _save_with_audit_sql(type(obj), tuple(fields))
    return sql, {
        "pk": obj.pk,
        **prepared.save_params(obj, updated, "u", adding=False),
        **prepared.save_params(event, audit_fields, "a", adding=True),
    }


@cache
def _save_with_audit_sql(
    model: type[Model], fields: tuple[str, ...]
) -> tuple[str, tuple[Any, ...], tuple[Any, ...]]:
    """_save_with_audit_part's SQL for `fields` of `model`, built once, with the fields
    whose parameters it takes."""
    opts = model._meta
    updated, sets = prepared.assignments(model, fields, "u", typed=True)
    audit_fields = tuple(
        f for f in AuditEvent._meta.concrete_fields if f is not AuditEvent._meta.pk
    )
    columns = ", ".join(f'"{f.column}"' for f in audit_fields)
    values = ", ".join(f"%(a{i})s::{f.db_type(connection)}" for i, f in enumerate(audit_fields))
    sql = f"""u AS (
            UPDATE "{opts.db_table}" SET {sets} WHERE "{opts.pk.column}" = %(pk)s
            RETURNING 1
        ), a AS (
            INSERT INTO "{AuditEvent._meta.db_table}" ({columns}) SELECT {values} FROM u
            RETURNING 1
        )"""
    return sql, updated, audit_fields


def save_with_audit(obj: Model, fields: list[str], event: AuditEvent) -> bool:
    """Save `fields` of `obj` (locked by the caller) and append `event`: what
    `obj.save(update_fields=fields)` then `event.save()` do, in one statement on
    PostgreSQL. Returns whether the row was there to update; the event is appended only
    then."""
    if not prepared.available():
        return run_statements_sqlite.save_with_audit(obj, fields, event)
    part, params = _save_with_audit_part(obj, fields, event)
    with prepared.cursor() as cursor:
        cursor.execute(f"WITH {part} SELECT count(*) FROM a", params)
        return cursor.fetchone()[0] == 1


def save_with_audit_and_run(
    *,
    obj: Model,
    fields: list[str],
    event: AuditEvent,
    run: Run,
    thread: Thread,
    thread_fields: list[str],
) -> bool:
    """`save_with_audit(obj, fields, event)` then `run_statements.run_insert_with_thread(run=run,
    thread=thread, fields=thread_fields)` (both locked by the caller): an answer and the
    resume run it completes, in one statement on PostgreSQL. Returns whether the run
    was inserted."""
    if not prepared.available():
        save_with_audit(obj, fields, event)
        return run_statements.run_insert_with_thread(run=run, thread=thread, fields=thread_fields)
    saved, params = _save_with_audit_part(obj, fields, event)
    inserted, run_params = run_statements.run_insert_part(run, thread, thread_fields, False)
    params.update(run_params)
    with prepared.cursor() as cursor:
        cursor.execute(f"WITH {saved}, {inserted} SELECT count(*) FROM r", params)
        done = cursor.fetchone()[0] == 1
    if done:
        run_statements.run_inserted(run, thread)
    return done
