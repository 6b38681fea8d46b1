"""Single-statement forms of the run writes of the review cycle, for PostgreSQL.

Each replaces several ORM statements (locks, updates, inserts, audit events) with one
data-modifying CTE that returns what its caller needs: a run's lease (its double-texting
turn checked with it), a run's end (with its pause's interrupt rows and every audit
event), a run's insert with its thread's change, a start on the user's own settled
thread (its lock, check and insert, outside any transaction). Each covers the plain
case only and says so when it did nothing (None, False, REROUTED); the caller then
takes its ORM path, which handles every other case under lock, and which other
databases always take for these writes. On SQLite a run's lease and end are a few
statements in one transaction instead (run_statements_sqlite).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, NamedTuple

from django.db import connection
from django.utils import timezone

from hitl.core.db import lease_sql, prepared, run_statements_sqlite
from hitl.core.models import AuditEvent, HumanInterrupt, Run, Thread


@cache
def _lease_sql(checkpoints: bool) -> str:
    """The lease's statement; with `checkpoints`, it also answers whether the thread has
    no checkpoint yet (LangGraph's table, in this database)."""
    run_cols, thread_cols = prepared.select(Run, "c"), prepared.select(Thread, "t")
    empty = (
        "NOT EXISTS (SELECT 1 FROM checkpoints k WHERE k.thread_id = c.thread_id::text)"
        if checkpoints
        else "false"
    )
    offset = """CASE WHEN jsonb_typeof(x.metadata -> %(retried_after)s) = 'number'
                     THEN (x.metadata ->> %(retried_after)s)::numeric::int ELSE 0 END"""
    return f"""
        WITH c AS ({lease_sql.lease_update(offset)}
            RETURNING x.*
        ), audited AS (
            INSERT INTO "{AuditEvent._meta.db_table}"
                (created_at, kind, thread_id, run_id, interrupt_id, actor_id, data)
            SELECT %(now)s, %(kind)s, c.thread_id, c.id, NULL, c.created_by_id,
                   json_build_object('run_kind', c.kind, 'attempt', c.attempts,
                                      'worker', %(worker)s::text)
            FROM c
        )
        SELECT {run_cols}, {thread_cols}, c.started_at = %(now)s AND c.attempts = 1, {empty}
        FROM c JOIN "{Thread._meta.db_table}" t ON t.id = c.thread_id
    """


def run_lease_take(
    *,
    run_id: Any,
    worker: str,
    now: datetime,
    expires: datetime,
    max_attempts: int,
    checkpoints: bool = False,
):
    """Claim a queued run whose turn it is, or one whose lease lapsed, in one statement on
    PostgreSQL (a few in one transaction on SQLite); None otherwise: the caller's turn
    check and locked read do it, or say why not.

    With `checkpoints` (LangGraph's checkpoint tables are in this database), the run's
    `checkpointless` says whether its thread had no checkpoint when it was claimed; it is
    False otherwise."""
    if not prepared.available():
        return run_statements_sqlite.run_lease_take(
            run_id=run_id, worker=worker, now=now, expires=expires, max_attempts=max_attempts
        )
    params = lease_sql.lease_params(
        run_id=run_id,
        worker=worker,
        now=now,
        expires=expires,
        max_attempts=max_attempts,
        retried_after=Run.RETRIED_AFTER,
    )
    params["kind"] = AuditEvent.Kind.RUN_STARTED
    with prepared.cursor() as cursor:
        cursor.execute(_lease_sql(checkpoints), params)
        row = cursor.fetchone()
    if row is None:
        return None
    run, _, (first_lease, checkpointless) = prepared.run_and_thread(row)
    run.first_lease, run.checkpointless = first_lease, checkpointless
    return run


# What run_end_record answers when the thread's reviewer group is no longer the one the
# pause's rows were routed with: nothing was written.
REROUTED = run_statements_sqlite.REROUTED


class RunEnded(NamedTuple):
    thread: Thread
    run: Run
    # The ids of the interrupt rows inserted (an earlier attempt's are skipped), in the
    # order the graph asked (HumanInterrupt.objects.in_order()).
    inserted: list[Any]


@cache
def _end_sql(rows: int) -> str:
    """run_end_record's statement for a pause of `rows` interrupt rows (0: none)."""
    run_cols, thread_cols = prepared.select(Run, "r"), prepared.select(Thread, "th")
    threads, audits = Thread._meta.db_table, AuditEvent._meta.db_table
    guard = made = created = ""
    count, inserted = "0", "NULL::uuid[]"
    if rows:
        group_type = Thread._meta.get_field("reviewer_group").db_type(connection)
        guard = (
            f" AND (SELECT reviewer_group_id FROM t) IS NOT DISTINCT FROM %(group)s::{group_type}"
        )
        fields = prepared.concrete_fields(HumanInterrupt)
        columns = ", ".join(f'"{f.column}"' for f in fields)
        values = ", ".join(
            "("
            + ", ".join(f"%(i{n}_{j})s::{f.db_type(connection)}" for j, f in enumerate(fields))
            + ")"
            for n in range(rows)
        )
        data_type = AuditEvent._meta.get_field("data").db_type(connection)
        summaries = ", ".join(
            f"(%(sid{n})s::uuid, {n}, %(s{n})s::{data_type})" for n in range(rows)
        )
        # An earlier attempt's rows (the thread lock serializes attempts) are skipped.
        made = f"""
        , d (id, ord, data) AS (VALUES {summaries})
        , i AS (
            INSERT INTO "{HumanInterrupt._meta.db_table}" ({columns})
            SELECT * FROM (VALUES {values}) v WHERE EXISTS (SELECT 1 FROM r)
            ON CONFLICT DO NOTHING
            RETURNING id, created_at, interrupt_id, position
        )"""
        created = """
                SELECT d.ord, %(created)s, d.id, d.data FROM d JOIN i ON i.id = d.id
                UNION ALL"""
        count = "(SELECT count(*) FROM i)"
        inserted = "ARRAY(SELECT id FROM i ORDER BY created_at, interrupt_id, position)"
    # Thread first, then run, as every service that changes a thread locks them: `r`
    # reads `t`, so the thread's row lock is taken before the run's.
    return f"""
        WITH t AS (
            SELECT id, reviewer_group_id FROM "{threads}" WHERE id = %(thread_id)s FOR UPDATE
        ), r AS (
            UPDATE "{Run._meta.db_table}" SET
                status = %(status)s, result = %(result)s, finished_at = %(now)s,
                lease_owner = '', lease_expires_at = NULL
            WHERE id = %(run_id)s AND thread_id = (SELECT id FROM t)
              AND status = %(running)s AND lease_owner = %(worker)s{guard}
            RETURNING *
        ), th AS (
            UPDATE "{threads}" SET status = %(thread_status)s, updated_at = %(now)s
            WHERE id = (SELECT thread_id FROM r)
            RETURNING *
        ){made}, a AS (
            INSERT INTO "{audits}"
                (created_at, kind, thread_id, run_id, interrupt_id, actor_id, data)
            SELECT %(now)s, x.kind, r.thread_id, r.id, x.interrupt_id, NULL, x.data
            FROM r, ({created}
                SELECT {rows}, %(finished)s, NULL::uuid,
                       json_build_object('status', r.status, 'interrupts', {count},
                                         'attempt', r.attempts)
                FROM r
            ) x (ord, kind, interrupt_id, data)
            ORDER BY x.ord
        )
        SELECT {run_cols}, {thread_cols}, r.id IS NOT NULL, t.reviewer_group_id, {inserted}
        FROM t LEFT JOIN r ON TRUE LEFT JOIN th ON TRUE
    """


@dataclass(frozen=True)
class RunEnding:
    """How a run ended, for run_end_record: the run's and its thread's new status."""

    run_id: Any
    thread_id: Any
    worker: str
    status: str
    thread_status: str
    result: Any
    now: datetime


def run_end_record(
    end: RunEnding,
    *,
    rows: Sequence[HumanInterrupt] = (),
    summaries: Sequence[dict[str, Any]] = (),
    group_id: int | None = None,
) -> RunEnded | str | None:
    """Record a run's end: lock its thread, then the run; if the run is still the
    worker's, mark its end and the thread's new status, insert its pause's interrupt
    `rows` (those an earlier attempt made are skipped) with an `interrupt.created` event
    each (data: `summaries`), and append the run's `run.finished` event.

    One statement on PostgreSQL, committed on its own outside a transaction; one per
    table in one transaction on SQLite (run_statements_sqlite). None when the run was
    cancelled or another worker took it over. `rows` were routed with the thread's
    reviewer group `group_id`: when the thread has another one now, nothing is written
    and REROUTED is returned (route them again with the thread locked).
    """
    rows, summaries = list(rows), list(summaries)
    if not prepared.available():
        return _end_record_sqlite(end, rows=rows, summaries=summaries, group_id=group_id)
    params: dict[str, Any] = {
        "run_id": end.run_id,
        "thread_id": end.thread_id,
        "worker": end.worker,
        "status": end.status,
        "thread_status": end.thread_status,
        "result": Run._meta.get_field("result").get_db_prep_value(end.result, connection),
        "now": end.now,
        "running": Run.Status.RUNNING,
        "finished": AuditEvent.Kind.RUN_FINISHED,
    }
    if rows:
        params["group"] = group_id
        params["created"] = AuditEvent.Kind.INTERRUPT_CREATED
        data_field = AuditEvent._meta.get_field("data")
        wrapper = prepared.db()
        for n, (row, summary) in enumerate(zip(rows, summaries, strict=True)):
            params.update(prepared.insert_params(row, f"i{n}_"))
            params[f"sid{n}"] = row.pk
            params[f"s{n}"] = data_field.get_db_prep_save(summary, wrapper)
    with prepared.cursor() as cursor:
        cursor.execute(_end_sql(len(rows)), params)
        found = cursor.fetchone()
    if found is None:
        return None  # no such thread
    ended, group_now, inserted = found[-3:]
    if not ended:
        return REROUTED if rows and group_now != group_id else None
    run, thread, _ = prepared.run_and_thread(found)
    inserted = list(inserted or ())
    made = set(inserted)
    for row in rows:
        if row.pk in made:
            row._state.adding, row._state.db = False, connection.alias
    return RunEnded(thread, run, inserted)


def _end_record_sqlite(
    end: RunEnding,
    *,
    rows: list[HumanInterrupt],
    summaries: list[dict[str, Any]],
    group_id: int | None,
) -> RunEnded | str | None:
    ended = run_statements_sqlite.run_end_record(
        end, rows=rows, summaries=summaries, group_id=group_id
    )
    if ended is None or ended == REROUTED:
        return ended
    thread, run, new = ended
    for row in new:
        row._state.adding, row._state.db = False, connection.alias
    # in_order(): by pause (created_at), then interrupt id, then request.
    order = sorted(new, key=lambda r: (r.created_at, r.interrupt_id, r.position))
    return RunEnded(thread, run, [row.pk for row in order])


def run_insert_part(
    run: Run, thread: Thread, fields: list[str], only_if_no_runs: bool
) -> tuple[str, dict[str, Any]]:
    """The CTEs `th` (the thread's change) and `r` (the run's insert, when `th` changed
    a row) of run_insert_with_thread, with their parameters."""
    changed, sets = prepared.assignments(Thread, tuple(fields), "t")
    params = {"thread_id": thread.pk, **prepared.save_params(thread, changed, "t", adding=False)}
    guard = (
        f' AND NOT EXISTS (SELECT 1 FROM "{Run._meta.db_table}" WHERE thread_id = %(thread_id)s)'
        if only_if_no_runs
        else ""
    )
    columns, placeholders, run_params = prepared.insert_values(run, "r")
    params.update(run_params)
    sql = f"""th AS (
            UPDATE "{Thread._meta.db_table}" SET {sets}
            WHERE id = %(thread_id)s{guard}
            RETURNING id
        ), r AS (
            INSERT INTO "{Run._meta.db_table}" ({columns}) SELECT {placeholders} FROM th
            RETURNING id
        )"""
    return sql, params


def run_inserted(run: Run, thread: Thread) -> None:
    run._state.adding, run._state.db = False, connection.alias
    thread._state.db = connection.alias


def run_insert_with_thread(
    *, run: Run, thread: Thread, fields: list[str], only_if_no_runs: bool = False
) -> bool:
    """Insert `run` and save `fields` of its thread (locked by the caller), in one
    statement on PostgreSQL. With `only_if_no_runs` nothing is written if the thread has
    a run already; returns whether the run was inserted."""
    if not prepared.available():
        inserted = run_statements_sqlite.run_insert_with_thread(
            run=run, thread=thread, fields=fields, only_if_no_runs=only_if_no_runs
        )
        if inserted:
            run_inserted(run, thread)
        return inserted
    part, params = run_insert_part(run, thread, fields, only_if_no_runs)
    with prepared.cursor() as cursor:
        cursor.execute(f"WITH {part} SELECT count(*) FROM r", params)
        inserted = cursor.fetchone()[0] == 1
    if inserted:
        run_inserted(run, thread)
    return inserted


def run_start_settled(*, run: Run, user_id: Any, thread_id: Any, graph: str) -> Thread | None:
    """Start `run` on the user's own settled thread in one statement on PostgreSQL:
    mark the thread busy on `graph` and insert the run, if the thread is the user's,
    neither busy nor paused, and on `graph` or yet to run anything. Returns the thread
    as changed, or None when any of that does not hold (or on another database): the
    caller then takes run_start's path, which handles every case under lock.

    Outside a transaction the statement commits on its own (no BEGIN and COMMIT
    around it): a fault during it leaves its commit in doubt, so the exception says so
    (`may_have_committed`, read by retry.met_while_committing).
    """
    if not prepared.available():
        return None
    now = timezone.now()
    params: dict[str, Any] = {
        "thread_id": Thread._meta.pk.get_db_prep_value(thread_id, connection),
        "user_id": user_id,
        "graph": graph,
        "busy": Thread.Status.BUSY,
        "interrupted": Thread.Status.INTERRUPTED,
        "now": now,
    }
    columns, placeholders, run_params = prepared.insert_values(run, "r")
    params.update(run_params)
    returned = ", ".join(f'"{f.column}"' for f in prepared.concrete_fields(Thread))
    sql = f"""
        WITH th AS (
            UPDATE "{Thread._meta.db_table}"
            SET "graph" = %(graph)s, "status" = %(busy)s, "updated_at" = %(now)s
            WHERE id = %(thread_id)s AND requester_id = %(user_id)s
              AND status NOT IN (%(busy)s, %(interrupted)s)
              AND (graph = %(graph)s OR NOT EXISTS (
                  SELECT 1 FROM "{Run._meta.db_table}" WHERE thread_id = %(thread_id)s
              ))
            RETURNING {returned}
        ), r AS (
            INSERT INTO "{Run._meta.db_table}" ({columns}) SELECT {placeholders} FROM th
            RETURNING id
        )
        SELECT {returned} FROM th
    """
    alone = not connection.in_atomic_block
    try:
        with prepared.cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
    except Exception as exc:
        if alone:
            exc.may_have_committed = True
        raise
    if row is None:
        return None
    thread = prepared.instance(Thread, prepared.concrete_fields(Thread), row)
    run.thread = thread
    run._state.adding, run._state.db = False, connection.alias
    return thread
