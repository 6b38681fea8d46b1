"""LangGraph Server's thread verbs that write: threads delete, prune, copy and
update_state, runs delete and cancel_many (the API view parses, then calls one of these).

Each one locks the thread, checks the same permissions as the rest of the API, writes
its audit event in the same transaction, and touches the checkpointer only for a
thread that no run is using.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.db import transaction
from django.utils import timezone

from hitl.core import audit, errors, runs
from hitl.core.access.permissions import (
    thread_list_for_user,
    user_can_cancel_thread,
    user_can_change_thread,
)
from hitl.core.live import events, listeners, stops
from hitl.core.models import AuditEvent, HumanInterrupt, Run, Thread
from hitl.core.runs.graphs import checkpointer, thread_config, thread_graph

log = logging.getLogger(__name__)


def _may_change(user, thread: Thread) -> None:
    # Staff status grants nothing here: the same rule as every other surface.
    if not user_can_change_thread(user, thread):
        raise errors.Forbidden(
            "Only the thread's requester (or a user with the hitl.run_any_thread "
            "permission) can change it."
        )


def thread_delete(*, thread: Thread, user) -> None:
    """Delete a thread, its runs, interrupts and checkpoints (its audit trail stays).

    As LangGraph Server, a busy thread's runs are cancelled with it: the worker notices
    its run is gone (told at once, a lease tick at the latest) and stops it.
    """
    _may_change(user, thread)
    thread_id = str(thread.pk)
    with transaction.atomic():
        thread = Thread.objects.select_for_update().get(pk=thread.pk)
        for run_id, status in thread.runs.active().values_list("pk", "status"):
            audit.audit_record(
                kind=AuditEvent.Kind.RUN_CANCELLED,
                thread=thread,
                run=run_id,
                actor=user,
                # The run row goes with the thread: its id stays in the data.
                data={"was": status, "reason": "thread deleted", "run_id": str(run_id)},
            )
        audit.audit_record(
            kind=AuditEvent.Kind.THREAD_DELETED,
            thread=thread,
            actor=user,
            data={"thread_id": thread_id, "title": thread.title, "graph": thread.graph},
        )
        run_ids = list(thread.runs.values_list("pk", flat=True))
        thread.delete()
        stops.runs_stopped(run_ids)
        transaction.on_commit(lambda: _delete_checkpoints(thread_id))
        # A thread created again under this id starts with an empty event log.
        transaction.on_commit(lambda: listeners.thread_forget(thread_id, run_ids))


def threads_prune(*, user, thread_ids: list[uuid.UUID]) -> int:
    """LangGraph Server's prune with strategy "delete": delete each named thread the user
    sees (one they cannot see is skipped, not counted), all of them or, when one of them
    is not theirs to delete, none (403)."""
    threads = list(thread_list_for_user(user).filter(pk__in=thread_ids))
    for thread in threads:
        _may_change(user, thread)
    with transaction.atomic():
        for thread in threads:
            thread_delete(thread=thread, user=user)
    return len(threads)


def _delete_checkpoints(thread_id: str) -> None:
    try:
        checkpointer().delete_thread(thread_id)
    except Exception:  # the rows are gone; stale checkpoints are unreachable
        log.exception("could not delete the checkpoints of thread %s", thread_id)


def thread_copy(*, thread: Thread, user) -> Thread:
    """A new thread with the same graph, metadata and checkpoint history.

    As LangGraph Server, a paused thread's copy is paused too: its pending requests are
    copied (new rows, on a run of the copy standing for the pause), answerable in the
    inbox on their own; the copied checkpoints resume with their answers.
    """
    _may_change(user, thread)
    if thread.status == Thread.Status.BUSY:
        raise errors.Conflict("The thread has a run in progress: copy it when it pauses.")
    pending = list(thread.interrupts.pending().select_related("run").order_by("created_at"))
    saver = checkpointer()
    new_id = uuid.uuid4()
    with transaction.atomic():
        copy = Thread.objects.create(
            id=new_id,
            graph=thread.graph,
            title=thread.title,
            requester=user,
            reviewer_group=thread.reviewer_group,
            metadata={**thread.metadata},
            status=Thread.Status.IDLE if thread.status != Thread.Status.DONE else thread.status,
        )
        audit.audit_record(
            kind=AuditEvent.Kind.THREAD_COPIED,
            thread=copy,
            actor=user,
            data={"source_thread_id": str(thread.pk)},
        )
        _copy_checkpoints(saver, str(thread.pk), str(new_id))
        if pending:
            _copy_pause(copy, pending, user)
    return copy


# Not copied: the copy's rows start fresh (no claims, approvals or answers yet).
_NOT_COPIED = {"id", "thread", "run", "status", "created_at", "approval_round", "approval_args"}


def _copy_pause(copy: Thread, pending: list[Any], user) -> None:
    """Give `copy` the pause of its source: a paused run and a row per pending request."""
    now = timezone.now()
    source = pending[0].run
    run = Run.objects.create(
        thread=copy,
        kind=Run.Kind.START,
        status=Run.Status.INTERRUPTED,
        input=source.input,
        metadata={**source.metadata, "copied_from_run_id": str(source.pk)},
        config=source.config,
        context=source.context,
        breakpoints=source.breakpoints,
        created_by=user if user.is_authenticated else None,
        started_at=now,
        finished_at=now,
    )
    fields = [f.name for f in HumanInterrupt._meta.concrete_fields if f.name not in _NOT_COPIED]
    rows = [
        HumanInterrupt(thread=copy, run=run, **{f: getattr(row, f) for f in fields})
        for row in pending
    ]
    HumanInterrupt.objects.bulk_create(rows)
    audit.audit_bulk(
        [
            audit.audit_event(
                kind=AuditEvent.Kind.INTERRUPT_CREATED,
                thread=copy,
                run=run,
                interrupt=row,
                actor=user,
                data={**audit.interrupt_created_data(row), "copied": True},
            )
            for row in rows
        ]
    )
    for row in rows:
        events.interrupt_changed_on_commit(row, "pending")
    copy.status = Thread.Status.INTERRUPTED
    copy.save(update_fields=["status", "updated_at"])


def _copy_checkpoints(saver, source: str, target: str) -> None:
    """Write every checkpoint (oldest first) and its pending writes under `target`."""
    tuples = list(saver.list({"configurable": {"thread_id": source}}))
    for item in reversed(tuples):
        conf = item.config["configurable"]
        parent = (item.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        config = {"configurable": {"thread_id": target, "checkpoint_ns": conf["checkpoint_ns"]}}
        if parent:
            config["configurable"]["checkpoint_id"] = parent
        checkpoint = {**item.checkpoint}
        saved = saver.put(config, checkpoint, item.metadata, checkpoint["channel_versions"])
        by_task: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in item.pending_writes or ():
            by_task.setdefault(task_id, []).append((channel, value))
        for task_id, writes in by_task.items():
            saver.put_writes(saved, writes, task_id)


def thread_update_state(
    *, thread: Thread, user, values: Any, as_node: str | None, checkpoint_id: str | None
) -> dict[str, Any] | None:
    """Write `values` into the thread's state as if `as_node` had returned them; returns
    the config of the checkpoint written.

    `values=None, as_node="__end__"` is the Agent Inbox's "mark as resolved": it withdraws
    the pending interrupts (as cancelling does) and writes no checkpoint (returns None).
    Other updates need a thread with no run in progress; on a paused thread they
    supersede its pending interrupts.
    """
    if as_node == "__end__" and values in (None, {}):
        runs.thread_cancel(thread=thread, user=user)
        return None
    _may_change(user, thread)
    errors.check_storable(values, "values")
    graph = thread_graph(thread)
    if graph is None:
        raise errors.Invalid(f"Graph {thread.graph!r} is not available.")
    if as_node is not None and (not isinstance(as_node, str) or as_node not in graph.nodes):
        nodes = ", ".join(n for n in graph.nodes if not n.startswith("__"))
        raise errors.Invalid(f"as_node must name a node of the graph ({nodes}).")
    with transaction.atomic():
        thread = Thread.objects.select_for_update().get(pk=thread.pk)
        if thread.status == Thread.Status.BUSY:
            raise errors.Conflict("The thread has a run in progress: update it when it pauses.")
        if thread.status == Thread.Status.INTERRUPTED or thread.interrupts.pending().exists():
            # As LangGraph Server: the update goes on from the pause, whose interrupts
            # are superseded (withdrawn, audited, gone live from every page).
            runs.interrupts_withdraw(thread=thread, user=user, reason=runs.SUPERSEDED)
            thread.status = Thread.Status.IDLE
            thread.save(update_fields=["status", "updated_at"])
            runs.announce_thread(thread)
        config = thread_config(thread, checkpoint_id)
        try:
            new_config = graph.update_state(config, values, as_node=as_node)
        except (ValueError, TypeError, KeyError) as exc:
            raise errors.Invalid(f"The state update was refused: {exc}") from None
        except Exception as exc:  # InvalidUpdateError and friends from the graph
            if type(exc).__name__.endswith("Error") and "langgraph" in type(exc).__module__:
                raise errors.Invalid(f"The state update was refused: {exc}") from None
            raise
        audit.audit_record(
            kind=AuditEvent.Kind.THREAD_STATE_UPDATED,
            thread=thread,
            actor=user,
            data={
                "as_node": as_node,
                "from_checkpoint_id": checkpoint_id,
                "checkpoint_id": new_config["configurable"].get("checkpoint_id"),
                "keys": sorted(values) if isinstance(values, dict) else None,
            },
        )
    return new_config


def run_delete(*, run: Run, user) -> None:
    """Delete a run that is over (its answered interrupts go with it; the audit stays).

    A run in progress, or one whose interrupts still wait on reviewers, is the thread's
    live state: it is cancelled first, not deleted.
    """
    _may_change(user, run.thread)
    with transaction.atomic():
        thread = Thread.objects.select_for_update().get(pk=run.thread_id)
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status in (Run.Status.QUEUED, Run.Status.RUNNING):
            raise errors.Conflict("The run is in progress: cancel it first.")
        if run.interrupts.pending().exists():
            raise errors.Conflict(
                "The run waits on reviewers: answer or cancel its interrupts first."
            )
        audit.audit_record(
            kind=AuditEvent.Kind.RUN_DELETED,
            thread=thread,
            actor=user,
            data={"run_id": str(run.pk), "status": run.status, "kind": run.kind},
        )
        run.delete()


BULK_CANCEL_STATUSES = {
    "pending": [Run.Status.QUEUED],
    "running": [Run.Status.RUNNING],
    "all": [Run.Status.QUEUED, Run.Status.RUNNING],
}


def runs_cancel_many(
    *, user, thread: Thread | None = None, run_ids: list[Any] | None = None, status: str = ""
) -> None:
    """Cancel the listed runs of one thread, or every queued/running run of a status.

    By ids, a run the thread does not have is a 404 and cancelling needs the same right as
    cancelling one run; by status, only the threads the user may cancel are touched.
    Runs that are already over are left as they are.
    """
    if thread is not None:
        named = list(thread.runs.filter(pk__in=run_ids or []))
        missing = {str(r) for r in run_ids or []} - {str(r.pk) for r in named}
        if missing:
            raise errors.NotFound(f"Run {sorted(missing)[0]} not found.")
        active = BULK_CANCEL_STATUSES["all"]
        if any(r.status in active or r.interrupts.pending().exists() for r in named):
            runs.thread_cancel(thread=thread, user=user)
        return
    active = Run.objects.filter(
        status__in=BULK_CANCEL_STATUSES[status], thread__in=thread_list_for_user(user)
    )
    for target in Thread.objects.filter(pk__in=active.values("thread_id")):
        if user_can_cancel_thread(user, target):
            runs.thread_cancel(thread=target, user=user)
