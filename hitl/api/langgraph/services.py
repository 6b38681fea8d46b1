"""State changes behind the LangGraph-compatible API and the AG-UI endpoint.

Thin on purpose: runs start through runs.run_start and interrupts are answered
through decisions.interrupt_resolve (via hitl.core.decisions.resume), so this API changes
nothing the UI would not.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from hitl.core import errors, runs
from hitl.core.access.permissions import (
    user_can_cancel_thread,
    user_can_run_thread,
    user_can_view_thread,
)
from hitl.core.db import answer_statements, locked_reads
from hitl.core.db.retry import retry_transient
from hitl.core.decisions.resume import resume_command
from hitl.core.errors import check_storable
from hitl.core.models import Run, Thread
from hitl.core.net.webhook_urls import WebhookNotAllowed, webhook_check_url
from hitl.core.registry import registry
from hitl.core.resources.assistants import assistant_get, default_assistant_id
from hitl.core.runs import multitask
from hitl.core.runs.config import run_config_merge
from hitl.core.runs.graphs import checkpointer, thread_graph_check
from hitl.core.runs.options import Locked, RunOptions

# A registered graph's default assistant id (the graph name works too).
assistant_id_for = default_assistant_id


def graph_for_assistant(assistant_id: str) -> str:
    """The graph an assistant id (or a graph name, as LangGraph also accepts) names."""
    return assistant_get(assistant_id).graph


def assistant_defaults(assistant_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The config and context an assistant gives its runs (a registered graph: none)."""
    assistant = assistant_get(assistant_id)
    return dict(assistant.config), dict(assistant.context)


