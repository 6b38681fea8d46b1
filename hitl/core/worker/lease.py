"""The worker side of a run: take its lease, keep it, give it back, record its failure.

A run's end (a pause becoming review items) is recorded in hitl.core.worker.pauses_record.

Only the worker's executor (and the tests that stand in for a worker) call these; the
request side (start, decide, cancel) is in hitl.core.runs and hitl.core.decisions.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from hitl.core import audit
from hitl.core.db import locked_reads, run_statements
from hitl.core.db.retry import retry_transient
from hitl.core.live import events
from hitl.core.models import Run, Thread
from hitl.core.runs import multitask
from hitl.core.runs.pauses import announce_thread

log = logging.getLogger(__name__)


@retry_transient
def run_lease_take(
    *, run_id: Any, worker: str, checkpoints: bool = False
) -> tuple[Run | None, float]:
    """Take the lease on a run whose turn it is. Returns (run, 0) when taken, (None, 0)
    when there is nothing to do, or (None, seconds) when another worker holds a live
    lease or an enqueued run waits for the runs before it on its thread (double-texting:
    multitask.run_turn). `checkpoints`: see run_statements.run_lease_take."""
    now = timezone.now()
    expires = now + timedelta(seconds=settings.HITL_RUN_LEASE_SECONDS)
    run = run_statements.run_lease_take(
        run_id=run_id,
        worker=worker,
        now=now,
        expires=expires,
        max_attempts=settings.HITL_RUN_MAX_ATTEMPTS,
        checkpoints=checkpoints,
    )
    if run is not None:
        return run, 0.0
    # Not taken in one statement (the plain case only, on PostgreSQL, its turn checked
    # with it): the locked read below takes it, or tells why not. An enqueued run's turn
    # is checked first (multitask.run_turn, which supersedes a paused thread's interrupts
    # when it comes): it locks the thread, which is never locked after the run.
    run, wait = _lease_locked(
        run_id=run_id, worker=worker, now=now, expires=expires, turn_checked=False
    )
    if run is _TURN:
        wait = multitask.run_turn(run_id)
        if wait:
            return None, wait
        run, wait = _lease_locked(
            run_id=run_id, worker=worker, now=now, expires=expires, turn_checked=True
        )
    if wait < 0:
        # Every earlier attempt ended without an outcome (its worker was killed: out of
        # memory, the hard time limit): stop handing the run out forever. In its own
        # transaction, because run_fail locks the thread before the run.
        run_fail(
            run_id=run.pk,
            worker=run.lease_owner,
            error=f"Gave up after {run.budget_used} attempts: each one ended without an outcome "
            "(its worker was killed or hit the hard time limit).",
        )
        return None, 0.0
    return run, wait


# What _lease_locked answers for an enqueued run whose turn was not checked yet.
_TURN: Any = object()


def _lease_locked(
    *, run_id: Any, worker: str, now: datetime, expires: datetime, turn_checked: bool
) -> tuple[Any, float]:
    """run_lease_take's locked read: (run, 0) when taken, (None, 0) or (None, seconds)
    when not, (_TURN, 0) for an enqueued run whose turn is to be checked first, and
    (run, -1) for a run out of attempts (untouched)."""
    with transaction.atomic():
        run = locked_reads.run_with_thread_locked(run_id)
        if run is None or run.status in Run.TERMINAL:
            return None, 0.0
        if (
            not turn_checked
            and run.status == Run.Status.QUEUED
            and run.multitask_strategy == "enqueue"
        ):
            return _TURN, 0.0
        if (
            run.status == Run.Status.RUNNING
            and run.lease_owner
            and run.lease_owner != worker
            and run.lease_expires_at
            and run.lease_expires_at > now
        ):
            return None, (run.lease_expires_at - now).total_seconds()
        if run.budget_used >= settings.HITL_RUN_MAX_ATTEMPTS:
            return run, -1.0
        run.status = Run.Status.RUNNING
        run.lease_owner = worker
        run.lease_expires_at = expires
        # Only a run never leased before can skip looking for its own checkpoints (a
        # retried one starts its clock again but has attempts behind it).
        run.first_lease = run.started_at is None and run.attempts == 0
        run.attempts += 1
        run.started_at = run.started_at or now
        run.save(
            update_fields=["status", "lease_owner", "lease_expires_at", "attempts", "started_at"]
        )
        audit.audit_record(
            kind=audit.Kind.RUN_STARTED,
            thread=run.thread_id,
            run=run,
            actor_id=run.created_by_id,
            data={"run_kind": run.kind, "attempt": run.attempts, "worker": worker},
        )
    return run, 0.0


def run_release(*, run_id: Any, worker: str) -> bool:
    """Give a leased run back to the queue after an infrastructure fault, without
    spending its attempt: the fault was the database's or Redis's, not the graph's."""
    return bool(
        Run.objects.filter(pk=run_id, status=Run.Status.RUNNING, lease_owner=worker).update(
            status=Run.Status.QUEUED,
            lease_owner="",
            lease_expires_at=None,
            attempts=Greatest(F("attempts") - 1, 0),
            dispatched_at=timezone.now(),  # the task's own retry is on its way
        )
    )


