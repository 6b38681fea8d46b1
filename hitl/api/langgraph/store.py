"""LangGraph's store over HTTP (langgraph_sdk's `client.store`), as LangGraph Server
serves it: put, get, delete, search and list namespaces. The same store graphs get.

The store is every graph's shared memory, so these endpoints take the hitl.use_store
permission. Semantic search needs an embeddings index, which HITL does not configure:
a `query` or an `index` list is refused with a 400 that says so, as is a `ttl`. The
checks and the calls on the store live in hitl.core.resources.store.
"""

from __future__ import annotations

from typing import Any

from ninja import Field, Router

from hitl.api.errors import ERRORS
from hitl.api.langgraph.schemas import ObjectBody
from hitl.core.resources.store import (
    MAX_LABELS,
    store_item_delete,
    store_item_get,
    store_item_put,
    store_items_search,
    store_namespaces_list,
)

router = Router()


class PutIn(ObjectBody):
    namespace: list[Any]
    key: str = Field(..., min_length=1, max_length=1000)
    value: dict[str, Any]
    index: Any = None
    ttl: float | None = None


class DeleteIn(ObjectBody):
    namespace: list[Any]
    key: str = Field(..., min_length=1, max_length=1000)


class SearchIn(ObjectBody):
    namespace_prefix: list[Any] = []
    filter: dict[str, Any] | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0, le=1_000_000)
    query: str | None = None
    refresh_ttl: bool | None = None


class NamespacesIn(ObjectBody):
    prefix: list[Any] | None = None
    suffix: list[Any] | None = None
    max_depth: int | None = Field(None, ge=1, le=MAX_LABELS)
    limit: int = Field(100, ge=1, le=1000)
    offset: int = Field(0, ge=0, le=1_000_000)


def _item(item: Any) -> dict[str, Any]:
    return item.dict()


@router.put("/items", response={204: None, **ERRORS}, tags=["store"])
def store_put(request, body: PutIn):
    store_item_put(
        user=request.user,
        namespace=body.namespace,
        key=body.key,
        value=body.value,
        index=body.index,
        ttl=body.ttl,
    )
    return 204, None


@router.get("/items", response={200: dict | None, **ERRORS}, tags=["store"])
def store_get(request, key: str, namespace: str = "", refresh_ttl: bool | None = None):
    item = store_item_get(user=request.user, namespace=namespace.split("."), key=key)
    return None if item is None else _item(item)


@router.delete("/items", response={204: None, **ERRORS}, tags=["store"])
def store_delete(request, body: DeleteIn):
    store_item_delete(user=request.user, namespace=body.namespace, key=body.key)
    return 204, None


@router.post("/items/search", response={200: dict, **ERRORS}, tags=["store"])
def store_search(request, body: SearchIn):
    items = store_items_search(
        user=request.user,
        namespace_prefix=body.namespace_prefix,
        filter=body.filter,
        limit=body.limit,
        offset=body.offset,
        query=body.query,
    )
    return {"items": [_item(i) for i in items]}


@router.post("/namespaces", response={200: dict, **ERRORS}, tags=["store"])
def store_namespaces(request, body: NamespacesIn):
    found = store_namespaces_list(
        user=request.user,
        prefix=body.prefix,
        suffix=body.suffix,
        max_depth=body.max_depth,
        limit=body.limit,
        offset=body.offset,
    )
    return {"namespaces": [list(ns) for ns in found]}
