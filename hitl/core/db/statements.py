"""Single-statement forms of the review cycle's hottest statements, for PostgreSQL.

Each replaces several ORM statements (locks, updates, inserts, audit events) with one
data-modifying CTE that returns what its caller needs: a run's lease, a run's end, a
run's insert with its thread's change, a pause's interrupt rows with their audit
events, an answer with its audit event. Each covers the plain case only and says so
when it did nothing (None or False); the caller then takes its ORM path, which handles
every other case under lock, and which other databases always take for these writes.
The two locked reads (a wait's thread, a resume's rows) are here too, as SQL built once
rather than an ORM query compiled on every call, on every database. Measured in
bench/peers.py; the statement counts are guarded in tests/core/test_query_counts.py.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.db.backends.postgresql.base import CursorDebugWrapper
from django.db.backends.utils import CursorWrapper
from django.db.models import Model

from hitl.core.models import AuditEvent, HumanInterrupt, Run, Thread


def available() -> bool:
    return connection.vendor == "postgresql"


def _cursor():
    """A cursor for this module's statements, wrapped as Django wraps its own (database
    errors translated, queries logged and counted), that binds parameters on the server
    and prepares each statement on first use: PostgreSQL then parses and plans these
    CTEs once per session instead of on every call (about 3 ms of Postgres CPU per
    review cycle). Django's own cursors bind on the client, which never prepares, and
    stay as they are. Inside a transaction such a statement keeps its snapshot until
    the next statement or the end of the transaction: these transactions are short.
    Behind PgBouncer in transaction mode this needs its `max_prepared_statements`, as
    the checkpointer does.
    """
    if not available():
        return connection.cursor()
    import psycopg

    connection.ensure_connection()
    conn = connection.connection
    if conn.prepare_threshold is None:
        # Only server-binding cursors ever prepare, so this changes these alone.
        conn.prepare_threshold = 0
    raw = psycopg.Cursor(conn)
    if connection.queries_logged:
        return _LoggedCursor(raw, connection)
    return connection.make_cursor(raw)


class _LoggedCursor(CursorDebugWrapper):
    """Django's query log for these cursors: each statement with its values inlined, as
    Django logs its own server-bound statements (psycopg keeps no text of a prepared one)."""

    def execute(self, sql, params=None):
        with self.debug_sql(self.db.ops.compose_sql(sql, params)):
            return CursorWrapper.execute(self, sql, params)


@cache
def _fields(model: type[Model]) -> list[Any]:
    return list(model._meta.concrete_fields)


def _select(model: type[Model], alias: str) -> str:
    """The model's columns under `alias`, in `_fields` order."""
    return ", ".join(f'{alias}."{f.column}"' for f in _fields(model))


def _instance(model: type[Model], fields: list[Any], values: tuple) -> Model:
    """A model instance from raw column values, converted as the ORM converts them (the
    database backend's converters, then the field's own)."""
    converted = []
    for (converters, column), value in zip(
        _converters(model, connection.vendor), values, strict=True
    ):
        for convert in converters:
            value = convert(value, column, connection)
        converted.append(value)
    return model.from_db(connection.alias, [f.attname for f in fields], converted)


@cache
def _converters(model: type[Model], vendor: str) -> list[tuple[list[Any], Any]]:
    """Per column of `_fields(model)`: (converters, column expression)."""
    out = []
    for field in _fields(model):
        column = field.get_col(model._meta.db_table)
        converters = connection.ops.get_db_converters(column) + field.get_db_converters(connection)
        out.append((converters, column))
    return out


def _run_and_thread(row: tuple) -> tuple[Run, Thread, tuple]:
    """A statement's row of run columns, then thread columns (then any others)."""
    run_fields, thread_fields = _fields(Run), _fields(Thread)
    split = len(run_fields)
    end = split + len(thread_fields)
    run = _instance(Run, run_fields, row[:split])
    run.thread = thread = _instance(Thread, thread_fields, row[split:end])
    return run, thread, row[end:]


