"""Operator state changes: retry, reassign, expire, escalate, requeue.

Same rules as hitl.core.decisions and hitl.core.runs: lock, mutate, audit, announce after commit. Automatic
answers on expiry are recorded by hitl.core.decisions.answer_record, the very
path a reviewer's answer takes.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from agents import contract
from hitl.core import audit
from hitl.core.db.locked_reads import lock_thread_and_run
from hitl.core.decisions.answer import (
    Reply,
    answer_record,
    interrupt_thread_id,
    request_of,
    resume_when_answered,
)
from hitl.core.errors import Conflict, Forbidden, Invalid, NotFound
from hitl.core.live import events
from hitl.core.models import ExpiryPolicy, HumanInterrupt, ReviewerGroupPolicy, Run, Thread
from hitl.core.runs.options import Locked
from hitl.core.runs.pauses import announce_thread
from hitl.core.runs.start import enqueue_on_commit

log = logging.getLogger(__name__)

DEFAULT_EXPIRY_MESSAGE = "No reviewer answered before the deadline."


def _require_operator(user, perm: str) -> None:
    # None is the system (periodic sweeps). People need the model's change permission,
    # the one admin asks for these actions; staff status alone grants nothing.
    if user is not None and not (user.is_authenticated and user.has_perm(perm)):
        raise Forbidden(f"Only admins with the {perm} permission can do this.")


def _uuid(value: Any, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise NotFound(f"No such {what}.") from None


# --- runs -----------------------------------------------------------------------------


def run_retry(*, run_id: Any, user) -> Run:
    """Retry a failed run from its last checkpoint.

    The same run row is queued again: the executor recognises its own checkpoints
    (metadata hitl_run_id) and continues from the last one instead of starting over.
    """
    _require_operator(user, "hitl.change_run")
    run_id = _uuid(run_id, "run")
    with transaction.atomic():
        thread, run = lock_thread_and_run(run_id)
        if run is None or thread is None:
            raise NotFound("No such run.")
        if run.status != Run.Status.ERROR:
            raise Conflict(f"Only failed runs can be retried; this run is {run.status}.")
        latest = thread.runs.order_by("-created_at").values_list("pk", flat=True).first()
        if latest != run.pk:
            raise Conflict("A newer run exists on this thread; only its latest run can be retried.")
        if thread.status in (Thread.Status.BUSY, Thread.Status.INTERRUPTED):
            raise Conflict(f"The thread is {thread.status}; it cannot be retried now.")
        previous_error, previous_attempts = run.error, run.attempts
        run.status = Run.Status.QUEUED
        # A fresh attempt budget (HITL_RUN_MAX_ATTEMPTS) while attempts go on counting
        # ("attempt 2"), and its time starts when a worker takes it again, not back when
        # the failed attempt started.
        run.metadata = {**(run.metadata or {}), Run.RETRIED_AFTER: previous_attempts}
        run.started_at = None
        run.error = ""
        run.finished_at = None
        run.lease_owner = ""
        run.lease_expires_at = None
        run.dispatched_at = timezone.now()  # sent on commit; a failed send clears it
        run.save(
            update_fields=[
                "status",
                "metadata",
                "started_at",
                "error",
                "finished_at",
                "lease_owner",
                "lease_expires_at",
                "dispatched_at",
            ]
        )
        thread.status = Thread.Status.BUSY
        thread.save(update_fields=["status", "updated_at"])
        audit.audit_record(
            kind=audit.Kind.RUN_RETRIED,
            thread=thread,
            run=run,
            actor=user,
            data={
                "reason": "retried by an admin",
                "run_kind": run.kind,
                "previous_attempts": previous_attempts,
                "previous_error": audit.error_summary(previous_error),
            },
        )
        announce_thread(thread)
        enqueue_on_commit(run)
    return run


def run_requeue(*, run_id: Any, now: datetime | None = None) -> Run | None:
    """Queue a running run again whose lease expired (its worker died or stalled).

    A stalled worker that wakes up loses its heartbeat and stops at its next step,
    so only the next claimant records the outcome.
    """
    now = now or timezone.now()
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id).one_or_none()
        if (
            run is None
            or run.status != Run.Status.RUNNING
            or run.lease_expires_at is None
            or run.lease_expires_at > now
        ):
            return None
        previous_owner = run.lease_owner
        run.status = Run.Status.QUEUED
        run.lease_owner = ""
        run.lease_expires_at = None
        run.dispatched_at = timezone.now()  # sent on commit; a failed send clears it
        run.save(update_fields=["status", "lease_owner", "lease_expires_at", "dispatched_at"])
        audit.audit_record(
            kind=audit.Kind.RUN_RETRIED,
            thread=run.thread_id,
            run=run,
            data={
                "reason": "lease expired",
                "run_kind": run.kind,
                "attempt": run.attempts,
                "previous_owner": previous_owner,
            },
        )
        enqueue_on_commit(run)
    log.warning("run %s requeued: the lease of %s expired", run.pk, previous_owner)
    return run


def run_redispatch(*, run_id: Any, stale_before: datetime) -> bool:
    """Send a queued run to the broker again when its message was never sent or was lost."""
    with transaction.atomic():
        run = Run.objects.select_for_update(skip_locked=True).filter(pk=run_id).one_or_none()
        if run is None or run.status != Run.Status.QUEUED:
            return False
        if run.dispatched_at is not None and run.dispatched_at > stale_before:
            return False
        # Stamped now; a send that fails again clears the stamp (dispatch.enqueue_run),
        # so it is retried on the next sweep. A duplicate message is harmless: the
        # run's lease lets exactly one claim execute it.
        Run.objects.filter(pk=run.pk).update(dispatched_at=timezone.now())
        enqueue_on_commit(run)
    log.warning("run %s re-sent to the broker", run.pk)
    return True


# --- interrupts -----------------------------------------------------------------------


def _lock_pending(interrupt_id: Any) -> tuple[Thread, HumanInterrupt]:
    """Lock the thread, then the interrupt (the order interrupt_resolve uses)."""
    interrupt_id = _uuid(interrupt_id, "interrupt")
    thread_id = interrupt_thread_id(interrupt_id)
    if thread_id is None:
        raise NotFound("No such interrupt.")
    thread = Thread.objects.select_for_update().get(pk=thread_id)
    row = (
        HumanInterrupt.objects.select_for_update(of=("self",))
        .select_related("reviewer_group", "escalate_to")
        .get(pk=interrupt_id)
    )
    if row.status != HumanInterrupt.Status.PENDING:
        raise Conflict(f"This interrupt is {row.status}.")
    return thread, row


def _deadline_for(group: Group | None, now: datetime) -> datetime | None:
    policy = ReviewerGroupPolicy.objects.filter(group=group).first() if group else None
    if policy and policy.expire_after_seconds:
        return now + timedelta(seconds=policy.expire_after_seconds)
    return None


def interrupt_reassign(
    *, interrupt_id: Any, group: Group, user, reason: str = ""
) -> HumanInterrupt:
    """Route a pending interrupt to another reviewer group."""
    _require_operator(user, "hitl.change_humaninterrupt")
    if group is None:
        raise Invalid("Choose a reviewer group.")
    with transaction.atomic():
        thread, row = _lock_pending(interrupt_id)
        if row.reviewer_group_id == group.pk:
            return row
        previous = row.reviewer_group
        row.reviewer_group = group
        row.save(update_fields=["reviewer_group"])
        audit.audit_record(
            kind=audit.Kind.INTERRUPT_ASSIGNED,
            thread=thread,
            run=row.run_id,
            interrupt=row,
            actor=user,
            data={
                "from": audit.group_name(previous),
                "to": group.name,
                "reason": reason or "reassigned by an admin",
            },
        )
        events.interrupt_changed_on_commit(
            row, "reassigned", reviewer_group_id=previous.pk if previous else None
        )
        events.interrupt_changed_on_commit(row, "pending", reviewer_group_id=group.pk)
    return row


def _effective_policy(row: HumanInterrupt) -> tuple[str, str, Group | None]:
    """The interrupt's own expiry settings, falling back to its group's policy."""
    group_policy = (
        ReviewerGroupPolicy.objects.select_related("escalate_to")
        .filter(group_id=row.reviewer_group_id)
        .first()
        if row.reviewer_group_id
        else None
    )
    policy = row.expiry_policy or (group_policy.expiry_policy if group_policy else "")
    message = row.expiry_message or (group_policy.expiry_message if group_policy else "")
    target = row.escalate_to or (group_policy.escalate_to if group_policy else None)
    return policy or ExpiryPolicy.IGNORE, message or DEFAULT_EXPIRY_MESSAGE, target


def _escalate(
    thread: Thread, row: HumanInterrupt, target: Group, user, now: datetime
) -> HumanInterrupt:
    previous = row.reviewer_group
    row.reviewer_group = target
    row.escalation_count += 1
    # From here on the new group's policy applies; this also ends A -> B -> A loops
    # once HITL_MAX_ESCALATIONS is reached.
    row.expiry_policy = ""
    row.escalate_to = None
    row.expires_at = _deadline_for(target, now)
    row.save(
        update_fields=[
            "reviewer_group",
            "escalation_count",
            "expiry_policy",
            "escalate_to",
            "expires_at",
        ]
    )
    notice = (
        f"Nobody in {audit.group_name(previous) or 'the assigned group'} answered in time; "
        f"escalated to {target.name}."
    )
    audit.audit_record(
        kind=audit.Kind.INTERRUPT_ESCALATED,
        thread=thread,
        run=row.run_id,
        interrupt=row,
        actor=user,
        data={
            "from": audit.group_name(previous),
            "to": target.name,
            "escalation_count": row.escalation_count,
            "expires_at": row.expires_at,
            "notice": notice,
        },
    )
    events.interrupt_changed_on_commit(
        row, "escalated", reviewer_group_id=previous.pk if previous else None
    )
    events.interrupt_changed_on_commit(row, "pending", reviewer_group_id=target.pk)
    thread_id, pk = thread.pk, row.pk
    transaction.on_commit(
        lambda: events.publish_thread_event(
            thread_id,
            {
                "type": "CUSTOM",
                "name": "interrupt_escalated",
                "value": {"interrupt_id": str(pk), "to": target.name, "notice": notice},
                "timestamp": int(now.timestamp() * 1000),
            },
        )
    )
    return row


def _auto_answer(
    thread: Thread, row: HumanInterrupt, response_type: str, message: str, user, now: datetime
) -> bool:
    """Answer an expired interrupt like a reviewer would; False when it does not fit."""
    args = message if response_type == HumanInterrupt.ResponseType.RESPONSE else None
    try:
        normalized = contract.check_response(request_of(row), response_type, args)
    except contract.ContractError:
        return False
    try:
        # A savepoint: when the graph's response_schema refuses the automatic answer,
        # only this attempt is undone and the caller tries the next outcome.
        # Its announcement is made on commit, so a refused attempt announces nothing.
        with transaction.atomic():
            answer_record(
                locked=Locked(thread, row),
                reply=Reply(response_type=response_type, args=normalized),
                expired_by=user,
                at=now,
            )
    except Invalid:
        row.status = HumanInterrupt.Status.PENDING
        row.response_type, row.response_args, row.responded_at = "", None, None
        return False
    return True


def interrupt_expire(
    *, interrupt_id: Any, user=None, now: datetime | None = None
) -> HumanInterrupt:
    """Apply the expiry policy to a pending interrupt: auto-ignore, auto-respond or escalate.

    The system calls it when expires_at passes; an admin may call it any time.
    """
    _require_operator(user, "hitl.change_humaninterrupt")
    now = now or timezone.now()
    with transaction.atomic():
        thread, row = _lock_pending(interrupt_id)
        policy, message, target = _effective_policy(row)
        can_escalate = (
            target is not None
            and target.pk != row.reviewer_group_id
            and row.escalation_count < settings.HITL_MAX_ESCALATIONS
        )
        if policy == ExpiryPolicy.ESCALATE and can_escalate:
            return _escalate(thread, row, target, user, now)
        order = ["response", "ignore"] if policy == ExpiryPolicy.RESPOND else ["ignore", "response"]
        for response_type in order:
            if _auto_answer(thread, row, response_type, message, user, now):
                return row
        if can_escalate:
            return _escalate(thread, row, target, user, now)
        # Nothing automatic fits this interrupt: close it unanswered, for the record.
        row.status = HumanInterrupt.Status.EXPIRED
        row.responded_at = now
        row.save(update_fields=["status", "responded_at"])
        audit.audit_record(
            kind=audit.Kind.INTERRUPT_EXPIRED,
            thread=thread,
            run=row.run_id,
            interrupt=row,
            actor=user,
            data={
                "proposed": {"action": row.action, "args": row.args},
                "reason": "no automatic answer fits this interrupt",
            },
        )
        events.interrupt_changed_on_commit(row, row.status)
        # Answers already given to sibling interrupts still reach the graph.
        resume_when_answered(locked=Locked(thread, row), user=None)
    return row


__all__ = [
    "interrupt_expire",
    "interrupt_reassign",
    "run_redispatch",
    "run_requeue",
    "run_retry",
]
