"""Our Thread / Run / graph rows in the LangGraph Server API's JSON shapes."""

from __future__ import annotations

import re
from typing import Any

from django.db.models import Prefetch

from hitl.api.langgraph import state
from hitl.api.langgraph.services import assistant_id_for
from hitl.core.db.retry import retry_transient
from hitl.core.errors import error_line
from hitl.core.models import HumanInterrupt, Run, Thread
from hitl.core.resources.assistants import AssistantSpec

# Ours -> LangGraph's (ThreadStatus has no "done"; RunStatus has no "queued"/"cancelled").
THREAD_STATUS = {
    "idle": "idle",
    "busy": "busy",
    "interrupted": "interrupted",
    "error": "error",
    "done": "idle",
}
RUN_STATUS = {
    "queued": "pending",
    "running": "running",
    "interrupted": "interrupted",
    "success": "success",
    "error": "error",
    "cancelled": "interrupted",
}
# LangGraph thread status filter -> ours.
THREAD_STATUS_FILTER = {
    "idle": ["idle", "done"],
    "busy": ["busy"],
    "interrupted": ["interrupted"],
    "error": ["error"],
}
RUN_STATUS_FILTER = {
    "pending": ["queued"],
    "running": ["running"],
    "interrupted": ["interrupted", "cancelled"],
    "success": ["success"],
    "error": ["error"],
    "timeout": [],
}


def _iso(value) -> str | None:
    return value.isoformat() if value else None


def assistant_json(assistant: AssistantSpec) -> dict[str, Any]:
    """An assistant (or one of its versions); a default one's dates are the epoch, as
    it is configuration (settings.HITL_GRAPHS), not a row."""
    return {
        "assistant_id": assistant.assistant_id,
        "graph_id": assistant.graph,
        "name": assistant.name,
        "description": assistant.description,
        "config": assistant.config,
        "context": assistant.context,
        "metadata": assistant.metadata,
        "version": assistant.version,
        "created_at": _iso(assistant.created_at),
        "updated_at": _iso(assistant.updated_at),
    }


def interrupts_map(
    thread: Thread, tasks: dict[str, str], rows=None
) -> dict[str, list[dict[str, Any]]]:
    """Pending interrupts keyed by LangGraph task id, as `Thread.interrupts` is.

    Only interrupts still waiting for an answer are listed: one a reviewer answered
    (its resume queued) is no longer actionable even if the checkpoint still has it.
    """
    if rows is None:
        rows = thread.interrupts.pending().in_order()
    out: dict[str, list[dict[str, Any]]] = {}
    seen: set[str] = set()
    for row in rows:
        if row.interrupt_id in seen:
            continue
        seen.add(row.interrupt_id)
        value = row.raw_value
        if row.kind == HumanInterrupt.Kind.HITL_REQUEST:
            value = with_inbox_arguments(value)
        item: dict[str, Any] = {"value": value, "id": row.interrupt_id}
        if row.response_schema:
            item["response_schema"] = row.response_schema
        out.setdefault(tasks.get(row.interrupt_id, row.interrupt_id), []).append(item)
    return out


def with_inbox_arguments(value: Any) -> Any:
    """A LangChain middleware pause with each action request's `args` also under
    `arguments`, for `Thread.interrupts` only.

    The released Agent Inbox (langchain-ai/agent-inbox, `normalizeInterrupt` in
    `contexts/utils.ts`) reads a request's args from `arguments`, the name LangChain's
    drafts used, and lists threads from `Thread.interrupts`: without the copy it shows
    the pause with no args, so Edit has nothing to edit and Accept approves what the card
    never showed. Every other reader (Agent Chat UI, useStream, Studio, HITL itself, the
    middleware on resume) reads `args` and ignores the extra key. State, history and
    streams keep the graph's own value, as LangGraph Server shows it.
    """
    if not isinstance(value, dict) or not isinstance(value.get("action_requests"), list):
        return value
    requests = [
        {**r, "arguments": r["args"]}
        if isinstance(r, dict) and "args" in r and "arguments" not in r
        else r
        for r in value["action_requests"]
    ]
    return {**value, "action_requests": requests}


def with_pending(qs):
    """Prefetch each thread's pending interrupts (for thread_json) in one query."""
    return qs.prefetch_related(
        Prefetch(
            "interrupts",
            queryset=HumanInterrupt.objects.pending().in_order(),
            to_attr="pending_rows",
        )
    )


