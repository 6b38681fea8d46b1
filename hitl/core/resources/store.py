"""LangGraph's store as LangGraph Server serves it: put, get, delete, search and list
namespaces on the same store graphs get.

The store is every graph's shared memory, so each call takes the hitl.use_store
permission. Semantic search needs an embeddings index, which HITL does not configure:
a query or an index is refused with an Invalid that says so, as is a ttl.
"""

from __future__ import annotations

from typing import Any

from hitl.core.access.permissions import user_can_use_store
from hitl.core.errors import Forbidden, Invalid, check_storable
from hitl.core.runs.graphs import store

MAX_LABELS = 20
# The comparison operators LangGraph's Postgres and SQLite stores both implement.
FILTER_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


def _allowed(user) -> None:
    if not user_can_use_store(user):
        raise Forbidden(
            "The store is every graph's shared memory: it needs the hitl.use_store permission."
        )


def _namespace(labels: Any, *, empty_ok: bool = False) -> tuple[str, ...]:
    if not isinstance(labels, list | tuple) or (not labels and not empty_ok):
        raise Invalid("namespace must be a non-empty list of labels.")
    if len(labels) > MAX_LABELS:
        raise Invalid(f"namespace has more than {MAX_LABELS} labels.")
    for label in labels:
        if not isinstance(label, str) or not label or "." in label or len(label) > 200:
            raise Invalid(f"Namespace label {label!r} must be a non-empty string without periods.")
    check_storable(list(labels), "namespace")
    return tuple(labels)


def _check_filter(filter: dict[str, Any] | None) -> None:
    """An object value in a filter is a set of operators: only those the store has."""
    for key, value in (filter or {}).items():
        if not isinstance(value, dict):
            continue  # a plain value: equality
        for operator in value:
            if operator not in FILTER_OPERATORS:
                raise Invalid(
                    f"filter: unsupported operator {operator!r} on {key!r}; the store "
                    f"supports {', '.join(FILTER_OPERATORS)} (or a plain value for equality)."
                )


def store_item_put(
    *,
    user,
    namespace: list[Any],
    key: str,
    value: dict[str, Any],
    index: Any = None,
    ttl: float | None = None,
) -> None:
    """Put `value` under `key` in `namespace`, replacing what was there."""
    _allowed(user)
    labels = _namespace(namespace)
    check_storable(value, "value")
    check_storable(key, "key")
    if index not in (None, False):
        raise Invalid(
            "index: HITL's store has no embeddings index (semantic search is not configured)."
        )
    if ttl is not None:
        raise Invalid("ttl: HITL's store keeps items until they are deleted.")
    store().put(labels, key, value, index=False)


def store_item_get(*, user, namespace: list[Any], key: str) -> Any:
    """The store's Item under `key` in `namespace`, or None."""
    _allowed(user)
    return store().get(_namespace(namespace), key)


def store_item_delete(*, user, namespace: list[Any], key: str) -> None:
    """Delete the item under `key` in `namespace` (nothing there is not an error)."""
    _allowed(user)
    store().delete(_namespace(namespace), key)


def store_items_search(
    *,
    user,
    namespace_prefix: list[Any],
    filter: dict[str, Any] | None = None,
    limit: int = 10,
    offset: int = 0,
    query: str | None = None,
) -> list[Any]:
    """The store's Items under `namespace_prefix` whose values match `filter`."""
    _allowed(user)
    if query:
        raise Invalid(
            "query: semantic search needs an embeddings index, which HITL's store does not "
            "have; search with namespace_prefix and filter instead."
        )
    check_storable(filter, "filter")
    _check_filter(filter)
    try:
        return store().search(
            _namespace(namespace_prefix, empty_ok=True),
            filter=filter,
            limit=limit,
            offset=offset,
        )
    except ValueError as exc:
        # The SQLite store refuses keys it cannot put in a JSON path, in its own words.
        raise Invalid(f"filter: {exc}") from None


def store_namespaces_list(
    *,
    user,
    prefix: list[Any] | None = None,
    suffix: list[Any] | None = None,
    max_depth: int | None = None,
    limit: int = 100,
    offset: int = 0,
) -> list[tuple[str, ...]]:
    """The store's namespaces that start with `prefix` and end with `suffix`."""
    _allowed(user)
    prefix_labels = _namespace(prefix) if prefix else None
    suffix_labels = _namespace(suffix) if suffix else None
    return store().list_namespaces(
        prefix=prefix_labels,
        suffix=suffix_labels,
        max_depth=max_depth,
        limit=limit,
        offset=offset,
    )
