"""Graph registry: names map to "module:attr" import paths, like langgraph.json."""

from __future__ import annotations

import importlib
from typing import Any

from langgraph.graph import StateGraph
from langgraph.pregel import Pregel


class UnknownGraph(LookupError):
    pass


def import_target(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise ValueError(f"Graph target {target!r} must look like 'package.module:attribute'.")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def with_checkpointer(obj: Any, checkpointer: Any) -> Pregel:
    """Return a compiled graph bound to the given checkpointer.

    Accepts a compiled graph, an uncompiled StateGraph, or a zero-argument factory
    returning either.
    """
    if isinstance(obj, StateGraph):
        return obj.compile(checkpointer=checkpointer)
    if isinstance(obj, Pregel):
        return obj.copy(update={"checkpointer": checkpointer})
    if callable(obj):
        return with_checkpointer(obj(), checkpointer)
    raise TypeError(f"{obj!r} is not a LangGraph graph")


class GraphRegistry:
    """Loads each registered graph once per process and binds it to a checkpointer."""

    def __init__(self, targets: dict[str, str]):
        self.targets = dict(targets)
        self._loaded: dict[tuple[str, int], Pregel] = {}

    def names(self) -> list[str]:
        return sorted(self.targets)

    def get(self, name: str, checkpointer: Any) -> Pregel:
        if name not in self.targets:
            raise UnknownGraph(f"Unknown graph {name!r}; registered: {', '.join(self.names())}.")
        key = (name, id(checkpointer))
        if key not in self._loaded:
            self._loaded[key] = with_checkpointer(import_target(self.targets[name]), checkpointer)
        return self._loaded[key]