@cache
def _lease_sql() -> str:
    run_cols, thread_cols = _select(Run, "c"), _select(Thread, "t")
    # The lease test mirrors run_lease_take's: a live lease of another worker is left alone.
    return f"""
        WITH c AS (
            UPDATE "{Run._meta.db_table}" SET
                status = %(running)s, lease_owner = %(worker)s,
                lease_expires_at = %(expires)s, attempts = attempts + 1,
                started_at = COALESCE(started_at, %(now)s)
            WHERE id = %(run_id)s
              AND status IN (%(queued)s, %(running)s)
              AND attempts < %(max_attempts)s
              AND NOT (status = %(running)s AND lease_owner <> '' AND lease_owner <> %(worker)s
                       AND lease_expires_at IS NOT NULL AND lease_expires_at > %(now)s)
            RETURNING *
        ), audited AS (
            INSERT INTO "{AuditEvent._meta.db_table}"
                (created_at, kind, thread_id, run_id, interrupt_id, actor_id, data)
            SELECT %(now)s, %(kind)s, c.thread_id, c.id, NULL, c.created_by_id,
                   json_build_object('run_kind', c.kind, 'attempt', c.attempts,
                                      'worker', %(worker)s::text)
            FROM c
        )
        SELECT {run_cols}, {thread_cols}, c.started_at = %(now)s
        FROM c JOIN "{Thread._meta.db_table}" t ON t.id = c.thread_id
    """


def run_lease_take(
    *, run_id: Any, worker: str, now: datetime, expires: datetime, max_attempts: int
):
    """Claim a queued run, or one whose lease lapsed, in one statement on PostgreSQL;
    None otherwise (elsewhere always: the caller's locked read does it there)."""
    if not available():
        return None
    params = {
        "run_id": run_id,
        "worker": worker,
        "now": now,
        "expires": expires,
        "max_attempts": max_attempts,
        "queued": Run.Status.QUEUED,
        "running": Run.Status.RUNNING,
        "kind": AuditEvent.Kind.RUN_STARTED,
    }
    with _cursor() as cursor:
        cursor.execute(_lease_sql(), params)
        row = cursor.fetchone()
    if row is None:
        return None
    run, _, (first_lease,) = _run_and_thread(row)
    run.first_lease = first_lease
    return run


@cache
def _finish_sql(audited: bool) -> str:
    run_cols, thread_cols = _select(Run, "r"), _select(Thread, "th")
    # Thread first, then run, as every service that changes a thread locks them: `r`
    # reads `t`, so the thread's row lock is taken before the run's.
    audit = f"""
        , a AS (
            INSERT INTO "{AuditEvent._meta.db_table}"
                (created_at, kind, thread_id, run_id, interrupt_id, actor_id, data)
            SELECT %(now)s, %(kind)s, r.thread_id, r.id, NULL, NULL,
                   json_build_object('status', r.status, 'interrupts', 0,
                                      'attempt', r.attempts)
            FROM r
        )"""
    return f"""
        WITH t AS (
            SELECT id FROM "{Thread._meta.db_table}" WHERE id = %(thread_id)s FOR UPDATE
        ), r AS (
            UPDATE "{Run._meta.db_table}" SET
                status = %(status)s, result = %(result)s, finished_at = %(now)s,
                lease_owner = '', lease_expires_at = NULL
            WHERE id = %(run_id)s AND thread_id = (SELECT id FROM t)
              AND status = %(running)s AND lease_owner = %(worker)s
            RETURNING *
        ), th AS (
            UPDATE "{Thread._meta.db_table}" SET status = %(thread_status)s, updated_at = %(now)s
            WHERE id = (SELECT thread_id FROM r)
            RETURNING *
        ){audit if audited else ""}
        SELECT {run_cols}, {thread_cols} FROM r, th
    """


def run_finish_mark(
    *,
    run_id: Any,
    thread_id: Any,
    worker: str,
    status: str,
    thread_status: str,
    result: Any,
    now: datetime,
    audited: bool,
) -> tuple[Thread, Run] | None:
    """Lock the thread, then mark its run ended (and the thread's new status) in one
    statement, if the run is still this worker's; None when it was cancelled or taken
    over. With `audited` the statement also appends the run's `run.finished` event
    (for an end with no interrupt rows). Call it inside the finishing transaction."""
    params = {
        "run_id": run_id,
        "thread_id": thread_id,
        "worker": worker,
        "status": status,
        "thread_status": thread_status,
        "result": Run._meta.get_field("result").get_db_prep_value(result, connection),
        "now": now,
        "running": Run.Status.RUNNING,
        "kind": AuditEvent.Kind.RUN_FINISHED,
    }
    with _cursor() as cursor:
        cursor.execute(_finish_sql(audited), params)
        row = cursor.fetchone()
    if row is None:
        return None
    run, thread, _ = _run_and_thread(row)
    return thread, run


