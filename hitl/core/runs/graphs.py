"""Graphs and their checkpointer, as every reader of a thread's state gets them."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings

from agents.checkpoint import get_checkpointer
from agents.store import store_for
from hitl.core.errors import Invalid
from hitl.core.models import Thread
from hitl.core.registry import registry

log = logging.getLogger(__name__)


def checkpointer() -> Any:
    """This process's checkpointer (pooled on PostgreSQL, SQLite embedded)."""
    return get_checkpointer(
        settings.HITL_CHECKPOINT_URL,
        settings.HITL_CHECKPOINT_POOL_SIZE,
        prepare=settings.HITL_DB_PREPARE,
    )


def store() -> Any:
    """This process's sync store (PostgresStore on the checkpointer's pool, SQLite embedded)."""
    url = settings.HITL_STORE_URL or settings.HITL_CHECKPOINT_URL
    return store_for(url, settings.HITL_CHECKPOINT_POOL_SIZE, prepare=settings.HITL_DB_PREPARE)


def thread_graph(thread: Thread) -> Any:
    """The thread's compiled graph on this process's checkpointer, or None when its graph
    is not registered or no longer imports (the thread still reads, stateless)."""
    if thread.graph not in registry.targets:
        return None
    try:
        return registry.get(thread.graph, checkpointer())
    except Exception:
        log.exception("graph %r of thread %s cannot be loaded", thread.graph, thread.pk)
        return None


def thread_config(thread: Thread, checkpoint_id: str | None = None, ns: str = "") -> dict[str, Any]:
    """The RunnableConfig that reads (or writes) the thread's state at `checkpoint_id`."""
    configurable: dict[str, Any] = {"thread_id": str(thread.pk), "checkpoint_ns": ns}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def thread_graph_check(*, thread: Thread, graph: str, ran: bool | None = None) -> None:
    """Refuse `graph` on a thread that ran another one: a thread that ran keeps its graph
    (its checkpoints are that graph's state); one that never ran takes any.

    `ran` is whether the thread has a run, when the caller knows it (None: asked here,
    and only when the graphs differ).
    """
    if thread.graph == graph:
        return
    if ran is None:
        ran = thread.runs.exists()
    if ran:
        raise Invalid(f"This thread runs graph {thread.graph!r}, not {graph!r}.")