def _check_metadata(metadata: Any) -> dict[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise errors.Invalid("metadata must be a JSON object.")
    return check_storable(metadata, "metadata")


def thread_create(
    *, user, thread_id: uuid.UUID | None = None, metadata: Any = None, if_exists: str = "raise"
) -> Thread:
    """Create an idle thread with no run yet; its graph is bound by its first run."""
    metadata = _check_metadata(metadata)
    graph = metadata.get("graph_id") if isinstance(metadata.get("graph_id"), str) else None
    if graph is not None and graph not in registry.targets:
        graph = graph_for_assistant(graph)
    if thread_id is not None:
        existing = Thread.objects.filter(pk=thread_id).one_or_none()
        if existing is not None:
            if if_exists == "do_nothing" and user_can_view_thread(user, existing):
                return existing
            raise errors.Conflict(f"Thread {thread_id} already exists.")
    try:
        # One INSERT: no transaction of its own. Inside a caller's (run_create) the
        # Conflict below ends that transaction anyway.
        thread = Thread.objects.create(
            id=thread_id or uuid.uuid4(),
            graph=graph or settings.HITL_DEFAULT_GRAPH,
            title=str(metadata.get("title") or graph or "API thread")[:200],
            requester=user,
            metadata=metadata,
            status=Thread.Status.IDLE,
        )
    except IntegrityError:  # created concurrently under the same id
        raise errors.Conflict(f"Thread {thread_id} already exists.") from None
    # Nothing has run on it: its answer needs no checkpoint or interrupt read.
    thread.is_new, thread.pending_rows = True, []
    return thread


def thread_update(*, thread: Thread, user, metadata: Any) -> Thread:
    """Merge metadata into a thread (LangGraph PATCH semantics)."""
    metadata = _check_metadata(metadata)
    if not user_can_run_thread(user, thread):
        raise errors.Forbidden(
            "Only the thread's requester (or a user with the hitl.run_any_thread "
            "permission) can change it."
        )
    with transaction.atomic():
        thread = Thread.objects.select_for_update().get(pk=thread.pk)
        thread.metadata = {**thread.metadata, **metadata}
        thread.save(update_fields=["metadata", "updated_at"])
    return thread


@dataclass(frozen=True)
class RunRequest:
    """What a client sent for a run besides its input, command and metadata, unchecked:
    run_create checks it and builds the run's RunOptions from it once.

    `new_thread_id`: the id a thread created for the run gets; `if_not_exists="create"`
    creates a missing `thread_id`. `lenient` reads edits' strings as their schema's
    types; `headers` go into the run's `configurable` as LangGraph Server copies them.
    """

    webhook: str | None = None
    checkpoint_id: str | None = None
    stream_modes: Sequence[str] | None = None
    stream_subgraphs: bool = False
    config: Any = None
    context: Any = None
    breakpoints: Mapping[str, Any] | None = None
    multitask_strategy: str = "reject"
    headers: Mapping[str, str] | None = None
    lenient: bool = False
    new_thread_id: uuid.UUID | None = None
    if_not_exists: str | None = None


def run_create(
    *,
    user,
    assistant_id: str,
    thread: Thread | None = None,
    thread_id: uuid.UUID | None = None,
    input: Any = None,
    command: dict[str, Any] | None = None,
    metadata: Any = None,
    request: RunRequest = RunRequest(),
) -> Run:
    """Start a run (input) or resume the thread (command={"resume": ...}).

    Without `thread`, a thread is created (with `request.new_thread_id` when given).
    With `thread_id` instead, the thread is read and locked in this call's transaction
    (a thread the user cannot see is a 404; `if_not_exists="create"` creates a missing
    one). The whole call is one transaction: a refused resume leaves no thread behind.
    """
    assistant = assistant_get(assistant_id)
    graph = assistant.graph
    metadata = _check_metadata(metadata)
    base_config, base_context = dict(assistant.config), dict(assistant.context)
    run_config, run_context = run_config_merge(
        config=request.config,
        context=request.context,
        assistant_config=base_config,
        assistant_context=base_context,
        headers=dict(request.headers) if request.headers is not None else None,
    )
    check_storable(input, "input")
    check_storable(command, "command")
    if request.webhook:
        try:
            webhook_check_url(request.webhook)
        except WebhookNotAllowed as exc:
            raise errors.Invalid(str(exc)) from None
    breakpoints = check_breakpoints(graph, request.breakpoints)
    steer: dict[str, Any] = {}
    if command is not None:
        steer = check_command(graph, command)
        if "resume" not in command and not steer:
            raise errors.Invalid('A command needs "resume", "update" or "goto".')
        # Agent Chat UI sends `input: {}` beside its command: empty input is no input.
        if input not in (None, {}, [], ""):
            raise errors.Invalid("Send either input or command, not both.")
        input = None
    options = RunOptions(
        metadata=metadata,
        webhook=request.webhook or "",
        stream_modes=tuple(request.stream_modes or ()),
        stream_subgraphs=request.stream_subgraphs,
        config=run_config,
        context=run_context,
        command=steer,
        breakpoints=breakpoints,  # a client's resume too: only its own
        # The run keeps the assistant's version it started with (its config and context).
        assistant_id="" if assistant.is_default else assistant.assistant_id,
        assistant_version=None if assistant.is_default else assistant.version,
        multitask_strategy=request.multitask_strategy,
        supersede=True,
    )
    checkpoint_id = request.checkpoint_id
    new_thread_id = request.new_thread_id
    if (
        thread_id is not None
        and command is None
        and input is not None
        and not checkpoint_id
        and assistant.is_default
    ):
        # The common start (the user's own thread, settled): one statement, no
        # transaction around it. Any other case: None, and the locked path below.
        run = runs.run_start_settled(
            graph=graph, input=input, user=user, thread_id=thread_id, options=options
        )
        if run is not None:
            return run
    resuming = command is not None and "resume" in command
    with transaction.atomic():
        locked = False
        answerable = None
        if thread_id is not None:
            # Read once, locked: the run's start or the answers need the lock anyway.
            # A resume reads the rows it answers with it (one statement on PostgreSQL).
            if resuming:
                thread, answerable = answer_statements.thread_and_answerable_locked(thread_id)
            else:
                thread = locked_reads.thread_locked(thread_id)
            if thread is None and request.if_not_exists == "create":
                new_thread_id = thread_id
            elif thread is None or not user_can_view_thread(user, thread):
                raise errors.NotFound(f"Thread {thread_id} not found.")
            locked = thread is not None
        if thread is None:
            thread_metadata = {"graph_id": graph}
            if not assistant.is_default:
                thread_metadata["assistant_id"] = assistant.assistant_id
            thread = thread_create(user=user, thread_id=new_thread_id, metadata=thread_metadata)
        if checkpoint_id:
            check_checkpoint(thread, checkpoint_id)
            if command is not None and checkpoint_id != head_checkpoint_id(thread):
                raise errors.Invalid(
                    "A resume answers the latest checkpoint's interrupts; start a run from "
                    "an earlier checkpoint with input instead."
                )
        if (
            not assistant.is_default
            and thread.metadata.get("assistant_id") != assistant.assistant_id
        ):
            # As LangGraph Server: the thread names the assistant its latest run is on.
            thread.metadata = {**thread.metadata, "assistant_id": assistant.assistant_id}
            Thread.objects.filter(pk=thread.pk).update(metadata=thread.metadata)
        if command is not None and "resume" not in command:
            # update/goto alone: a step from (a copy of) the latest checkpoint, so a task
            # that pauses again does so under a new interrupt id; the pause's interrupts
            # are superseded, as LangGraph Server goes on without them.
            checkpoint_id = checkpoint_id or head_checkpoint_id(thread) or ""
        fresh = getattr(thread, "is_new", False)  # created by this call: no checkpoint
        settled = thread.status != Thread.Status.BUSY  # a run in flight moves the head on
        if command is None and input is None and not checkpoint_id and settled and not fresh:
            # No input goes on from the latest checkpoint, as LangGraph does (input None):
            # past a breakpoint; a pause's node runs again and asks again; an ended graph
            # runs nothing. On a copy of it, so a new pause has new interrupt ids (the
            # pending ones are superseded). A thread with no checkpoint starts afresh.
            checkpoint_id = head_checkpoint_id(thread) or ""
        held = Locked(thread, answerable=answerable) if locked else thread
        if not resuming:
            return runs.run_start(
                graph=graph,
                input=input,
                user=user,
                thread=held,
                options=replace(options, checkpoint_id=checkpoint_id or ""),
            )
        thread_graph_check(thread=thread, graph=graph, ran=True)  # a paused thread ran
        if (
            request.config is None
            and request.context is None
            and not base_config
            and not base_context
        ):
            # The resume inherits the paused run's (as a reviewer's answer does).
            options = replace(options, config=None, context=None)
        return resume_command(
            thread=held,
            user=user,
            resume=command["resume"],
            options=options,
            lenient=request.lenient,
        )


def check_command(graph: str, command: dict[str, Any]) -> dict[str, Any]:
    """A command's `goto` and `update` (its resume aside), checked: a goto names nodes of
    the graph (or __end__), or sends {"node", "input"} to one."""
    steer = {k: command[k] for k in ("goto", "update") if command.get(k) is not None}
    goto = steer.get("goto")
    if goto is not None:
        nodes = set(registry.get(graph, checkpointer()).nodes) - {"__start__"}
        for target in goto if isinstance(goto, list) else [goto]:
            node = target.get("node") if isinstance(target, dict) else target
            if isinstance(target, dict) and set(target) - {"node", "input"}:
                raise errors.Invalid('A goto Send is {"node": ..., "input": ...}.')
            if not isinstance(node, str) or (node not in nodes and node != "__end__"):
                names = ", ".join(sorted(n for n in nodes if not n.startswith("__")))
                raise errors.Invalid(f"command.goto must name a node ({names}) or __end__.")
    update = steer.get("update")
    if update is not None and not isinstance(update, (dict, list)):
        raise errors.Invalid("command.update must be an object or a list of [key, value] pairs.")
    return steer


def check_breakpoints(graph: str, breakpoints: dict[str, Any] | None) -> dict[str, Any]:
    """interrupt_before / interrupt_after: "*" or nodes of the graph."""
    out = {k: v for k, v in (breakpoints or {}).items() if v not in (None, [])}
    if not out:
        return {}
    nodes = set(registry.get(graph, checkpointer()).nodes) - {"__start__"}
    for when, names in out.items():
        for name in [] if names == "*" else names:
            if name not in nodes:
                known = ", ".join(sorted(n for n in nodes if not n.startswith("__")))
                raise errors.Invalid(
                    f'interrupt_{when} must be "*" or nodes of the graph ({known}).'
                )
    return out


def checkpoint_id_of(checkpoint_id: str | None, checkpoint: Any) -> str | None:
    """The checkpoint a run starts from: `checkpoint_id`, or `checkpoint.checkpoint_id`."""
    if checkpoint is not None and not isinstance(checkpoint, dict):
        raise errors.Invalid("checkpoint must be an object {checkpoint_id, ...}.")
    return checkpoint_id or (checkpoint or {}).get("checkpoint_id") or None


def check_checkpoint(thread: Thread, checkpoint_id: Any) -> None:
    """Refuse a checkpoint id that is not one of this thread's checkpoints."""
    check_storable(checkpoint_id, "checkpoint_id")
    if not isinstance(checkpoint_id, str) or not 0 < len(checkpoint_id) <= 64:
        raise errors.Invalid("checkpoint_id must be a checkpoint id of this thread.")
    config = {"configurable": {"thread_id": str(thread.pk), "checkpoint_ns": ""}}
    config["configurable"]["checkpoint_id"] = checkpoint_id
    if checkpointer().get_tuple(config) is None:
        raise errors.NotFound(f"Thread {thread.pk} has no checkpoint {checkpoint_id!r}.")


@retry_transient
def _run_rollback(*, run: Run, user) -> Run:
    with transaction.atomic():
        thread = Thread.objects.select_for_update().get(pk=run.thread_id)
        if not user_can_cancel_thread(user, thread):
            raise errors.Forbidden(
                "Only the thread's requester (or a user with the hitl.review_all or "
                "hitl.change_thread permission) can cancel its runs."
            )
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status not in (Run.Status.QUEUED, Run.Status.RUNNING):
            raise errors.NotFound(f"Run {run.pk} is {run.status}: nothing to cancel.")
        back_to = multitask.runs_stop(
            thread=thread, user=user, action="rollback", reason="rolled back", runs=[run]
        )
        if not thread.runs.active().exists():
            thread.status = Thread.Status.IDLE
            thread.save(update_fields=["status", "updated_at"])
            runs.announce_thread(thread)
        if back_to:
            transaction.on_commit(lambda: multitask.state_back_to(thread, back_to))
    run.status = Run.Status.CANCELLED
    return run


def head_checkpoint_id(thread: Thread) -> str | None:
    """The id of the thread's latest checkpoint (what useStream names in a resume)."""
    config = {"configurable": {"thread_id": str(thread.pk), "checkpoint_ns": ""}}
    latest = checkpointer().get_tuple(config)
    return latest.config["configurable"].get("checkpoint_id") if latest else None


def run_cancel(*, run: Run, user, action: str = "interrupt") -> Run:
    """Cancel a queued or running run. As LangGraph Server, any other run (a paused one
    included) is not found among the cancellable: its interrupts are withdrawn by "mark
    as resolved" (update_state as __end__), new input, or cancelling the thread.

    action "rollback" also deletes the run and takes the thread's state back to what it
    was before it (LangGraph's rollback).
    """
    if run.status not in (Run.Status.QUEUED, Run.Status.RUNNING):
        raise errors.NotFound(
            f"Run {run.pk} is {run.status}, not pending or running: nothing to cancel. "
            "To withdraw a paused run's interrupts, update the thread's state as __end__."
        )
    if action == "rollback":
        return _run_rollback(run=run, user=user)
    runs.thread_cancel(thread=run.thread, user=user)
    run.refresh_from_db()
    return run
