"""Start, resume and cancel runs: the request side of a run's life (the worker's is in
hitl/core/worker)."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from hitl import logcontext
from hitl.core import audit
from hitl.core.access.permissions import (
    user_can_cancel_thread,
    user_can_run_thread,
    user_can_view_thread,
)
from hitl.core.db import statements
from hitl.core.db.retry import retry_transient
from hitl.core.errors import Conflict, Forbidden, Invalid, NotFound, check_storable
from hitl.core.models import Run, Thread
from hitl.core.registry import registry
from hitl.core.runs import dispatch, multitask
from hitl.core.runs.pauses import SUPERSEDED, announce_thread, interrupts_withdraw

log = logging.getLogger(__name__)


def enqueue_on_commit(run: Run) -> None:
    """Send the run once the transaction commits. The caller has stamped the run's
    dispatched_at; a send that fails clears it, so the reaper re-sends it soon."""
    run_id, thread_id = run.pk, run.thread_id

    def send() -> None:
        # The task message carries these ids into the worker's log lines.
        with logcontext.bound(thread_id=thread_id, run_id=run_id):
            dispatch.enqueue_run(run_id)

    transaction.on_commit(send)


@retry_transient
def run_start(
    *,
    graph: str,
    input: Any,
    user,
    thread: Thread | None = None,
    title: str = "",
    reviewer_group: Group | None = None,
    metadata: dict[str, Any] | None = None,
    run_metadata: dict[str, Any] | None = None,
    webhook: str = "",
    checkpoint_id: str = "",
    stream_modes: list[str] | None = None,
    stream_subgraphs: bool = False,
    thread_locked: bool = False,
    run_config: dict[str, Any] | None = None,
    run_context: dict[str, Any] | None = None,
    supersede: bool = False,
    multitask_strategy: str = "reject",
    command: dict[str, Any] | None = None,
    breakpoints: dict[str, Any] | None = None,
    assistant_id: str = "",
    assistant_version: int | None = None,
) -> Run:
    """Start a run: on a new thread, or on an existing idle/done/error thread.

    A thread that has never run takes the run's graph (one created by the API first).
    With `checkpoint_id` the run goes on from that earlier checkpoint of the thread (an
    empty input continues it; an input is applied to its state), forking its history.
    `thread_locked`: the caller read `thread` with select_for_update in its own
    transaction, so it is current and is not read again. `supersede`: new input on a
    paused thread withdraws its pending interrupts (as LangGraph Server goes on from new
    input) instead of a 409. `multitask_strategy`: what a run in flight on the thread
    becomes (hitl.core.runs.multitask): reject (409), interrupt, rollback or enqueue.
    """
    if graph not in registry.targets:
        raise Invalid(f"Unknown graph {graph!r}; registered: {', '.join(registry.names())}.")
    if input is None:
        input = {}
    if not isinstance(input, dict):
        raise Invalid("Run input must be a JSON object.")
    if metadata is not None and not isinstance(metadata, dict):
        raise Invalid("Thread metadata must be a JSON object.")
    check_storable(input, "Run input")
    check_storable(metadata, "Thread metadata")
    check_storable(title, "The title")
    # Checked before the transaction: a refusal leaves a caller's transaction usable.
    # (A thread the user cannot even view stays a 404, below.)
    if (
        thread is not None
        and user_can_view_thread(user, thread)
        and not user_can_run_thread(user, thread)
    ):
        raise Forbidden(
            "Only the thread's requester (or a user with the hitl.run_any_thread "
            "permission) can start a run on it."
        )
    # No savepoint: inside a caller's transaction a failure here undoes all of it anyway.
    with transaction.atomic(savepoint=False):
        new_thread = thread is None
        if thread is None:
            thread = Thread.objects.create(
                graph=graph,
                title=(title or graph)[:200],
                requester=user if user and user.is_authenticated else None,
                reviewer_group=reviewer_group,
                metadata=metadata or {},
                status=Thread.Status.BUSY,
            )
        run = Run(
            thread=thread,
            kind=Run.Kind.START,
            input=input,
            metadata=run_metadata or {},
            webhook=webhook,
            checkpoint_id=checkpoint_id or "",
            stream_modes=stream_modes or [],
            stream_subgraphs=stream_subgraphs,
            config=run_config or {},
            context=run_context or {},
            command=command or {},
            breakpoints=breakpoints or {},
            assistant_id=assistant_id,
            assistant_version=assistant_version,
            created_by=user if user and user.is_authenticated else None,
            dispatched_at=timezone.now(),  # sent on commit; a failed send clears it
        )
        if new_thread:
            run.save(force_insert=True)
        else:
            if not thread_locked:
                thread = Thread.objects.select_for_update().get(pk=thread.pk)
                run.thread = thread
            if not user_can_view_thread(user, thread):
                raise NotFound("No such thread.")
            if supersede and thread.status == Thread.Status.INTERRUPTED:
                interrupts_withdraw(thread=thread, user=user, reason=SUPERSEDED)
            elif thread.status == Thread.Status.BUSY and multitask_strategy == "enqueue":
                run.multitask_strategy = "enqueue"
            elif thread.status == Thread.Status.BUSY and multitask_strategy in (
                "interrupt",
                "rollback",
            ):
                back_to = multitask.runs_stop(
                    thread=thread,
                    user=user,
                    action=multitask_strategy,
                    reason=f"superseded by run {run.pk} (multitask_strategy={multitask_strategy})",
                    runs=list(thread.runs.active()),
                )
                if back_to:
                    run.checkpoint_id = back_to  # the new run goes on from before them
            elif thread.status in (Thread.Status.BUSY, Thread.Status.INTERRUPTED):
                raise Conflict(
                    f"The thread is {thread.status}; answer or cancel it before starting a new run."
                )
            # A thread that has never run takes the run's graph; one that ran keeps its own.
            bound, was = thread.graph, thread.status
            thread.graph, thread.status = graph, Thread.Status.BUSY
            started = statements.run_insert_with_thread(
                run=run,
                thread=thread,
                fields=["graph", "status", "updated_at"],
                only_if_no_runs=bound != graph,
            )
            if not started:
                thread.graph, thread.status = bound, was
                raise Invalid(f"This thread runs graph {bound!r}, not {graph!r}.")
        announce_thread(thread)
        enqueue_on_commit(run)
    return run


@retry_transient
def thread_cancel(*, thread: Thread, user) -> Thread:
    """Cancel pending interrupts and in-flight runs; a running run stops at its next step."""
    with transaction.atomic():
        thread = Thread.objects.select_for_update().get(pk=thread.pk)
        if not user_can_cancel_thread(user, thread):
            raise Forbidden(
                "Only the thread's requester (or a user with the hitl.review_all or "
                "hitl.change_thread permission) can cancel it."
            )
        audit.audit_record(kind=audit.Kind.THREAD_CANCELLED, thread=thread, actor=user)
        multitask.runs_stop(
            thread=thread,
            user=user,
            action="interrupt",
            reason="thread cancelled",
            runs=list(thread.runs.active().only("pk", "status")),
        )
        interrupts_withdraw(thread=thread, user=user)
        thread.status = Thread.Status.IDLE
        thread.save(update_fields=["status", "updated_at"])
        announce_thread(thread)
    return thread
