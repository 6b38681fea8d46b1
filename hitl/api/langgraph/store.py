"""LangGraph's store over HTTP (langgraph_sdk's `client.store`), as LangGraph Server
serves it: put, get, delete, search and list namespaces. The same store graphs get.

The store is every graph's shared memory, so these endpoints take the hitl.use_store
permission. Semantic search needs an embeddings index, which HITL does not configure:
a `query` or an `index` list is refused with a 400 that says so, as is a `ttl`.
"""

from __future__ import annotations

from typing import Any

from ninja import Field, Router, Schema

from hitl.api.errors import ERRORS
from hitl.core import errors
from hitl.core.access.permissions import user_can_use_store
from hitl.core.errors import check_storable
from hitl.core.runs.graphs import store

router = Router()

MAX_LABELS = 20


class PutIn(Schema):
    namespace: list[Any]
    key: str = Field(..., min_length=1, max_length=1000)
    value: dict[str, Any]
    index: Any = None
    ttl: float | None = None


class DeleteIn(Schema):
    namespace: list[Any]
    key: str = Field(..., min_length=1, max_length=1000)


class SearchIn(Schema):
    namespace_prefix: list[Any] = []
    filter: dict[str, Any] | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0, le=1_000_000)
    query: str | None = None
    refresh_ttl: bool | None = None


class NamespacesIn(Schema):
    prefix: list[Any] | None = None
    suffix: list[Any] | None = None
    max_depth: int | None = Field(None, ge=1, le=MAX_LABELS)
    limit: int = Field(100, ge=1, le=1000)
    offset: int = Field(0, ge=0, le=1_000_000)


def _allowed(request) -> None:
    if not user_can_use_store(request.user):
        raise errors.Forbidden(
            "The store is every graph's shared memory: it needs the hitl.use_store permission."
        )


def _namespace(labels: Any, *, empty_ok: bool = False) -> tuple[str, ...]:
    if not isinstance(labels, list | tuple) or (not labels and not empty_ok):
        raise errors.Invalid("namespace must be a non-empty list of labels.")
    if len(labels) > MAX_LABELS:
        raise errors.Invalid(f"namespace has more than {MAX_LABELS} labels.")
    for label in labels:
        if not isinstance(label, str) or not label or "." in label or len(label) > 200:
            raise errors.Invalid(
                f"Namespace label {label!r} must be a non-empty string without periods."
            )
    check_storable(list(labels), "namespace")
    return tuple(labels)


def _item(item: Any) -> dict[str, Any]:
    return item.dict()


@router.put("/items", response={204: None, **ERRORS}, tags=["store"])
def store_put(request, body: PutIn):
    _allowed(request)
    namespace = _namespace(body.namespace)
    check_storable(body.value, "value")
    check_storable(body.key, "key")
    if body.index not in (None, False):
        raise errors.Invalid(
            "index: HITL's store has no embeddings index (semantic search is not configured)."
        )
    if body.ttl is not None:
        raise errors.Invalid("ttl: HITL's store keeps items until they are deleted.")
    store().put(namespace, body.key, body.value, index=False)
    return 204, None


@router.get("/items", response={200: dict | None, **ERRORS}, tags=["store"])
def store_get(request, key: str, namespace: str = "", refresh_ttl: bool | None = None):
    _allowed(request)
    item = store().get(_namespace(namespace.split(".")), key)
    return None if item is None else _item(item)


@router.delete("/items", response={204: None, **ERRORS}, tags=["store"])
def store_delete(request, body: DeleteIn):
    _allowed(request)
    store().delete(_namespace(body.namespace), body.key)
    return 204, None


@router.post("/items/search", response={200: dict, **ERRORS}, tags=["store"])
def store_search(request, body: SearchIn):
    _allowed(request)
    if body.query:
        raise errors.Invalid(
            "query: semantic search needs an embeddings index, which HITL's store does not "
            "have; search with namespace_prefix and filter instead."
        )
    check_storable(body.filter, "filter")
    items = store().search(
        _namespace(body.namespace_prefix, empty_ok=True),
        filter=body.filter,
        limit=body.limit,
        offset=body.offset,
    )
    return {"items": [_item(i) for i in items]}


@router.post("/namespaces", response={200: dict, **ERRORS}, tags=["store"])
def store_namespaces(request, body: NamespacesIn):
    _allowed(request)
    prefix = _namespace(body.prefix) if body.prefix else None
    suffix = _namespace(body.suffix) if body.suffix else None
    found = store().list_namespaces(
        prefix=prefix,
        suffix=suffix,
        max_depth=body.max_depth,
        limit=body.limit,
        offset=body.offset,
    )
    return {"namespaces": [list(ns) for ns in found]}