def lock_thread_and_run(run_id: Any, thread_id: Any = None) -> tuple[Thread | None, Run | None]:
    """Lock a run's thread, then the run.

    Thread first, like every service that changes a thread (decide, cancel, start):
    with the opposite order a finishing run and a cancel deadlock each other.
    """
    if thread_id is None:
        thread_id = Run.objects.filter(pk=run_id).values_list("thread_id", flat=True).one_or_none()
        if thread_id is None:
            return None, None
    thread = Thread.objects.select_for_update().filter(pk=thread_id).one_or_none()
    run = Run.objects.select_for_update().filter(pk=run_id, thread_id=thread_id).one_or_none()
    return thread, run


def run_end_mark(
    *,
    run_id: Any,
    thread_id: Any,
    worker: str,
    status: str,
    thread_status: str,
    result: Any,
    now: datetime,
    audited: bool,
) -> tuple[Thread, Run] | None:
    """Lock the run's thread, then the run; if the run is still `worker`'s, mark its end
    and the thread's new status (with `audited`, append its `run.finished` event too).
    None when it was cancelled or another worker took it over. One statement on
    PostgreSQL when the thread is known; the ORM's locked reads and saves elsewhere."""
    if available() and thread_id is not None:
        return run_finish_mark(
            run_id=run_id,
            thread_id=thread_id,
            worker=worker,
            status=status,
            thread_status=thread_status,
            result=result,
            now=now,
            audited=audited,
        )
    thread, run = lock_thread_and_run(run_id, thread_id)
    if thread is None or run is None or run.status != Run.Status.RUNNING:
        return None
    if run.lease_owner != worker:
        return None
    run.status, run.result, run.finished_at = status, result, now
    run.lease_owner, run.lease_expires_at = "", None
    run.save(update_fields=["status", "result", "finished_at", "lease_owner", "lease_expires_at"])
    thread.status = thread_status
    thread.save(update_fields=["status", "updated_at"])
    if audited:
        _run_finished_event(run, interrupts=0).save()
    return thread, run


def _run_finished_event(run: Run, *, interrupts: int) -> AuditEvent:
    return AuditEvent(
        kind=AuditEvent.Kind.RUN_FINISHED,
        thread_id=run.thread_id,
        run_id=run.pk,
        data={"status": run.status, "interrupts": interrupts, "attempt": run.attempts},
    )


def _insert_values(obj: Model, prefix: str) -> tuple[str, str, dict[str, Any]]:
    """(columns, typed placeholders, params) to insert `obj` as the ORM would."""
    fields = list(type(obj)._meta.concrete_fields)
    params = {
        f"{prefix}{i}": f.get_db_prep_save(f.pre_save(obj, True), connection)
        for i, f in enumerate(fields)
    }
    columns = ", ".join(f'"{f.column}"' for f in fields)
    placeholders = ", ".join(
        f"%({prefix}{i})s::{f.db_type(connection)}" for i, f in enumerate(fields)
    )
    return columns, placeholders, params


def run_insert_with_thread(
    *, run: Run, thread: Thread, fields: list[str], only_if_no_runs: bool = False
) -> bool:
    """Insert `run` and save `fields` of its thread (locked by the caller), in one
    statement on PostgreSQL. With `only_if_no_runs` nothing is written if the thread has
    a run already; returns whether the run was inserted."""
    if not available():
        if only_if_no_runs and thread.runs.exists():
            return False
        thread.save(update_fields=fields)
        run.save(force_insert=True)
        return True
    sets, params = [], {"thread_id": thread.pk}
    for i, name in enumerate(fields):
        field = Thread._meta.get_field(name)
        params[f"t{i}"] = field.get_db_prep_save(field.pre_save(thread, False), connection)
        sets.append(f'"{field.column}" = %(t{i})s')
    guard = (
        f' AND NOT EXISTS (SELECT 1 FROM "{Run._meta.db_table}" WHERE thread_id = %(thread_id)s)'
        if only_if_no_runs
        else ""
    )
    columns, placeholders, run_params = _insert_values(run, "r")
    params.update(run_params)
    sql = f"""
        WITH th AS (
            UPDATE "{Thread._meta.db_table}" SET {", ".join(sets)}
            WHERE id = %(thread_id)s{guard}
            RETURNING id
        ), r AS (
            INSERT INTO "{Run._meta.db_table}" ({columns}) SELECT {placeholders} FROM th
            RETURNING id
        )
        SELECT count(*) FROM r
    """
    with _cursor() as cursor:
        cursor.execute(sql, params)
        inserted = cursor.fetchone()[0] == 1
    if inserted:
        run._state.adding, run._state.db = False, connection.alias
        thread._state.db = connection.alias
    return inserted


