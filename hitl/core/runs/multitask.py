"""Double-texting: a new run on a thread whose run is still in flight, as LangGraph
Server's `multitask_strategy` has it.

- reject (the default): a 409.
- interrupt: the run in flight is cancelled (its checkpoints stay) and the new one starts.
- rollback: the run in flight is cancelled and deleted, and the thread's state goes back
  to what it was before it (the new run starts from there).
- enqueue: the new run waits until the runs before it on the thread have ended.

A paused thread has no run in flight: new input supersedes its interrupts whatever the
strategy (hitl.core.runs.start). An enqueued run that finds the thread paused when its
turn comes supersedes that pause's interrupts the same way.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from hitl.core import audit
from hitl.core.db.retry import retry_transient
from hitl.core.live import stops
from hitl.core.models import Run, Thread
from hitl.core.registry import registry
from hitl.core.runs.graphs import checkpointer
from hitl.core.runs.pauses import SUPERSEDED, announce_thread, interrupts_withdraw

log = logging.getLogger(__name__)

STRATEGIES = ("reject", "interrupt", "rollback", "enqueue")
# How soon an enqueued run looks again whether its turn came.
ENQUEUE_RECHECK_SECONDS = 0.5


def _before_runs(thread: Thread, run_ids: set[str]) -> str | None:
    """The thread's latest checkpoint written by none of `run_ids` (None: there is none)."""
    config = {"configurable": {"thread_id": str(thread.pk), "checkpoint_ns": ""}}
    for item in checkpointer().list(config):
        if str((item.metadata or {}).get("hitl_run_id")) not in run_ids:
            return item.config["configurable"]["checkpoint_id"]
    return None


def runs_stop(*, thread: Thread, user, action: str, reason: str, runs: list[Run]) -> str | None:
    """Cancel `runs` (in flight on the locked `thread`); with action "rollback" also
    delete them and return the checkpoint the thread's state goes back to ("" when the
    thread had none before them: its checkpoints are deleted). The workers are told
    at once (a lease tick at the latest) and stop."""
    ids = [r.pk for r in runs]
    audit.audit_bulk(
        [
            audit.audit_event(
                kind=audit.Kind.RUN_CANCELLED,
                thread=thread,
                run=run.pk,
                actor=user,
                data={"was": run.status, "reason": reason, "action": action, "run_id": str(run.pk)},
            )
            for run in runs
        ]
    )
    stops.runs_stopped(ids)
    if action != "rollback":
        Run.objects.filter(pk__in=ids).update(
            status=Run.Status.CANCELLED, finished_at=timezone.now(), lease_owner=""
        )
        return None
    back_to = _before_runs(thread, {str(i) for i in ids})
    Run.objects.filter(pk__in=ids).delete()
    if back_to is None:
        thread_id = str(thread.pk)
        transaction.on_commit(lambda: checkpointer().delete_thread(thread_id))
        return ""
    return back_to


def state_back_to(thread: Thread, checkpoint_id: str) -> None:
    """Make the state at `checkpoint_id` the thread's latest (a copy of it, as a fork)."""
    graph = registry.get(thread.graph, checkpointer())
    config = {"configurable": {"thread_id": str(thread.pk), "checkpoint_ns": ""}}
    config["configurable"]["checkpoint_id"] = checkpoint_id
    graph.update_state(config, None, as_node="__copy__")


@retry_transient
def run_turn(run_id: Any) -> float:
    """0 when the run may start now; else the seconds after which to look again.

    Only an enqueued run ever waits: while a run created before it on its thread is in
    flight. When its turn comes on a thread left paused, the pause's interrupts are
    superseded and the thread is busy again.
    """
    queued = (
        Run.objects.filter(pk=run_id, status=Run.Status.QUEUED, multitask_strategy="enqueue")
        .values_list("thread_id", "created_at")
        .first()
    )
    if queued is None:
        return 0.0
    thread_id, created_at = queued
    earlier = Run.objects.active().filter(thread_id=thread_id, created_at__lt=created_at)
    if earlier.exists():
        # Still on its way (its task retries): the reaper must not send it again.
        Run.objects.filter(pk=run_id).update(dispatched_at=timezone.now())
        return ENQUEUE_RECHECK_SECONDS
    with transaction.atomic():
        thread = Thread.objects.select_for_update().get(pk=thread_id)
        if thread.status != Thread.Status.BUSY:
            run = Run.objects.select_related("created_by").get(pk=run_id)
            interrupts_withdraw(thread=thread, user=run.created_by, reason=SUPERSEDED)
            thread.status = Thread.Status.BUSY
            thread.save(update_fields=["status", "updated_at"])
            announce_thread(thread)
    return 0.0
