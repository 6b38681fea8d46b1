"""Thread state read from the LangGraph checkpointer, in the LangGraph API's shapes."""

from __future__ import annotations

from typing import Any

from hitl.core import errors
from hitl.core.errors import check_storable
from hitl.core.live.agui import jsonable
from hitl.core.models import Thread
from hitl.core.runs.graphs import thread_config, thread_graph


def checkpoint_json(config: dict[str, Any] | None) -> dict[str, Any] | None:
    if not config:
        return None
    c = config.get("configurable") or {}
    if not c.get("checkpoint_id"):
        return None
    return {
        "thread_id": str(c.get("thread_id")),
        "checkpoint_ns": c.get("checkpoint_ns") or "",
        "checkpoint_id": c.get("checkpoint_id"),
        "checkpoint_map": c.get("checkpoint_map"),
    }


def _interrupts(items) -> list[dict[str, Any]]:
    return [{"value": jsonable(i.value), "id": i.id} for i in items or ()]


def snapshot_json(thread: Thread, snapshot) -> dict[str, Any]:
    """A LangGraph StateSnapshot as the API's ThreadState."""
    checkpoint = checkpoint_json(snapshot.config) or {
        "thread_id": str(thread.pk),
        "checkpoint_ns": "",
        "checkpoint_id": None,
        "checkpoint_map": None,
    }
    tasks = []
    for task in snapshot.tasks or ():
        item: dict[str, Any] = {
            "id": task.id,
            "name": task.name,
            "path": jsonable(list(task.path)) if getattr(task, "path", None) else [],
            "error": str(task.error) if task.error else None,
            "interrupts": _interrupts(task.interrupts),
            # A subgraph's task names its checkpoint, or with subgraphs=True carries its
            # state, as LangGraph Server shows them.
            "checkpoint": jsonable(task.state.get("configurable"))
            if isinstance(task.state, dict)
            else None,
            "state": snapshot_json(thread, task.state) if _is_snapshot(task.state) else None,
        }
        if getattr(task, "result", None) is not None:
            item["result"] = jsonable(task.result)
        tasks.append(item)
    return {
        "values": jsonable(snapshot.values) if snapshot.values is not None else {},
        "next": list(snapshot.next or ()),
        "checkpoint": checkpoint,
        "metadata": jsonable(snapshot.metadata or {}),
        "created_at": snapshot.created_at,
        "parent_checkpoint": checkpoint_json(snapshot.parent_config),
        "tasks": tasks,
        "interrupts": _interrupts(snapshot.interrupts),
    }


def _is_snapshot(state: Any) -> bool:
    from langgraph.types import StateSnapshot

    return isinstance(state, StateSnapshot)


# What `select` may name in a ThreadState, besides `values.<key>` (langgraph_sdk's
# ThreadStateSelectField).
STATE_FIELDS = (
    "values",
    "next",
    "tasks",
    "checkpoint",
    "metadata",
    "created_at",
    "parent_checkpoint",
    "interrupts",
)


def state_selected(state: dict[str, Any], select: list[str] | None) -> dict[str, Any]:
    """Only the fields `select` names; `values.<key>` keeps that one key of the values."""
    if not select:
        return state
    out: dict[str, Any] = {}
    for name in select:
        if name in STATE_FIELDS:
            out[name] = state[name]
        elif name.startswith("values.") and name != "values.":
            if "values" in select:
                continue  # the whole values are asked for anyway
            values = state["values"] if isinstance(state["values"], dict) else {}
            kept = out.setdefault("values", {})
            if name[7:] in values:
                kept[name[7:]] = values[name[7:]]
        else:
            raise errors.Invalid(
                f"select: unknown field {name!r}; name {', '.join(STATE_FIELDS)} or values.<key>."
            )
    return out


def _empty(thread: Thread) -> dict[str, Any]:
    return {
        "values": {},
        "next": [],
        "checkpoint": {
            "thread_id": str(thread.pk),
            "checkpoint_ns": "",
            "checkpoint_id": None,
            "checkpoint_map": None,
        },
        "metadata": {},
        "created_at": None,
        "parent_checkpoint": None,
        "tasks": [],
        "interrupts": [],
    }


def thread_state(
    thread: Thread, checkpoint_id: str | None = None, *, subgraphs: bool = False
) -> dict[str, Any]:
    check_storable(checkpoint_id, "checkpoint_id")
    graph = thread_graph(thread)
    if graph is None:
        return _empty(thread)
    snapshot = graph.get_state(thread_config(thread, checkpoint_id), subgraphs=subgraphs)
    if checkpoint_id and not snapshot.config.get("configurable", {}).get("checkpoint_id"):
        raise errors.NotFound(f"No checkpoint {checkpoint_id!r} on this thread.")
    if not snapshot.values and not snapshot.next and snapshot.created_at is None:
        return _empty(thread)
    return snapshot_json(thread, snapshot)


def thread_values(thread: Thread) -> tuple[Any, dict[str, str]]:
    """The thread's current values and a map LangGraph interrupt id -> task id."""
    graph = thread_graph(thread)
    if graph is None:
        return {}, {}
    snapshot = graph.get_state(thread_config(thread))
    tasks = {i.id: task.id for task in snapshot.tasks or () for i in task.interrupts or ()}
    return (jsonable(snapshot.values) if snapshot.values is not None else {}), tasks


def thread_history(
    thread: Thread,
    *,
    limit: int,
    before: str | None = None,
    metadata: dict[str, Any] | None = None,
    checkpoint_ns: str = "",
    checkpoint_id: str | None = None,
) -> list[dict[str, Any]]:
    """The thread's checkpoints, newest first; `checkpoint_id` lists that one only, as
    LangGraph's checkpointers list a config naming one."""
    check_storable([before, metadata, checkpoint_ns, checkpoint_id], "The history filter")
    graph = thread_graph(thread)
    if graph is None:
        return []
    before_config = thread_config(thread, before, checkpoint_ns) if before else None
    history = graph.get_state_history(
        thread_config(thread, checkpoint_id, checkpoint_ns),
        filter=metadata or None,
        before=before_config,
        limit=limit,
    )
    return [snapshot_json(thread, snapshot) for snapshot in history]