def run_heartbeat(*, run_id: Any, worker: str) -> bool:
    """Extend the lease; False when the run was cancelled or taken over."""
    expires = timezone.now() + timedelta(seconds=settings.HITL_RUN_LEASE_SECONDS)
    return bool(
        Run.objects.filter(pk=run_id, status=Run.Status.RUNNING, lease_owner=worker).update(
            lease_expires_at=expires
        )
    )


def leases_keep(*, owners: dict[str, list[Any]], renew: bool) -> set[str]:
    """The runs of `owners` ({worker: [run ids]}) still running under their lease, in
    one statement for all of them; with `renew`, their leases are extended too.

    A run missing from the answer was cancelled, finished or taken over.
    """
    if not owners:
        return set()
    table = connection.ops.quote_name(Run._meta.db_table)
    pk = Run._meta.pk
    where, params = [], []
    for worker, ids in owners.items():
        where.append(f"(lease_owner = %s AND id IN ({', '.join(['%s'] * len(ids))}))")
        params += [worker, *(pk.get_db_prep_value(pk.to_python(i), connection) for i in ids)]
    condition = f"status = %s AND ({' OR '.join(where)})"
    if renew:
        expires = timezone.now() + timedelta(seconds=settings.HITL_RUN_LEASE_SECONDS)
        sql = f"UPDATE {table} SET lease_expires_at = %s WHERE {condition} RETURNING id"
        params = [
            Run._meta.get_field("lease_expires_at").get_db_prep_value(expires, connection),
            Run.Status.RUNNING,
            *params,
        ]
    else:
        sql = f"SELECT id FROM {table} WHERE {condition}"
        params = [Run.Status.RUNNING, *params]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {str(pk.to_python(row[0])) for row in cursor.fetchall()}


def run_is_current(*, run_id: Any, worker: str) -> bool:
    return Run.objects.filter(pk=run_id, status=Run.Status.RUNNING, lease_owner=worker).exists()


@retry_transient
def run_fail(*, run_id: Any, worker: str, error: str) -> Run | None:
    """Record a failed run; the thread shows the error until a new run starts."""
    with transaction.atomic():
        thread, run = locked_reads.lock_thread_and_run(run_id)
        if (
            thread is None
            or run is None
            or run.status in Run.TERMINAL
            or (run.lease_owner and run.lease_owner != worker)
        ):
            return None
        run.status = Run.Status.ERROR
        run.error = error[:10_000]
        run.finished_at = timezone.now()
        run.lease_owner = ""
        run.lease_expires_at = None
        run.save(
            update_fields=["status", "error", "finished_at", "lease_owner", "lease_expires_at"]
        )
        audit.audit_record(
            kind=audit.Kind.RUN_FAILED,
            thread=run.thread_id,
            run=run,
            data={"error": audit.error_summary(error), "attempt": run.attempts},
        )
        thread.status = Thread.Status.ERROR
        thread.save(update_fields=["status", "updated_at"])
        events.emit_run_ended(run)
        announce_thread(thread, run_ended=True)
    return run