def thread_json(thread: Thread, *, with_values: bool = True) -> dict[str, Any]:
    fresh = getattr(thread, "is_new", False)  # created by this request (thread_create)
    values, tasks = state.thread_values(thread) if with_values and not fresh else ({}, {})
    metadata = {"graph_id": thread.graph, "assistant_id": assistant_id_for(thread.graph)}
    metadata.update(thread.metadata or {})
    data: dict[str, Any] = {
        "thread_id": str(thread.pk),
        "created_at": _iso(thread.created_at),
        "updated_at": _iso(thread.updated_at),
        "metadata": metadata,
        "status": THREAD_STATUS.get(thread.status, thread.status),
        "config": {},
        "values": values,
        "interrupts": interrupts_map(thread, tasks, getattr(thread, "pending_rows", None)),
    }
    if thread.status == Thread.Status.ERROR:
        latest = thread.runs.order_by("-created_at").only("error").first()
        data["error"] = _error_line(latest.error) if latest else None
    return data


def selected(data: dict[str, Any], select: list[str] | None) -> dict[str, Any]:
    """Only the fields `select` names (all without it), as LangGraph Server's select."""
    return data if not select else {k: data[k] for k in select if k in data}


def _error_line(error: str) -> str:
    return error_line(error)


_RAISED = re.compile(r"^(?:[A-Za-z_][\w]*\.)*([A-Z][\w]*): (.*)$", re.S)


def error_json(error: str) -> dict[str, str]:
    """A failed run's error as LangGraph Server reports it: the exception's class name and
    its message (a stored error that names no exception is a RunError)."""
    line = error_line(error)
    raised = _RAISED.match(line)
    if raised is None:
        return {"error": "RunError", "message": line}
    return {"error": raised.group(1), "message": raised.group(2)}


def run_json(run: Run, graph: str | None = None) -> dict[str, Any]:
    graph = graph or run.thread.graph
    kwargs: dict[str, Any] = {"webhook": run.webhook or None}
    if run.kind == Run.Kind.RESUME:
        kwargs["input"] = None
        kwargs["command"] = {"resume": (run.input or {}).get("resume"), **(run.command or {})}
    elif run.command:
        kwargs["input"] = None
        kwargs["command"] = dict(run.command)
    else:
        kwargs["input"] = run.input
        kwargs["command"] = None
    kwargs["config"] = run.config or {}
    kwargs["context"] = run.context or {}
    data: dict[str, Any] = {
        "run_id": str(run.pk),
        "thread_id": str(run.thread_id),
        "assistant_id": run.assistant_id or assistant_id_for(graph),
        "created_at": _iso(run.created_at),
        "updated_at": _iso(run.finished_at or run.started_at or run.created_at),
        "status": RUN_STATUS.get(run.status, run.status),
        "metadata": run.metadata or {},
        "multitask_strategy": run.multitask_strategy or "reject",
        "kwargs": kwargs,
    }
    if run.status == Run.Status.CANCELLED:
        data["cancel_reason"] = "cancelled"
    if run.status == Run.Status.ERROR:
        data["error"] = _error_line(run.error)
    return data


@retry_transient  # a read: safe to repeat, and the run it answers for already exists
def run_output(run: Run) -> dict[str, Any]:
    """What runs/wait and runs/join answer: the thread's values after the run."""
    thread = run.thread
    if run.status == Run.Status.ERROR:
        return {"__error__": error_json(run.error)}
    values, _ = state.thread_values(thread)
    pending: list[dict[str, Any]] = []
    if run.status == Run.Status.INTERRUPTED:
        # Only what still waits: after a partial resume the answered ones are done.
        rows = HumanInterrupt.objects.filter(run=run, status=HumanInterrupt.Status.PENDING)
        rows = rows.order_by("interrupt_id", "position")
        seen: dict[str, dict[str, Any]] = {}
        for row in rows:
            seen.setdefault(row.interrupt_id, {"value": row.raw_value, "id": row.interrupt_id})
        pending = list(seen.values())
    return output_of(run, values, pending)


def output_of(run: Run, values: Any, pending: list[dict[str, Any]]) -> dict[str, Any]:
    """The wait answer from a run's end state and its pending interrupts ({id, value})."""
    values = {} if values is None else values
    out: dict[str, Any] = values if isinstance(values, dict) else {"values": values}
    if run.status == Run.Status.INTERRUPTED:
        out = {**out, "__interrupt__": pending}
    return out