def interrupts_insert(
    *, rows: list[HumanInterrupt], summaries: list[dict[str, Any]], run: Run, now: datetime
) -> set[Any]:
    """Insert a paused run's interrupt rows, skipping those an earlier attempt made, with
    an `interrupt.created` event for each new one and the run's `run.finished` event,
    in one statement on PostgreSQL (the ORM's read, bulk insert and audit elsewhere).
    Returns the ids of the rows inserted."""
    if not rows:
        return set()
    if not available():
        made = set(
            HumanInterrupt.objects.filter(
                thread_id=run.thread_id, interrupt_id__in={row.interrupt_id for row in rows}
            ).values_list("interrupt_id", "position")
        )
        new = [
            (row, summary)
            for row, summary in zip(rows, summaries, strict=True)
            if (row.interrupt_id, row.position) not in made
        ]
        HumanInterrupt.objects.bulk_create([row for row, _ in new])
        AuditEvent.objects.bulk_create(
            [
                *(
                    AuditEvent(
                        kind=AuditEvent.Kind.INTERRUPT_CREATED,
                        thread_id=run.thread_id,
                        run_id=run.pk,
                        interrupt_id=row.pk,
                        data=summary,
                    )
                    for row, summary in new
                ),
                _run_finished_event(run, interrupts=len(new)),
            ]
        )
        return {row.pk for row, _ in new}
    params: dict[str, Any] = {
        "now": now,
        "thread_id": run.thread_id,
        "run_id": run.pk,
        "status": run.status,
        "attempt": run.attempts,
        "created": AuditEvent.Kind.INTERRUPT_CREATED,
        "finished": AuditEvent.Kind.RUN_FINISHED,
        "last": len(rows),
    }
    values, summary_rows = [], []
    data_field = AuditEvent._meta.get_field("data")
    for n, (row, summary) in enumerate(zip(rows, summaries, strict=True)):
        columns, placeholders, row_params = _insert_values(row, f"i{n}_")
        params.update(row_params)
        values.append(f"({placeholders})")
        params[f"s{n}"] = data_field.get_db_prep_save(summary, connection)
        params[f"sid{n}"] = row.pk
        summary_rows.append(f"(%(sid{n})s::uuid, {n}, %(s{n})s::{data_field.db_type(connection)})")
    sql = f"""
        WITH d (id, ord, data) AS (VALUES {", ".join(summary_rows)}),
        i AS (
            INSERT INTO "{HumanInterrupt._meta.db_table}" ({columns}) VALUES {", ".join(values)}
            ON CONFLICT DO NOTHING
            RETURNING id
        ), a AS (
            INSERT INTO "{AuditEvent._meta.db_table}"
                (created_at, kind, thread_id, run_id, interrupt_id, actor_id, data)
            SELECT %(now)s, x.kind, %(thread_id)s, %(run_id)s, x.interrupt_id, NULL, x.data
            FROM (
                SELECT d.ord, %(created)s AS kind, d.id AS interrupt_id, d.data
                FROM d JOIN i ON i.id = d.id
                UNION ALL
                SELECT %(last)s, %(finished)s, NULL,
                       json_build_object('status', %(status)s::text,
                                         'interrupts', (SELECT count(*) FROM i),
                                         'attempt', %(attempt)s::int)
            ) x
            ORDER BY x.ord
        )
        SELECT id FROM i
    """
    with _cursor() as cursor:
        cursor.execute(sql, params)
        inserted = {r[0] for r in cursor.fetchall()}
    for row in rows:
        if row.pk in inserted:
            row._state.adding, row._state.db = False, connection.alias
    return inserted


