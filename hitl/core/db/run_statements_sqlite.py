"""run_statements' lease, start and end of a run, and answer_statements' answer with
its audit event, on SQLite: a few statements in one transaction, without the ORM.

SQLite has no data-modifying CTE, so what PostgreSQL does in one statement takes one
per table here; RETURNING hands back the rows changed, so nothing is read first.
`BEGIN IMMEDIATE` (settings: transaction_mode) takes the database's write lock for the
whole transaction, so no row is locked and the order of the tables does not matter.
The conditions are run_statements' own; when they do not hold (nothing written), the
caller takes its ORM path, which says why. Measured in docs/benchmarks.md ("The
embedded cycle"); the statement counts are guarded in tests/test_embedded.py.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any

from django.db import transaction

from hitl.core.db import lease_sql, prepared
from hitl.core.db.locked_reads import thread_locked
from hitl.core.models import AuditEvent, HumanInterrupt, Run, Thread

# Rows per INSERT of a pause's interrupts: well inside SQLite's limit on bound values.
_ROWS_PER_INSERT = 50

# run_end_record's answer when the thread's reviewer group changed (run_statements.REROUTED).
REROUTED = "rerouted"


def _columns(model) -> str:
    return ", ".join(f'"{f.column}"' for f in prepared.concrete_fields(model))


def _prep(model, name: str, value: Any) -> Any:
    """`value` as the ORM binds it for `model`'s field `name`."""
    return model._meta.get_field(name).get_db_prep_save(value, prepared.db())


@cache
def _lease_sql() -> str:
    # Only an integer offset counts (Run.budget_used); anything else leaves the run to
    # the ORM path.
    offset = """CASE WHEN json_type(x.metadata, %(retried_after)s) = 'integer'
                     THEN json_extract(x.metadata, %(retried_after)s) ELSE 0 END"""
    return f"{lease_sql.lease_update(offset)}\n        RETURNING {_columns(Run)}"


@cache
def _audit_sql(events: int) -> str:
    values = ", ".join(
        f"(%(now)s, %(k{n})s, %(thread_id)s, %(run_id)s, %(i{n})s, %(a{n})s, %(d{n})s)"
        for n in range(events)
    )
    return (
        f'INSERT INTO "{AuditEvent._meta.db_table}" '
        f"(created_at, kind, thread_id, run_id, interrupt_id, actor_id, data) VALUES {values}"
    )


def _audit(cursor, run: Run, now: datetime, events: list[tuple[str, Any, Any, dict]]) -> None:
    """Append `events` (kind, interrupt id, actor id, data) about `run`, in one INSERT."""
    params = {
        "now": _prep(AuditEvent, "created_at", now),
        "thread_id": _prep(AuditEvent, "thread", run.thread_id),
        "run_id": _prep(AuditEvent, "run", run.pk),
    }
    for n, (kind, interrupt_id, actor_id, data) in enumerate(events):
        params[f"k{n}"] = kind
        params[f"i{n}"] = _prep(AuditEvent, "interrupt", interrupt_id)
        params[f"a{n}"] = actor_id
        params[f"d{n}"] = _prep(AuditEvent, "data", data)
    cursor.execute(_audit_sql(len(events)), params)


def run_lease_take(
    *, run_id: Any, worker: str, now: datetime, expires: datetime, max_attempts: int
) -> Run | None:
    """run_statements.run_lease_take on SQLite: the run's lease, its thread read and its
    `run.started` event, in one transaction; None when the conditions do not hold."""
    params = lease_sql.lease_params(
        run_id=_prep(Run, "id", run_id),
        worker=worker,
        now=_prep(Run, "started_at", now),
        expires=_prep(Run, "lease_expires_at", expires),
        max_attempts=max_attempts,
        retried_after=f'$."{Run.RETRIED_AFTER}"',
    )
    with transaction.atomic():
        with prepared.cursor() as cursor:
            cursor.execute(_lease_sql(), params)
            row = cursor.fetchone()
            if row is None:
                return None
            run = prepared.instance(Run, prepared.concrete_fields(Run), row)
            data = {"run_kind": run.kind, "attempt": run.attempts, "worker": worker}
            _audit(cursor, run, now, [(AuditEvent.Kind.RUN_STARTED, None, run.created_by_id, data)])
        run.thread = thread_locked(run.thread_id)
    run.first_lease = run.attempts == 1 and run.started_at == now
    return run


@cache
def _end_sql(guarded: bool) -> str:
    """The run's end: still running under the worker's lease (and, `guarded`, its
    thread's reviewer group still the one its pause's rows were routed with)."""
    guard = (
        f' AND (SELECT reviewer_group_id FROM "{Thread._meta.db_table}"'
        " WHERE id = %(thread_id)s) IS %(group)s"
        if guarded
        else ""
    )
    return f"""
        UPDATE "{Run._meta.db_table}" SET
            status = %(status)s, result = %(result)s, finished_at = %(now)s,
            lease_owner = '', lease_expires_at = NULL
        WHERE id = %(run_id)s AND thread_id = %(thread_id)s
          AND status = %(running)s AND lease_owner = %(worker)s{guard}
        RETURNING {_columns(Run)}
    """


@cache
def _thread_sql() -> str:
    return f"""
        UPDATE "{Thread._meta.db_table}" SET status = %s, updated_at = %s WHERE id = %s
        RETURNING {_columns(Thread)}
    """


@cache
def _interrupts_sql(rows: int) -> str:
    fields = prepared.concrete_fields(HumanInterrupt)
    values = ", ".join(
        "(" + ", ".join(f"%(i{n}_{j})s" for j in range(len(fields))) + ")" for n in range(rows)
    )
    # An earlier attempt's rows are skipped.
    return (
        f'INSERT INTO "{HumanInterrupt._meta.db_table}" ({_columns(HumanInterrupt)}) '
        f"VALUES {values} ON CONFLICT (thread_id, interrupt_id, position) DO NOTHING "
        "RETURNING id"
    )


