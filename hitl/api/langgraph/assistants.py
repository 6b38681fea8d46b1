"""The assistants of the LangGraph-compatible API: each registered graph's default one,
and stored, versioned ones (hitl/core/resources/assistants.py)."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from ninja import Router

from hitl.api.errors import ERRORS
from hitl.api.langgraph import serializers
from hitl.api.langgraph.schemas import (
    AssistantCountIn,
    AssistantCreateIn,
    AssistantLatestIn,
    AssistantPatchIn,
    AssistantSearchIn,
    AssistantVersionsIn,
)
from hitl.core import errors
from hitl.core.errors import check_storable
from hitl.core.registry import registry
from hitl.core.resources.assistants import (
    AssistantFields,
    assistant_create,
    assistant_delete,
    assistant_get,
    assistant_list,
    assistant_set_latest,
    assistant_update,
    assistant_versions,
)
from hitl.core.resources.assistants import (
    assistant_graph as graph_of,
)
from hitl.core.runs.graphs import checkpointer

router = Router()


def _search(body: AssistantCountIn) -> list:
    if body.graph_id is not None and body.graph_id not in registry.targets:
        raise errors.NotFound(
            f"No graph {body.graph_id!r}; registered: {', '.join(registry.names())}."
        )
    check_storable(body.metadata, "metadata")
    return assistant_list(graph=body.graph_id, name=body.name, metadata=body.metadata)


@router.post("", response={200: dict, **ERRORS}, tags=["assistants"])
def assistant_create_view(request, body: AssistantCreateIn):
    """Create an assistant: a configured variant of a registered graph (version 1)."""
    return serializers.assistant_json(
        assistant_create(
            user=request.user,
            graph=body.graph_id,
            fields=AssistantFields(
                config=body.config,
                context=body.context,
                metadata=body.metadata,
                name=body.name,
                description=body.description,
            ),
            assistant_id=body.assistant_id,
            if_exists=body.if_exists or "raise",
        )
    )


@router.post("/search", response={200: list[dict], **ERRORS}, tags=["assistants"])
def assistants_search(request, body: AssistantSearchIn, response: HttpResponse):
    items = [serializers.assistant_json(a) for a in _search(body)]
    if body.sort_by is not None or body.sort_order is not None:
        key = body.sort_by or "created_at"
        items.sort(key=lambda a: (a[key], a["assistant_id"]), reverse=body.sort_order != "asc")
    else:
        items.sort(key=lambda a: a["name"])
    page = items[body.offset : body.offset + body.limit]
    if body.offset + body.limit < len(items):
        response["X-Pagination-Next"] = str(body.offset + body.limit)
    if body.select:
        page = [{k: a[k] for k in body.select} for a in page]
    return page


@router.post("/count", response={200: int, **ERRORS}, tags=["assistants"])
def assistants_count(request, body: AssistantCountIn):
    return len(_search(body))


@router.get("/{assistant_id}", response={200: dict, **ERRORS}, tags=["assistants"])
def assistant_get_view(request, assistant_id: str):
    return serializers.assistant_json(assistant_get(assistant_id))


@router.patch("/{assistant_id}", response={200: dict, **ERRORS}, tags=["assistants"])
def assistant_update_view(request, assistant_id: str, body: AssistantPatchIn):
    """Save a new version of the assistant and make it the current one."""
    return serializers.assistant_json(
        assistant_update(
            user=request.user,
            assistant_id=assistant_id,
            graph=body.graph_id,
            config=body.config,
            context=body.context,
            metadata=body.metadata,
            name=body.name,
            description=body.description,
        )
    )


@router.delete("/{assistant_id}", response={204: None, **ERRORS}, tags=["assistants"])
def assistant_delete_view(request, assistant_id: str, delete_threads: bool = False):
    if delete_threads:
        raise errors.Invalid(
            "delete_threads is not supported: delete the assistant's threads with "
            "threads.delete (each checks its own permission)."
        )
    assistant_delete(user=request.user, assistant_id=assistant_id)
    return 204, None


@router.post("/{assistant_id}/versions", response={200: list[dict], **ERRORS}, tags=["assistants"])
def assistant_versions_view(request, assistant_id: str, body: AssistantVersionsIn):
    check_storable(body.metadata, "metadata")
    found = assistant_versions(assistant_id, metadata=body.metadata)
    return [serializers.assistant_json(a) for a in found[body.offset : body.offset + body.limit]]


@router.post("/{assistant_id}/latest", response={200: dict, **ERRORS}, tags=["assistants"])
def assistant_set_latest_view(request, assistant_id: str, body: AssistantLatestIn):
    return serializers.assistant_json(
        assistant_set_latest(user=request.user, assistant_id=assistant_id, version=body.version)
    )


def _compiled(assistant_id: str):
    name = graph_of(assistant_id)
    try:
        return registry.get(name, checkpointer())
    except Exception as exc:  # a registered target that does not import or compile
        raise errors.Conflict(f"Graph {name!r} cannot be loaded: {exc}") from None


@router.get("/{assistant_id}/graph", response={200: dict, **ERRORS}, tags=["assistants"])
def assistant_graph(request, assistant_id: str, xray: int | bool = False):
    try:
        return _compiled(assistant_id).get_graph(xray=xray).to_json()
    except errors.ServiceError:
        raise
    except Exception as exc:  # a graph LangGraph cannot draw
        raise errors.Conflict(f"The graph cannot be drawn: {exc}") from None


def _schemas(graph: Any, name: str) -> dict[str, Any]:
    def schema(method: str) -> dict[str, Any] | None:
        try:
            return getattr(graph, method)()
        except Exception:  # a graph whose schema cannot be expressed as JSON Schema
            return None

    return {
        "graph_id": name,
        "input_schema": schema("get_input_jsonschema"),
        "output_schema": schema("get_output_jsonschema"),
        "state_schema": schema("get_output_jsonschema"),
        "config_schema": schema("get_config_jsonschema"),
        "context_schema": schema("get_context_jsonschema"),
    }


@router.get("/{assistant_id}/schemas", response={200: dict, **ERRORS}, tags=["assistants"])
def assistant_schemas(request, assistant_id: str):
    return _schemas(_compiled(assistant_id), graph_of(assistant_id))


def _subgraphs(assistant_id: str, namespace: str | None, recurse: bool) -> dict[str, Any]:
    graph = _compiled(assistant_id)
    name = graph_of(assistant_id)
    try:
        found = list(graph.get_subgraphs(namespace=namespace, recurse=recurse))
    except Exception as exc:  # a graph whose subgraphs LangGraph cannot list
        raise errors.Conflict(f"The subgraphs cannot be listed: {exc}") from None
    return {ns: _schemas(subgraph, name) for ns, subgraph in found}


@router.get("/{assistant_id}/subgraphs", response={200: dict, **ERRORS}, tags=["assistants"])
def assistant_subgraphs(request, assistant_id: str, recurse: bool = False):
    """The graph's subgraphs by namespace, with their schemas."""
    return _subgraphs(assistant_id, None, recurse)


@router.get(
    "/{assistant_id}/subgraphs/{namespace}",
    response={200: dict, **ERRORS},
    tags=["assistants"],
)
def assistant_subgraphs_in(request, assistant_id: str, namespace: str, recurse: bool = False):
    return _subgraphs(assistant_id, namespace, recurse)
