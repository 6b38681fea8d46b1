"""The worker side of a run: take its lease, keep it, record how it ended.

Only the worker's executor (and the tests that stand in for a worker) call these; the
request side (start, decide, cancel) is in hitl.core.runs and hitl.core.decisions.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import connection, transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from agents import contract
from hitl.core import audit
from hitl.core.access import confcache
from hitl.core.access.permissions import default_reviewer_group, group_named, group_policy
from hitl.core.db import statements
from hitl.core.db.retry import retry_transient
from hitl.core.decisions import quorum, rules
from hitl.core.live import events
from hitl.core.models import ExpiryPolicy, HumanInterrupt, Run, Thread
from hitl.core.runs.pauses import announce_thread

log = logging.getLogger(__name__)


@retry_transient
def run_lease_take(*, run_id: Any, worker: str) -> tuple[Run | None, float]:
    """Take the lease on a run. Returns (run, 0) when taken, (None, 0) when there is
    nothing to do, or (None, seconds) when another worker holds a live lease."""
    now = timezone.now()
    expires = now + timedelta(seconds=settings.HITL_RUN_LEASE_SECONDS)
    run = statements.run_lease_take(
        run_id=run_id,
        worker=worker,
        now=now,
        expires=expires,
        max_attempts=settings.HITL_RUN_MAX_ATTEMPTS,
    )
    if run is not None:
        return run, 0.0
    # Not taken in one statement (the plain case only, on PostgreSQL): the locked read
    # below takes it, or tells why not.
    with transaction.atomic():
        run = (
            Run.objects.select_for_update().select_related("thread").filter(pk=run_id).one_or_none()
        )
        if run is None or run.status in Run.TERMINAL:
            return None, 0.0
        if (
            run.status == Run.Status.RUNNING
            and run.lease_owner
            and run.lease_owner != worker
            and run.lease_expires_at
            and run.lease_expires_at > now
        ):
            return None, (run.lease_expires_at - now).total_seconds()
        exhausted = run.attempts >= settings.HITL_RUN_MAX_ATTEMPTS
        if not exhausted:
            run.status = Run.Status.RUNNING
            run.lease_owner = worker
            run.lease_expires_at = expires
            run.attempts += 1
            # Only a run never leased before can skip looking for its own checkpoints.
            run.first_lease = run.started_at is None
            run.started_at = run.started_at or now
            run.save(
                update_fields=[
                    "status",
                    "lease_owner",
                    "lease_expires_at",
                    "attempts",
                    "started_at",
                ]
            )
            audit.audit_record(
                kind=audit.Kind.RUN_STARTED,
                thread=run.thread_id,
                run=run,
                actor_id=run.created_by_id,
                data={"run_kind": run.kind, "attempt": run.attempts, "worker": worker},
            )
    if exhausted:
        # Every earlier attempt ended without an outcome (its worker was killed: out of
        # memory, the hard time limit): stop handing the run out forever. In its own
        # transaction, because run_fail locks the thread before the run.
        run_fail(
            run_id=run.pk,
            worker=run.lease_owner,
            error=f"Gave up after {run.attempts} attempts: each one ended without an outcome "
            "(its worker was killed or hit the hard time limit).",
        )
        return None, 0.0
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


def _group_for(name: str | None, thread: Thread) -> Group:
    if name:
        group = group_named(name)
        if group is not None:
            return group
        log.warning("interrupt routed to unknown reviewer group %r; using the default", name)
    return thread.reviewer_group or default_reviewer_group()


def _expiry_fields(value: Any, request: contract.Request, group: Group, now) -> dict[str, Any]:
    """When an interrupt expires and what happens then.

    The graph or tool config decides first (`expires_in`, `expiry_policy`,
    `expiry_message`, `escalate_to` next to the request); the reviewer group's
    ReviewerGroupPolicy supplies the default deadline.
    """
    spec = value
    if isinstance(value, list):
        spec = value[request.position] if request.position < len(value) else None
    spec = spec if isinstance(spec, dict) else {}
    fields: dict[str, Any] = {}
    policy = spec.get("expiry_policy")
    if policy in ExpiryPolicy.values:
        fields["expiry_policy"] = policy
    if isinstance(spec.get("expiry_message"), str):
        fields["expiry_message"] = spec["expiry_message"][:5000]
    if isinstance(spec.get("escalate_to"), str):
        fields["escalate_to"] = group_named(spec["escalate_to"])
    expires_in = request.expires_in
    if not expires_in and group is not None:
        policy = group_policy(group)
        expires_in = policy.expire_after_seconds if policy else None
    if expires_in:
        fields["expires_at"] = now + timedelta(seconds=expires_in)
    return fields


def _conditions_before_locks(
    run_id: Any, thread_id: Any, interrupts: list[tuple[str, Any, Any]]
) -> rules.Evaluated | None:
    """Evaluate the active rules' conditions on the run's new requests, unlocked.

    The rows do not exist yet: each request is read from its value as run_finish will
    store it (action, args, routed group). None when the run did not pause.
    """
    if not interrupts:
        return None
    active = rules.active_rules()
    if not any(rule.condition.strip() for rule in active):
        return rules.Evaluated(active=active)
    if thread_id is None:
        thread_id = Run.objects.filter(pk=run_id).values_list("thread_id", flat=True).first()
    thread = Thread.objects.select_related("reviewer_group").filter(pk=thread_id).first()
    if thread is None:
        return rules.Evaluated(active=active)
    requests = []
    for interrupt_id, value, schema in interrupts:
        _, found = contract.requests_for(value, schema)
        requests.extend(
            (
                interrupt_id,
                request.position,
                request.action[:200],
                request.args,
                _group_for(request.reviewer_group, thread),
            )
            for request in found
        )
    return rules.conditions_evaluate(graph=thread.graph, requests=requests)


@retry_transient
def run_finish(
    *,
    run_id: Any,
    worker: str,
    interrupts: list[tuple[str, Any, Any]],
    result: Any,
    thread_id: Any = None,
    values: Any = None,
) -> Run | None:
    """Record the end of a run: interrupted (with one row per pending request) or done.

    `values`, the state the run ended with, lets waiters answer without reading it back.
    """
    now = timezone.now()
    created: list[HumanInterrupt] = []
    # Groups, policies and rules as of now, read once for all of this run's interrupts.
    status = Run.Status.INTERRUPTED if interrupts else Run.Status.SUCCESS
    thread_status = Thread.Status.INTERRUPTED if interrupts else Thread.Status.DONE
    # Rule conditions run first, before any lock: a slow one holds no row.
    with confcache.fresh():
        evaluated = _conditions_before_locks(run_id, thread_id, interrupts)
    with confcache.fresh(), transaction.atomic():
        # Lock, check and mark the end (with nothing paused, with its audit event too).
        locked = statements.run_end_mark(
            run_id=run_id,
            thread_id=thread_id,
            worker=worker,
            status=status,
            thread_status=thread_status,
            result=result,
            now=now,
            audited=not interrupts,
        )
        if locked is None:
            return None  # cancelled, or another worker took over: its outcome counts
        thread, run = locked
        for interrupt_id, value, schema in interrupts:
            kind, requests = contract.requests_for(value, schema)
            for request in requests:
                defaults = {
                    "run": run,
                    "kind": kind,
                    "raw_value": value,
                    "response_schema": schema,
                    "action": request.action[:200],
                    "args": request.args,
                    "args_schema": request.args_schema,
                    "description": request.description,
                    "allow_accept": request.allow_accept,
                    "allow_edit": request.allow_edit,
                    "allow_respond": request.allow_respond,
                    "allow_ignore": request.allow_ignore,
                    "reviewer_group": _group_for(request.reviewer_group, thread),
                }
                defaults.update(_expiry_fields(value, request, defaults["reviewer_group"], now))
                defaults.update(
                    quorum.approval_settings(value, request.position, defaults["reviewer_group"])
                )
                created.append(
                    HumanInterrupt(
                        thread=thread,
                        interrupt_id=interrupt_id,
                        position=request.position,
                        **defaults,
                    )
                )
        # The rows, their audit events and the run's. A redelivered run finds the rows it
        # made before (the thread lock serializes attempts): they are skipped, not doubled.
        inserted = statements.interrupts_insert(
            rows=created,
            summaries=[audit.interrupt_created_data(row) for row in created],
            run=run,
            now=now,
        )
        existing = {(r.interrupt_id, r.position) for r in created if r.pk not in inserted}
        created = [row for row in created if row.pk in inserted]
        # Rules may decide some of them now (and queue the resume run).
        rules.rules_apply(thread=thread, rows=created, evaluated=evaluated)
        events.emit_run_ended(run)
        run_end = None
        # The plain case only: rows of an earlier attempt, or decided by a rule, make the
        # waiter read what is pending itself.
        pending = HumanInterrupt.Status.PENDING
        if values is not None and not existing and all(r.status == pending for r in created):
            run_end = events.run_end_summary(
                run_id=run.pk,
                status=run.status,
                values=values,
                interrupts=[(i, v) for i, v, _ in interrupts],
            )
        # Announced first after the commit: the waiting client is answered before the
        # inbox rows are rendered and notifications are queued.
        announce_thread(thread, run_end, run_ended=True)
        for row in created:
            transaction.on_commit(
                lambda row=row: events.publish_interrupt_changed(
                    thread_id=row.thread_id,
                    interrupt_id=row.pk,
                    reviewer_group_id=row.reviewer_group_id,
                    status=row.status,
                    responded_by=row.decided_by_rule,
                )
            )
    return run


@retry_transient
def run_fail(*, run_id: Any, worker: str, error: str) -> Run | None:
    """Record a failed run; the thread shows the error until a new run starts."""
    with transaction.atomic():
        thread, run = statements.lock_thread_and_run(run_id)
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
