"""Graphs the assistants, store and cron tests register (HITL_EXTRA_GRAPHS=PARITY_GRAPHS).

`echo_config` writes what the graph saw of its config and context into its state.
`memory` keeps a per-user count in LangGraph's store, through the node's `store`
argument and through `get_store()`, and reports both reads.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from typing_extensions import TypedDict

TARGETS = {
    "echo_config": "tests.api.parity_graphs:echo_config_graph",
    "memory": "tests.api.parity_graphs:memory_graph",
}
PARITY_GRAPHS = ",".join(f"{name}={target}" for name, target in TARGETS.items())


class EchoState(TypedDict, total=False):
    request: str
    seen: dict[str, Any]


def _echo(state: EchoState, config: RunnableConfig, runtime: Runtime) -> dict[str, Any]:
    configurable = {
        k: v
        for k, v in (config.get("configurable") or {}).items()
        if not k.startswith("__") and not k.startswith("hitl_") and not k.startswith("checkpoint")
    }
    configurable.pop("thread_id", None)
    return {
        "seen": {
            "configurable": configurable,
            "recursion_limit": config.get("recursion_limit"),
            "tags": config.get("tags") or [],
            "context": runtime.context,
        }
    }


_echo_builder = StateGraph(EchoState)
_echo_builder.add_node("echo", _echo)
_echo_builder.add_edge(START, "echo")
_echo_builder.add_edge("echo", END)
echo_config_graph = _echo_builder.compile()


class MemoryState(TypedDict, total=False):
    user: str
    count: int
    via_get_store: int


def _remember(state: MemoryState, store: BaseStore) -> dict[str, Any]:
    namespace = ("visits", state.get("user") or "anyone")
    item = store.get(namespace, "count")
    count = (item.value["n"] if item else 0) + 1
    store.put(namespace, "count", {"n": count})
    again = get_store().get(namespace, "count")
    return {"count": count, "via_get_store": again.value["n"] if again else -1}


_memory_builder = StateGraph(MemoryState)
_memory_builder.add_node("remember", _remember)
_memory_builder.add_edge(START, "remember")
_memory_builder.add_edge("remember", END)
memory_graph = _memory_builder.compile()