def _insert_interrupts(cursor, rows: list[HumanInterrupt]) -> set[Any]:
    """Insert the pause's `rows`; the ids (as bound) of those inserted."""
    made: set[Any] = set()
    for start in range(0, len(rows), _ROWS_PER_INSERT):
        chunk = rows[start : start + _ROWS_PER_INSERT]
        params: dict[str, Any] = {}
        for n, row in enumerate(chunk):
            params.update(prepared.insert_params(row, f"i{n}_"))
        cursor.execute(_interrupts_sql(len(chunk)), params)
        made.update(found for (found,) in cursor.fetchall())
    return made


def run_end_record(
    end, *, rows: list[HumanInterrupt], summaries: list[dict[str, Any]], group_id: int | None
) -> tuple[Thread, Run, list[HumanInterrupt]] | str | None:
    """run_statements.run_end_record on SQLite, in one transaction: (thread, run, the
    rows inserted in the order given), None or REROUTED."""
    thread_id = _prep(Run, "thread", end.thread_id)
    params: dict[str, Any] = {
        "run_id": _prep(Run, "id", end.run_id),
        "thread_id": thread_id,
        "worker": end.worker,
        "status": end.status,
        "result": _prep(Run, "result", end.result),
        "now": _prep(Run, "finished_at", end.now),
        "running": Run.Status.RUNNING,
        "group": group_id,
    }
    with transaction.atomic(savepoint=False), prepared.cursor() as cursor:
        cursor.execute(_end_sql(bool(rows)), params)
        found = cursor.fetchone()
        if found is None:
            if not rows:
                return None
            cursor.execute(
                f'SELECT reviewer_group_id FROM "{Thread._meta.db_table}" WHERE id = %s',
                [thread_id],
            )
            group = cursor.fetchone()
            return REROUTED if group is not None and group[0] != group_id else None
        run = prepared.instance(Run, prepared.concrete_fields(Run), found)
        cursor.execute(
            _thread_sql(),
            [end.thread_status, _prep(Thread, "updated_at", end.now), thread_id],
        )
        thread = prepared.instance(Thread, prepared.concrete_fields(Thread), cursor.fetchone())
        made = _insert_interrupts(cursor, rows) if rows else set()
        new = [
            (row, summary)
            for row, summary in zip(rows, summaries, strict=True)
            if _prep(HumanInterrupt, "id", row.pk) in made
        ]
        finished = {"status": run.status, "interrupts": len(new), "attempt": run.attempts}
        _audit(
            cursor,
            run,
            end.now,
            [
                *((AuditEvent.Kind.INTERRUPT_CREATED, row.pk, None, s) for row, s in new),
                (AuditEvent.Kind.RUN_FINISHED, None, None, finished),
            ],
        )
    return thread, run, [row for row, _ in new]


@cache
def _update_sql(model, fields: tuple[str, ...], guard: str = "") -> str:
    _, sets = prepared.assignments(model, fields, "u")
    where = f'"{model._meta.pk.column}" = %(pk)s{guard}'
    return f'UPDATE "{model._meta.db_table}" SET {sets} WHERE {where}'


def _update_params(obj, fields: tuple[str, ...]) -> dict[str, Any]:
    """`fields` of `obj` as `obj.save(update_fields=fields)` binds them (auto_now set)."""
    changed, _ = prepared.assignments(type(obj), fields, "u")
    return {
        "pk": _prep(type(obj), obj._meta.pk.name, obj.pk),
        **prepared.save_params(obj, changed, "u", adding=False),
    }


@cache
def _insert_sql(model) -> tuple[str, tuple[Any, ...]]:
    """An INSERT of one `model` row, its primary key left out when the database numbers
    it; with the fields it binds, in order."""
    fields = tuple(
        f for f in prepared.concrete_fields(model) if not (f.primary_key and f.db_returning)
    )
    columns = ", ".join(f'"{f.column}"' for f in fields)
    values = ", ".join(f"%(v{i})s" for i in range(len(fields)))
    return f'INSERT INTO "{model._meta.db_table}" ({columns}) VALUES ({values})', fields


def _insert(cursor, obj) -> None:
    sql, fields = _insert_sql(type(obj))
    cursor.execute(sql, prepared.save_params(obj, fields, "v", adding=True))


def run_insert_with_thread(
    *, run: Run, thread: Thread, fields: list[str], only_if_no_runs: bool
) -> bool:
    """run_statements.run_insert_with_thread on SQLite: the thread's UPDATE (none when
    `only_if_no_runs` and it has a run), then the run's INSERT."""
    guard = (
        f' AND NOT EXISTS (SELECT 1 FROM "{Run._meta.db_table}" WHERE thread_id = %(pk)s)'
        if only_if_no_runs
        else ""
    )
    with transaction.atomic(savepoint=False), prepared.cursor() as cursor:
        cursor.execute(
            _update_sql(Thread, tuple(fields), guard), _update_params(thread, tuple(fields))
        )
        if cursor.rowcount != 1:
            return False
        _insert(cursor, run)
    return True


def save_with_audit(obj, fields: list[str], event: AuditEvent) -> bool:
    """answer_statements.save_with_audit on SQLite: the row's UPDATE, then the event's
    INSERT when there was a row."""
    with transaction.atomic(savepoint=False), prepared.cursor() as cursor:
        cursor.execute(_update_sql(type(obj), tuple(fields)), _update_params(obj, tuple(fields)))
        if cursor.rowcount != 1:
            return False
        _insert(cursor, event)
    return True
