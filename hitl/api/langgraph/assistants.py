"""The assistants of the LangGraph-compatible API: the registered graphs."""

from __future__ import annotations

from typing import Any

from ninja import Router

from hitl.api.errors import ERRORS
from hitl.api.langgraph import serializers
from hitl.api.langgraph import services as lg_services
from hitl.api.langgraph.schemas import AssistantSearchIn
from hitl.core import errors
from hitl.core.registry import registry

router = Router()


@router.post("/search", response={200: list[dict], **ERRORS}, tags=["assistants"])
def assistants_search(request, body: AssistantSearchIn):
    graphs = registry.names()
    if body.graph_id:
        graphs = [g for g in graphs if g == body.graph_id]
    if body.name:
        graphs = [g for g in graphs if body.name.lower() in g.lower()]
    items = [serializers.assistant_json(g) for g in graphs]
    if body.metadata:
        items = [a for a in items if body.metadata.items() <= a["metadata"].items()]
    key = body.sort_by if body.sort_by in ("assistant_id", "graph_id", "name") else "name"
    items.sort(key=lambda a: a[key], reverse=body.sort_order == "desc")
    return items[body.offset : body.offset + body.limit]


@router.post("/count", response={200: int, **ERRORS}, tags=["assistants"])
def assistants_count(request, body: AssistantSearchIn):
    return len(assistants_search(request, body))


@router.get("/{assistant_id}", response={200: dict, **ERRORS}, tags=["assistants"])
def assistant_get(request, assistant_id: str):
    return serializers.assistant_json(lg_services.graph_for_assistant(assistant_id))


def _compiled(assistant_id: str):
    from hitl.core.runs.graphs import checkpointer

    name = lg_services.graph_for_assistant(assistant_id)
    try:
        return registry.get(name, checkpointer())
    except Exception as exc:  # a registered target that does not import or compile
        raise errors.Conflict(f"Graph {name!r} cannot be loaded: {exc}") from None


@router.get("/{assistant_id}/graph", response={200: dict, **ERRORS}, tags=["assistants"])
def assistant_graph(request, assistant_id: str, xray: bool = False):
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
    return _schemas(_compiled(assistant_id), lg_services.graph_for_assistant(assistant_id))


def _subgraphs(assistant_id: str, namespace: str | None, recurse: bool) -> dict[str, Any]:
    graph = _compiled(assistant_id)
    name = lg_services.graph_for_assistant(assistant_id)
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
