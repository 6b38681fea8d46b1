"""Record a run's end: a pause becomes HumanInterrupt rows, the review items.

The most important write of the system: one row per pending request of each LangGraph
interrupt (routed, with its expiry and four-eyes settings), rules deciding what they
may, the run and thread marked, all in one transaction; or, with nothing paused, the
run's result. Only the worker's executor (and tests standing in for it) call it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from agents import contract
from hitl.core import audit
from hitl.core.access import confcache
from hitl.core.access.permissions import (
    default_reviewer_group,
    group_named,
    group_policy,
    group_with_id,
)
from hitl.core.db import locked_reads, run_statements
from hitl.core.db.retry import retry_transient
from hitl.core.decisions import quorum, rules
from hitl.core.live import events
from hitl.core.models import ExpiryPolicy, HumanInterrupt, Run, Thread
from hitl.core.runs.pauses import announce_thread

log = logging.getLogger(__name__)


def _group_for(name: str | None, thread: Thread) -> Group:
    if name:
        group = group_named(name)
        if group is not None:
            return group
        log.warning("interrupt routed to unknown reviewer group %r; using the default", name)
    if thread.reviewer_group_id is not None:
        # A copy, not the thread's relation: that is read again for every pause.
        group = group_with_id(thread.reviewer_group_id)
        if group is not None:
            return group
    return default_reviewer_group()


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


def _rows_for(
    thread: Thread, run_id: Any, interrupts: list[tuple[str, Any, Any]], now
) -> list[HumanInterrupt]:
    """One HumanInterrupt row per pending request of the run's interrupts, routed (with
    its expiry and four-eyes settings) as of now and the thread's reviewer group."""
    rows = []
    for interrupt_id, value, schema in interrupts:
        kind, requests = contract.requests_for(value, schema)
        for request in requests:
            defaults = {
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
            rows.append(
                HumanInterrupt(
                    thread=thread,
                    run_id=run_id,
                    interrupt_id=interrupt_id,
                    position=request.position,
                    **defaults,
                )
            )
    return rows


def _end_record(
    thread: Thread, end: run_statements.RunEnding, interrupts: list[tuple[str, Any, Any]]
) -> tuple[run_statements.RunEnded | str | None, list[HumanInterrupt]]:
    """Route the pause's rows with `thread` and record the end (run_statements.run_end_record)."""
    rows = _rows_for(thread, end.run_id, interrupts, end.now)
    ended = run_statements.run_end_record(
        dataclasses.replace(end, thread_id=thread.pk),
        rows=rows,
        summaries=[audit.interrupt_created_data(row) for row in rows],
        group_id=thread.reviewer_group_id,
    )
    return ended, rows


@retry_transient
def run_finish(
    *,
    run_id: Any,
    worker: str,
    interrupts: list[tuple[str, Any, Any]],
    result: Any,
    thread_id: Any = None,
    values: Any = None,
    leased: Run | None = None,
) -> Run | None:
    """Record the end of a run: interrupted (with one row per pending request) or done.

    `values`, the state the run ended with, lets waiters answer without reading it back.
    `leased` is the run as run_lease_take returned it (its thread as of then): its rows are
    routed with that thread, without reading it again. The returned run carries
    `interrupt_rows`: its rows in order when this call made every one of them and all are
    pending (None otherwise: read them).
    """
    now = timezone.now()
    status = Run.Status.INTERRUPTED if interrupts else Run.Status.SUCCESS
    thread_status = Thread.Status.INTERRUPTED if interrupts else Thread.Status.DONE
    if leased is not None:
        thread_id = leased.thread_id
    end = run_statements.RunEnding(
        run_id=run_id,
        thread_id=thread_id,
        worker=worker,
        status=status,
        thread_status=thread_status,
        result=result,
        now=now,
    )
    # Groups, policies and rules as of now (one look at the configuration's generation),
    # read once for all of this run's interrupts.
    with confcache.fresh(), contextlib.ExitStack() as block:
        # Rule conditions run first, before any lock: a slow one holds no row.
        evaluated = _conditions_before_locks(run_id, thread_id, interrupts)
        # With no rule to apply and no webhook delivery to record along with it (a
        # run_ended subscriber, hitl.ops.webhooks), the end is one statement on
        # PostgreSQL, committed on its own: no transaction around it.
        alone = (
            leased is not None
            and not leased.webhook
            and not (evaluated is not None and evaluated.active)
        )
        if not alone:
            block.enter_context(transaction.atomic())
        thread = leased.thread if leased is not None else _thread_of(run_id, thread_id)
        if thread is None:
            return None
        ended, rows = _end_record(thread, end, interrupts)
        if ended is run_statements.REROUTED:
            # The thread's reviewer group changed while the run ran: route again, locked.
            with transaction.atomic():
                thread = locked_reads.thread_locked(thread.pk)
                if thread is None:
                    return None
                ended, rows = _end_record(thread, end, interrupts)
        if ended is None or ended is run_statements.REROUTED:
            return None  # cancelled, or another worker took over: its outcome counts
        thread, run, inserted = ended
        made = set(inserted)
        existing = {(r.interrupt_id, r.position) for r in rows if r.pk not in made}
        created = [row for row in rows if row.pk in made]
        for row in created:
            row.thread, row.run = thread, run
        # Rules may decide some of them now (and queue the resume run).
        rules.rules_apply(thread=thread, rows=created, evaluated=evaluated)
        events.emit_run_ended(run)
        run_end = None
        # The plain case only: rows of an earlier attempt, or decided by a rule, make the
        # waiter (and the AG-UI stream's end) read what is pending itself.
        pending = HumanInterrupt.Status.PENDING
        plain = not existing and all(r.status == pending for r in created)
        by_pk = {row.pk: row for row in created}
        run.interrupt_rows = [by_pk[pk] for pk in inserted] if plain else None
        if values is not None and plain:
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
            events.interrupt_changed_on_commit(row, row.status, responded_by=row.decided_by_rule)
    return run


def _thread_of(run_id: Any, thread_id: Any) -> Thread | None:
    """The run's thread, unlocked: its rows are routed with it, and the end is recorded
    only if its reviewer group is still the same (else routed again, locked)."""
    if thread_id is not None:
        return Thread.objects.filter(pk=thread_id).first()
    return Thread.objects.filter(runs__pk=run_id).first()
