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
from hitl.core.db import prepared, run_statements
from hitl.core.db.retry import retry_transient
from hitl.core.errors import Conflict, Forbidden, Invalid, NotFound, check_storable
from hitl.core.models import Run, Thread
from hitl.core.registry import registry
from hitl.core.runs import dispatch, multitask
from hitl.core.runs.graphs import thread_graph_check
from hitl.core.runs.options import Locked, RunOptions
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


def _start_input(graph: str, input: Any) -> dict[str, Any]:
    """A start's graph and input, checked: a registered graph, a storable JSON object."""
    if graph not in registry.targets:
        raise Invalid(f"Unknown graph {graph!r}; registered: {', '.join(registry.names())}.")
    if input is None:
        input = {}
    if not isinstance(input, dict):
        raise Invalid("Run input must be a JSON object.")
    check_storable(input, "Run input")
    return input


def _new_start(*, thread: Thread | None, input: dict[str, Any], user, options: RunOptions) -> Run:
    return Run(
        thread=thread,
        kind=Run.Kind.START,
        input=input,
        **options.start_fields(),
        created_by=user if user and user.is_authenticated else None,
        dispatched_at=timezone.now(),  # sent on commit; a failed send clears it
    )


def run_start_settled(
    *, graph: str, input: Any, user, thread_id: Any, options: RunOptions
) -> Run | None:
    """Start a run on the user's own thread when it is neither busy nor paused and is on
    `graph` (or has yet to run): what run_start does then, in one statement on
    PostgreSQL. None when that is not the case (or on another database): the caller
    then calls run_start with the thread locked, which handles every case.

    Outside a transaction the statement commits alone; a fault during it is a fault at
    a commit (see retry.met_while_committing).
    """
    input = _start_input(graph, input)
    if not (user and user.is_authenticated and prepared.available()):
        return None
    run = _new_start(thread=None, input=input, user=user, options=options)
    run.thread_id = thread_id
    thread = run_statements.run_start_settled(
        run=run, user_id=user.pk, thread_id=thread_id, graph=graph
    )
    if thread is None:
        return None
    announce_thread(thread)
    enqueue_on_commit(run)
    return run


@retry_transient
def run_start(
    *,
    graph: str,
    input: Any,
    user,
    thread: Thread | Locked | None = None,
    title: str = "",
    reviewer_group: Group | None = None,
    metadata: dict[str, Any] | None = None,
    options: RunOptions | None = None,
) -> Run:
    """Start a run: on a new thread, or on an existing idle/done/error thread.

    A new thread gets `title`, `reviewer_group` and `metadata`. A thread that has never
    run takes the run's graph (one created by the API first). The run carries `options`:
    with `options.checkpoint_id` it goes on from that earlier checkpoint of the thread
    (an empty input continues it; an input is applied to its state), forking its
    history; `options.supersede` and `options.multitask_strategy` say what becomes of a
    paused thread's interrupts and of a run in flight. `thread` as `Locked(thread)`: the
    caller read it with select_for_update in its own transaction, so it is current and
    is not read again.
    """
    thread_locked = isinstance(thread, Locked)
    if isinstance(thread, Locked):
        thread = thread.thread
    options = options or RunOptions()
    multitask_strategy = options.multitask_strategy
    input = _start_input(graph, input)
    if metadata is not None and not isinstance(metadata, dict):
        raise Invalid("Thread metadata must be a JSON object.")
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
        run = _new_start(thread=thread, input=input, user=user, options=options)
        if new_thread:
            run.save(force_insert=True)
        else:
            if not thread_locked:
                thread = Thread.objects.select_for_update().get(pk=thread.pk)
                run.thread = thread
            if not user_can_view_thread(user, thread):
                raise NotFound("No such thread.")
            if options.supersede and thread.status == Thread.Status.INTERRUPTED:
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
            started = run_statements.run_insert_with_thread(
                run=run,
                thread=thread,
                fields=["graph", "status", "updated_at"],
                only_if_no_runs=bound != graph,
            )
            if not started:  # it has runs after all: the graph it ran is kept
                thread.graph, thread.status = bound, was
                thread_graph_check(thread=thread, graph=graph, ran=True)
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
