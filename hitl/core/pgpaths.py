"""Single-statement forms of the worker's hottest state changes, for PostgreSQL.

Each replaces a transaction of several ORM statements (BEGIN, lock, update, audit
insert, COMMIT) with one statement in autocommit: a data-modifying CTE updates the
row, appends its audit event and returns what the caller needs. Each covers only the
plain case and returns None otherwise; the caller then takes its ORM path, which
handles every other case under lock. Other databases always take the ORM path.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any

from django.db import connection
from django.db.models import Model

from hitl.core.models import AuditEvent, Run, Thread


def available() -> bool:
    return connection.vendor == "postgresql"


@cache
def _columns(model: type[Model], alias: str) -> tuple[list[Any], str]:
    fields = list(model._meta.concrete_fields)
    return fields, ", ".join(f'{alias}."{f.column}"' for f in fields)


def _instance(model: type[Model], fields: list[Any], values: tuple) -> Model:
    """A model instance from raw column values, converted as the ORM converts them."""
    converted = [
        f.from_db_value(v, None, connection) if v is not None and hasattr(f, "from_db_value") else v
        for f, v in zip(fields, values, strict=True)
    ]
    return model.from_db(connection.alias, [f.attname for f in fields], converted)


@cache
def _claim_sql() -> str:
    _, run_cols = _columns(Run, "c")
    _, thread_cols = _columns(Thread, "t")
    # The lease test mirrors run_claim's: a live lease of another worker is left alone.
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
                   jsonb_build_object('run_kind', c.kind, 'attempt', c.attempts,
                                      'worker', %(worker)s::text)
            FROM c
        )
        SELECT {run_cols}, {thread_cols}, c.started_at = %(now)s
        FROM c JOIN "{Thread._meta.db_table}" t ON t.id = c.thread_id
    """


def run_claim(*, run_id: Any, worker: str, now: datetime, expires: datetime, max_attempts: int):
    """Claim a queued run, or one whose lease lapsed, in one statement; None otherwise."""
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
    with connection.cursor() as cursor:
        cursor.execute(_claim_sql(), params)
        row = cursor.fetchone()
    if row is None:
        return None
    run_fields, _ = _columns(Run, "c")
    thread_fields, _ = _columns(Thread, "t")
    split = len(run_fields)
    run = _instance(Run, run_fields, row[:split])
    run.thread = _instance(Thread, thread_fields, row[split : split + len(thread_fields)])
    run.first_claim = row[-1]
    return run
