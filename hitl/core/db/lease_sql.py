"""A run's lease as one UPDATE, the same on PostgreSQL (run_statements, inside its
statement) and SQLite (run_statements_sqlite): only reading the budget's offset from the
run's metadata is each database's own."""

from __future__ import annotations

from typing import Any

from hitl.core.models import Run, Thread


def lease_update(budget_offset: str) -> str:
    """The UPDATE (alias `x`, without RETURNING) that takes run %(run_id)s's lease.

    The lease test mirrors lease.run_lease_take's: a live lease of another worker is left
    alone. The turn test mirrors multitask.run_turn's: an enqueued run is taken here only
    when no run before it on its thread is in flight and the thread is busy already (a
    paused thread's interrupts are superseded on the caller's ORM path).
    `budget_offset` is the SQL of Run.budget_used's offset: 0 unless the metadata's
    %(retried_after)s entry is a number.
    """
    runs, threads = Run._meta.db_table, Thread._meta.db_table
    return f"""
        UPDATE "{runs}" AS x SET
            status = %(running)s, lease_owner = %(worker)s,
            lease_expires_at = %(expires)s, attempts = x.attempts + 1,
            started_at = COALESCE(x.started_at, %(now)s)
        WHERE x.id = %(run_id)s
          AND x.status IN (%(queued)s, %(running)s)
          AND x.attempts - ({budget_offset}) < %(max_attempts)s
          AND NOT (x.status = %(running)s AND x.lease_owner <> ''
                   AND x.lease_owner <> %(worker)s
                   AND x.lease_expires_at IS NOT NULL AND x.lease_expires_at > %(now)s)
          AND (x.status <> %(queued)s OR x.multitask_strategy <> %(enqueue)s OR (
              NOT EXISTS (
                  SELECT 1 FROM "{runs}" e
                  WHERE e.thread_id = x.thread_id AND e.created_at < x.created_at
                    AND e.status IN (%(queued)s, %(running)s)
              )
              AND EXISTS (
                  SELECT 1 FROM "{threads}" b WHERE b.id = x.thread_id AND b.status = %(busy)s
              )
          ))"""


def lease_params(
    *, run_id: Any, worker: str, now: Any, expires: Any, max_attempts: int, retried_after: str
) -> dict[str, Any]:
    """lease_update's parameters (`run_id`, `now` and `expires` as the database binds them)."""
    return {
        "run_id": run_id,
        "worker": worker,
        "now": now,
        "expires": expires,
        "max_attempts": max_attempts,
        "queued": Run.Status.QUEUED,
        "running": Run.Status.RUNNING,
        "enqueue": "enqueue",
        "busy": Thread.Status.BUSY,
        "retried_after": retried_after,
    }