@cache
def _answerable_sql(vendor: str) -> str:
    user = get_user_model()
    rows, runs = HumanInterrupt._meta.db_table, Run._meta.db_table
    return f"""
        SELECT {_select(HumanInterrupt, "hi")}, {_select(Run, "r")},
               {_select(Group, "g")}, {_select(user, "u")}
        FROM "{rows}" hi
        JOIN "{runs}" r ON r.id = hi.run_id
        LEFT JOIN "{Group._meta.db_table}" g ON g.id = hi.reviewer_group_id
        LEFT JOIN "{user._meta.db_table}" u ON u.id = hi.responded_by_id
        WHERE hi.thread_id = %(thread_id)s
          AND hi.run_id IN (
              SELECT run_id FROM "{rows}" WHERE thread_id = %(thread_id)s AND status = %(pending)s
          )
        ORDER BY hi.created_at, hi.interrupt_id, hi.position
        {"FOR UPDATE OF hi" if connection.features.has_select_for_update_of else ""}
    """


def interrupts_answerable_locked(thread_id: Any) -> list[HumanInterrupt]:
    """Every row of the thread's paused runs, locked, with its run, reviewer group and
    answerer: what `services.interrupt_rows_for_update` reads for answering, without
    building the ORM query on each call (on every database)."""
    user = get_user_model()
    models = (HumanInterrupt, Run, Group, user)
    fields = [_fields(model) for model in models]
    bounds = []
    start = 0
    for model_fields in fields:
        bounds.append((start, start + len(model_fields)))
        start += len(model_fields)
    with _cursor() as cursor:
        cursor.execute(
            _answerable_sql(connection.vendor),
            {
                "thread_id": Thread._meta.pk.get_db_prep_value(thread_id, connection),
                "pending": HumanInterrupt.Status.PENDING,
            },
        )
        found = cursor.fetchall()
    rows = []
    for values in found:
        row, run, group, answerer = (
            _instance(model, model_fields, values[a:b]) if values[a] is not None else None
            for model, model_fields, (a, b) in zip(models, fields, bounds, strict=True)
        )
        row.run, row.reviewer_group, row.responded_by = run, group, answerer
        rows.append(row)
    return rows


def save_with_audit(obj: Model, fields: list[str], event: AuditEvent) -> bool:
    """Save `fields` of `obj` (locked by the caller) and append `event`: what
    `obj.save(update_fields=fields)` then `event.save()` do, in one statement on
    PostgreSQL. Returns whether the row was there to update; the event is appended only
    then."""
    if not available():
        obj.save(update_fields=fields)  # the caller's lock keeps the row there
        event.save()
        return True
    opts = type(obj)._meta
    params: dict[str, Any] = {"pk": obj.pk}
    sets = []
    for i, name in enumerate(fields):
        field = opts.get_field(name)
        params[f"u{i}"] = field.get_db_prep_save(field.pre_save(obj, False), connection)
        sets.append(f'"{field.column}" = %(u{i})s::{field.db_type(connection)}')
    audit_fields = [f for f in AuditEvent._meta.concrete_fields if f is not AuditEvent._meta.pk]
    for i, field in enumerate(audit_fields):
        params[f"a{i}"] = field.get_db_prep_save(field.pre_save(event, True), connection)
    columns = ", ".join(f'"{f.column}"' for f in audit_fields)
    values = ", ".join(f"%(a{i})s::{f.db_type(connection)}" for i, f in enumerate(audit_fields))
    sql = f"""
        WITH u AS (
            UPDATE "{opts.db_table}" SET {", ".join(sets)} WHERE "{opts.pk.column}" = %(pk)s
            RETURNING 1
        ), a AS (
            INSERT INTO "{AuditEvent._meta.db_table}" ({columns}) SELECT {values} FROM u
            RETURNING 1
        )
        SELECT count(*) FROM a
    """
    with _cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0] == 1


@cache
def _thread_locked_sql(vendor: str) -> str:
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    return f'SELECT {_select(Thread, "t")} FROM "{Thread._meta.db_table}" t WHERE t.id = %s{lock}'


def thread_locked(thread_id: Any) -> Thread | None:
    """The thread, locked: `Thread.objects.select_for_update()…one_or_none()` without
    compiling the query on each call (on every database)."""
    with _cursor() as cursor:
        cursor.execute(
            _thread_locked_sql(connection.vendor),
            [Thread._meta.pk.get_db_prep_value(thread_id, connection)],
        )
        row = cursor.fetchone()
    return None if row is None else _instance(Thread, _fields(Thread), row)
