"""A run's `config` and `context`, merged and checked as LangGraph Server does.

The request's config is merged over the assistant's (its `configurable` key by key),
and so is its context. As in LangGraph Server, a run sends either `configurable` or
`context`, not both, and each mirrors the other (a graph reading either finds the
values). Keys HITL sets itself (the thread id, the checkpoint, the thread's file store
and tool ledger) and LangGraph's internal `__` keys are refused: a client setting them
would run the graph on another thread's files or checkpoints.
"""

from __future__ import annotations

from typing import Any

from agents.ledger import LEDGER_KEY
from agents.paths import FILES_KEY
from hitl.core.errors import Invalid, check_storable

RESERVED_CONFIGURABLE = frozenset(
    ("thread_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map", FILES_KEY, LEDGER_KEY)
)
# What RunnableConfig holds besides `configurable` that JSON can say.
CONFIG_KEYS = frozenset(("tags", "metadata", "run_name", "max_concurrency", "recursion_limit"))
# The worker's recursion limit when neither the assistant nor the run sets one.
DEFAULT_RECURSION_LIMIT = 100


def _reserved(key: str) -> bool:
    return key in RESERVED_CONFIGURABLE or key.startswith(("__", "hitl_"))


def _check_values(values: dict[str, Any], what: str) -> None:
    taken = sorted(k for k in values if _reserved(str(k)))
    if taken:
        raise Invalid(
            f"{what} may not set {', '.join(map(repr, taken))}: HITL sets the thread, "
            "checkpoint, file store and tool ledger of a run itself."
        )


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise Invalid(f"config.{name} must be a positive integer.")
    return value


def check_config(config: Any) -> dict[str, Any]:
    """A request's config as a RunnableConfig JSON object; keys RunnableConfig does not
    have go into `configurable`, as LangGraph's ensure_config puts them."""
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise Invalid("config must be a JSON object.")
    check_storable(config, "config")
    out: dict[str, Any] = {}
    configurable = config.get("configurable")
    if configurable is not None and not isinstance(configurable, dict):
        raise Invalid("config.configurable must be a JSON object.")
    configurable = dict(configurable or {})
    for key, value in config.items():
        if key == "configurable" or value is None:
            continue
        if key == "callbacks":
            raise Invalid("config.callbacks cannot be sent over HTTP.")
        if key not in CONFIG_KEYS:
            configurable[key] = value
        elif key in ("recursion_limit", "max_concurrency"):
            out[key] = _positive_int(value, key)
        elif key == "tags":
            if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
                raise Invalid("config.tags must be a list of strings.")
            out[key] = value
        elif key == "metadata":
            if not isinstance(value, dict):
                raise Invalid("config.metadata must be a JSON object.")
            _check_values(value, "config.metadata")
            out[key] = value
        elif key == "run_name":
            if not isinstance(value, str):
                raise Invalid("config.run_name must be a string.")
            out[key] = value
    _check_values(configurable, "config.configurable")
    if configurable:
        out["configurable"] = configurable
    return out


def run_config_merge(
    *,
    config: Any,
    context: Any,
    assistant_config: dict[str, Any] | None = None,
    assistant_context: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(config, context) of a new run: the assistant's, then the request's, then the
    request's `headers` in `configurable` alone (as LangGraph Server copies them)."""
    config = check_config(config)
    if context is not None and not isinstance(context, dict):
        raise Invalid("context must be a JSON object.")
    context = dict(context or {})
    check_storable(context, "context")
    _check_values(context, "context")
    configurable = config.get("configurable") or {}
    if configurable and context:
        # LangGraph Server's own refusal, word for word in substance.
        raise Invalid("Cannot specify both configurable and context. Prefer setting context alone.")
    # Each mirrors the other, as LangGraph Server hands them to the graph.
    if context:
        configurable = dict(context)
    else:
        context = dict(configurable)
    base = check_config(assistant_config)
    merged: dict[str, Any] = {**base, **{k: v for k, v in config.items() if k != "configurable"}}
    if base.get("metadata") and config.get("metadata"):
        merged["metadata"] = {**base["metadata"], **config["metadata"]}
    merged_configurable = {**(base.get("configurable") or {}), **configurable, **(headers or {})}
    if merged_configurable:
        merged["configurable"] = merged_configurable
    merged_context = {**(assistant_context or {}), **context}
    return merged, merged_context


def graph_config(
    run_config: dict[str, Any], hitl_configurable: dict[str, Any], hitl_metadata: dict[str, Any]
) -> dict[str, Any]:
    """The RunnableConfig the worker streams a run with: the run's, HITL's keys on top."""
    run_config = run_config or {}
    config: dict[str, Any] = {
        k: v for k, v in run_config.items() if k in CONFIG_KEYS and k != "metadata"
    }
    config["configurable"] = {**(run_config.get("configurable") or {}), **hitl_configurable}
    config["metadata"] = {**(run_config.get("metadata") or {}), **hitl_metadata}
    config.setdefault("recursion_limit", DEFAULT_RECURSION_LIMIT)
    return config


def graph_context(graph: Any, context: dict[str, Any] | None) -> Any:
    """The context a graph gets: only the keys its context_schema has (as LangGraph
    Server filters it); None when there is nothing to give."""
    if not context:
        return None
    schema = getattr(graph, "context_schema", None)
    if schema is None:
        return dict(context)
    try:
        props = (graph.get_context_jsonschema() or {}).get("properties")
    except Exception:
        props = None
    if isinstance(props, dict):
        return {k: v for k, v in context.items() if k in props}
    return dict(context)
