"""The LangGraph API's thread routes: create, search, count and prune threads; read,
patch, copy and delete one; its state and history from the checkpointer.

Mounted at /langgraph/threads by hitl.api.langgraph.api, between the meta routes and
the run routes, so the URL patterns keep the order they are matched in. A thread's
runs (and following its stream) are served with the runs, in api.py.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpRequest
from ninja import Query, Router

from hitl.api.errors import ERRORS
from hitl.api.langgraph import serializers, state
from hitl.api.langgraph import services as lg_services
from hitl.api.langgraph.schemas import (
    CheckpointIn,
    HistoryIn,
    PruneIn,
    StateCheckpointIn,
    StateUpdateIn,
    ThreadCountIn,
    ThreadCreateIn,
    ThreadPatchIn,
    ThreadSearchIn,
    refuse_unsupported,
)
from hitl.core import errors
from hitl.core.access.permissions import thread_list_for_user, user_can_view_thread
from hitl.core.db.json_contains import JSONContains
from hitl.core.db.retry import retry_transient
from hitl.core.errors import check_storable
from hitl.core.models import Thread
from hitl.core.resources.assistants import assistant_get
from hitl.core.threads import verbs as thread_verbs

router = Router()

# Repeated `?select=` query parameters (a list would otherwise be read from a body).
SELECT_QUERY = Query(None)


@retry_transient  # reads: safe to repeat
def thread_for(request: HttpRequest, thread_id: uuid.UUID) -> Thread:
    thread = Thread.objects.filter(pk=thread_id).one_or_none()
    if thread is None or not user_can_view_thread(request.user, thread):
        raise errors.NotFound(f"Thread {thread_id} not found.")
    return thread


@router.post("", response={200: dict, **ERRORS}, tags=["threads"])
def threads_create(request, body: ThreadCreateIn):
    refuse_unsupported(ttl=body.ttl, supersteps=body.supersteps)
    metadata = dict(body.metadata or {})
    if body.graph_id:
        metadata["graph_id"] = body.graph_id
    # One INSERT: a fault rolls it back, so it is repeated (with the same id, if any).
    thread = retry_transient(lg_services.thread_create)(
        user=request.user, thread_id=body.thread_id, metadata=metadata, if_exists=body.if_exists
    )
    return serializers.thread_json(thread)


def _threads_query(request, metadata: dict[str, Any] | None, status: str | None):
    check_storable(metadata, "metadata")
    qs = thread_list_for_user(request.user)
    if status:
        qs = qs.filter(status__in=serializers.THREAD_STATUS_FILTER[status])
    for key, value in (metadata or {}).items():
        if key == "graph_id":
            qs = qs.filter(graph=value)
        elif key == "assistant_id":
            try:
                assistant = assistant_get(str(value))
            except errors.NotFound:
                qs = qs.none()
            else:
                qs = (
                    qs.filter(graph=assistant.graph)
                    if assistant.is_default
                    else qs.filter(metadata__assistant_id=assistant.assistant_id)
                )
        else:
            # Containment, as LangGraph Server filters: the key is data, never a lookup.
            qs = qs.filter(JSONContains("metadata", {key: value}))
    return qs


@router.post("/search", response={200: list[dict], **ERRORS}, tags=["threads"])
def threads_search(request, body: ThreadSearchIn):
    refuse_unsupported(values=body.values, extract=body.extract)
    qs = _threads_query(request, body.metadata, body.status)
    if body.ids:
        qs = qs.filter(pk__in=body.ids)
    field = {"thread_id": "id"}.get(body.sort_by or "updated_at", body.sort_by or "updated_at")
    qs = qs.order_by(f"-{field}" if body.sort_order != "asc" else field, "id")
    page = qs[body.offset : body.offset + body.limit]
    if body.select is None or {"values", "interrupts"} & set(body.select):
        page = serializers.with_pending(page)
        found = [serializers.thread_json(t) for t in page]
    else:  # no state asked for: none read
        found = [serializers.thread_json(t, with_values=False) for t in page]
    return [serializers.selected(t, body.select) for t in found]


@router.post("/count", response={200: int, **ERRORS}, tags=["threads"])
def threads_count(request, body: ThreadCountIn):
    refuse_unsupported(values=body.values)
    return _threads_query(request, body.metadata, body.status).count()


# Before /threads/{thread_id}, which would take "prune" for a thread id.
@router.post("/prune", response={200: dict, **ERRORS}, tags=["threads"])
def threads_prune(request, body: PruneIn):
    if body.strategy != "delete":
        refuse_unsupported(strategy=body.strategy)
    pruned = thread_verbs.threads_prune(user=request.user, thread_ids=body.thread_ids)
    return {"pruned_count": pruned}


@router.get("/{thread_id}", response={200: dict, **ERRORS}, tags=["threads"])
def thread_get(request, thread_id: uuid.UUID, include: str = ""):
    # `include` asks for optional fields; LangGraph's only one is `ttl`, which HITL's
    # threads never have (a thread TTL is refused), so there is nothing to add.
    return serializers.thread_json(thread_for(request, thread_id))


@router.patch("/{thread_id}", response={200: dict, 204: None, **ERRORS}, tags=["threads"])
def thread_patch(request, thread_id: uuid.UUID, body: ThreadPatchIn):
    refuse_unsupported(ttl=body.ttl)
    thread = lg_services.thread_update(
        thread=thread_for(request, thread_id), user=request.user, metadata=body.metadata
    )
    if request.headers.get("Prefer") == "return=minimal":
        return 204, None  # langgraph_sdk's return_minimal, as LangGraph Server answers it
    return serializers.thread_json(thread)


@router.get("/{thread_id}/state", response={200: dict, **ERRORS}, tags=["threads"])
def thread_state(
    request, thread_id: uuid.UUID, subgraphs: bool = False, select: list[str] | None = SELECT_QUERY
):
    found = state.thread_state(thread_for(request, thread_id), subgraphs=subgraphs)
    return state.state_selected(found, select)


@router.post("/{thread_id}/state", response={200: dict, **ERRORS}, tags=["threads"])
def thread_state_update(request, thread_id: uuid.UUID, body: StateUpdateIn):
    """Update the state as `as_node`; values null as node __end__ is the Agent Inbox's
    "mark as resolved": it withdraws the pending interrupts, like cancelling in the UI."""
    thread = thread_for(request, thread_id)
    written = thread_verbs.thread_update_state(
        thread=thread,
        user=request.user,
        values=body.values,
        as_node=body.as_node,
        checkpoint_id=body.checkpoint_id or getattr(body.checkpoint, "checkpoint_id", None),
    )
    if written is None:  # marked as resolved: the answer names the head checkpoint
        return {"checkpoint": state.thread_state(thread)["checkpoint"]}
    return {"checkpoint": state.checkpoint_json(written)}


@router.delete("/{thread_id}", response={204: None, **ERRORS}, tags=["threads"])
def thread_delete(request, thread_id: uuid.UUID):
    thread_verbs.thread_delete(thread=thread_for(request, thread_id), user=request.user)
    return 204, None


@router.post("/{thread_id}/copy", response={200: dict, **ERRORS}, tags=["threads"])
def thread_copy(request, thread_id: uuid.UUID):
    copy = thread_verbs.thread_copy(thread=thread_for(request, thread_id), user=request.user)
    return serializers.thread_json(copy)


@router.post("/{thread_id}/state/checkpoint", response={200: dict, **ERRORS}, tags=["threads"])
def thread_state_at_post(request, thread_id: uuid.UUID, body: StateCheckpointIn):
    thread = thread_for(request, thread_id)
    found = state.thread_state(thread, body.checkpoint.checkpoint_id, subgraphs=body.subgraphs)
    return state.state_selected(found, body.select)


@router.get("/{thread_id}/state/{checkpoint_id}", response={200: dict, **ERRORS}, tags=["threads"])
def thread_state_at(
    request,
    thread_id: uuid.UUID,
    checkpoint_id: str,
    subgraphs: bool = False,
    select: list[str] | None = SELECT_QUERY,
):
    found = state.thread_state(thread_for(request, thread_id), checkpoint_id, subgraphs=subgraphs)
    return state.state_selected(found, select)


@router.post("/{thread_id}/history", response={200: list[dict], **ERRORS}, tags=["threads"])
def thread_history(request, thread_id: uuid.UUID, body: HistoryIn):
    thread = thread_for(request, thread_id)
    before = body.before.checkpoint_id if isinstance(body.before, CheckpointIn) else body.before
    history = state.thread_history(
        thread,
        limit=body.limit,
        before=before,
        metadata=body.metadata,
        checkpoint_ns=body.checkpoint.checkpoint_ns if body.checkpoint else "",
        checkpoint_id=body.checkpoint.checkpoint_id if body.checkpoint else None,
    )
    return [state.state_selected(s, body.select) for s in history]


@router.get("/{thread_id}/history", response={200: list[dict], **ERRORS}, tags=["threads"])
def thread_history_get(
    request, thread_id: uuid.UUID, limit: int = Query(10, ge=1, le=1000), before: str | None = None
):
    return state.thread_history(thread_for(request, thread_id), limit=limit, before=before)
