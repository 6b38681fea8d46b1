"""Time travel: forking a new run from any step of a thread (its history: history/history.py).

A fork is LangGraph's own: the run continues from a copy of the chosen checkpoint
(optionally after a state edit written as that step's update), so the original branch
stays in the history. Forks are audited and the run remembers where it came from.
"""

from __future__ import annotations

from typing import Any

import jsonschema
from django.db import transaction

from agents.schema import state_schema
from hitl.core import audit
from hitl.core.access.permissions import user_can_run_thread
from hitl.core.errors import Conflict, Forbidden, Invalid, NotFound, check_storable
from hitl.core.models import AuditEvent, Run, Thread
from hitl.core.registry import registry
from hitl.core.runs.graphs import checkpointer
from hitl.core.runs.options import RunOptions
from hitl.core.runs.start import run_start


def _graph(thread: Thread):

    if thread.graph not in registry.targets:
        raise Invalid(f"Graph {thread.graph!r} is not registered.")
    return registry.get(thread.graph, checkpointer())


def _config(thread: Thread, checkpoint_id: str | None = None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": str(thread.pk), "checkpoint_ns": ""}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _check_values(graph, values: Any) -> dict[str, Any]:
    if not isinstance(values, dict) or not values:
        raise Invalid("A state edit is a JSON object of state keys and their new values.")
    schema = state_schema(graph)
    if schema:
        known = set(schema.get("properties") or {})
        unknown = [k for k in values if known and k not in known]
        if unknown:
            raise Invalid(
                f"The state has no key {unknown[0]!r}; its keys: {', '.join(sorted(known))}."
            )
        partial = {**schema, "required": []}
        errors = sorted(
            jsonschema.Draft202012Validator(partial).iter_errors(values), key=lambda e: list(e.path)
        )
        if errors:
            where = "/".join(str(p) for p in errors[0].path) or "state"
            raise Invalid(
                f"The state edit does not match the state schema at {where}: {errors[0].message}"
            )
    return values


def thread_fork(*, thread: Thread, user, checkpoint_id: str, values: Any = None) -> Run:
    """Start a run from an earlier checkpoint, after an optional state edit."""
    if not user_can_run_thread(user, thread):
        raise Forbidden(
            "Only the thread's requester (or a user with the hitl.run_any_thread "
            "permission) can fork it."
        )
    if thread.status in (Thread.Status.BUSY, Thread.Status.INTERRUPTED):
        raise Conflict(f"The thread is {thread.status}; answer or cancel it before forking.")
    if not isinstance(checkpoint_id, str) or not 0 < len(checkpoint_id) <= 64:
        raise Invalid("Choose a step of this thread's history.")
    graph = _graph(thread)
    config = _config(thread, checkpoint_id)
    chosen = graph.checkpointer.get_tuple(config)
    if chosen is None:
        raise NotFound("This thread has no such step.")
    step = (chosen.metadata or {}).get("step")
    start_from = checkpoint_id
    edited: list[str] = []
    if values is not None:
        values = _check_values(graph, values)
        check_storable(values, "The state edit")
        try:
            written = graph.update_state(config, values)
        except Exception as exc:  # LangGraph refuses an update it cannot place
            raise Invalid(f"The state edit was refused: {exc}") from None
        start_from = written["configurable"]["checkpoint_id"]
        edited = list(values)
    with transaction.atomic():
        run = run_start(
            graph=thread.graph,
            input={},
            user=user,
            thread=thread,
            options=RunOptions(
                metadata={"forked_from": checkpoint_id, "forked_step": step, "edited_keys": edited},
                checkpoint_id=start_from,
            ),
        )
        audit.audit_record(
            kind=AuditEvent.Kind.THREAD_FORKED,
            thread=thread,
            run=run,
            actor=user,
            data={"checkpoint_id": checkpoint_id, "start_from": start_from, "edited": edited},
        )
    return run
