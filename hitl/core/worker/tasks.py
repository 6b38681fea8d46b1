"""Celery's side of the worker: tasks that carry ids only and call the engine.

The names predate the layout; queued messages and routes use them.
"""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.db import close_old_connections, connection

from hitl.core import decisions
from hitl.core.runs.dispatch import worker_id
from hitl.core.worker.execute import execute_run


def _keep_connection_unless_failed() -> None:
    """Keep this worker process's database connection from one run to the next.

    Handing it back to the pool after every run and taking it again costs a health
    check round trip per run. A connection that saw an error goes back (the pool
    checks it); one the server dropped since is found by the run's first statement,
    the claim, which retries on a fresh connection (retry_transient).
    """
    if connection.connection is not None and connection.errors_occurred:
        connection.close()


@shared_task(
    # The name predates the layout; queued messages and routes use it.
    name="hitl.tasks.run_execute",
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=None,
    # The engine ends a run at HITL_RUN_TIME_LIMIT itself (its error on the thread, the
    # process's other runs untouched). Celery's limits only apply to the prefork pool
    # and are a backstop there, after the engine's.
    time_limit=settings.HITL_RUN_TIME_LIMIT + 30,
    soft_time_limit=settings.HITL_RUN_TIME_LIMIT + 10,
)
def run_execute(self, run_id: str) -> str:
    """Execute a run on a Celery worker (ids only, JSON)."""
    _keep_connection_unless_failed()
    outcome, retry_after = execute_run(run_id, worker=worker_id())
    if retry_after:
        # Another worker holds a live lease (look again once it could have expired), or
        # the database was away. If the broker is away too, the reaper re-sends it.
        countdown = min(retry_after + (1 if outcome == "busy" else 0), 60)
        raise self.retry(countdown=countdown)
    return outcome


@shared_task(name="hitl.tasks.interrupt_release", ignore_result=True, time_limit=60)
def interrupt_release(interrupt_id: str) -> None:
    """End a decision's grace period: resume the thread unless it was undone (ids only)."""
    close_old_connections()
    decisions.interrupt_release(interrupt_id=interrupt_id)
