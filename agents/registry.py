"""Graph registry: names map to "module:attr" import paths, like langgraph.json."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import threading
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


def _first_paragraph(text: str | None) -> str:
    paragraph = (text or "").strip().split("\n\n", 1)[0]
    return re.sub(r"\s+", " ", paragraph)


# ast.parse is not safe across threads on CPython 3.11 (concurrent first requests of a
# fresh web process got "SystemError: AST constructor recursion depth mismatch"): each
# module is parsed once, by one thread at a time, and its attribute docstrings kept.
_parse_lock = threading.Lock()
_docstrings: dict[str, dict[str, str]] = {}


def _attribute_docstrings(module: Any) -> dict[str, str]:
    """Each module-level name's docstring: the string literal right after `name = ...`
    (as Sphinx reads it)."""
    found = _docstrings.get(module.__name__)
    if found is not None:
        return found
    with _parse_lock:
        found = _docstrings.get(module.__name__)
        if found is None:
            found = _docstrings[module.__name__] = _read_attribute_docstrings(module)
    return found


def _read_attribute_docstrings(module: Any) -> dict[str, str]:
    try:
        body = ast.parse(inspect.getsource(module)).body
    except (OSError, TypeError, SyntaxError):
        return {}
    found: dict[str, str] = {}
    for node, after in zip(body, body[1:], strict=False):
        if not isinstance(node, ast.Assign | ast.AnnAssign):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, ast.Name) and target.id not in found:
                docstring = ""
                if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                    value = after.value.value
                    docstring = value if isinstance(value, str) else ""
                found[target.id] = docstring
    return found


def describe(target: str) -> str:
    """What a registered graph does, in one paragraph, from its docstring.

    The docstring of a factory function; for a graph object, the string literal after its
    assignment (`graph = ...` then `\"\"\"What it does.\"\"\"`); else its module's docstring.
    """
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
        obj = import_target(target)
    except Exception:  # not importable here: nothing to say
        return ""
    if inspect.isfunction(obj) and obj.__doc__:
        return _first_paragraph(obj.__doc__)
    if "." not in attr:
        own = _attribute_docstrings(module).get(attr, "")
        if own:
            return _first_paragraph(own)
    return _first_paragraph(module.__doc__)


def with_checkpointer(obj: Any, checkpointer: Any, store: Any = None) -> Pregel:
    """Return a compiled graph bound to the given checkpointer (and store, which its
    nodes get as LangGraph Server gives it: `get_store()` and the `store` argument).

    Accepts a compiled graph, an uncompiled StateGraph, or a zero-argument factory
    returning either.
    """
    if isinstance(obj, StateGraph):
        return obj.compile(checkpointer=checkpointer, store=store)
    if isinstance(obj, Pregel):
        update = {"checkpointer": checkpointer}
        if store is not None:
            update["store"] = store
        return obj.copy(update=update)
    if callable(obj):
        return with_checkpointer(obj(), checkpointer, store)
    raise TypeError(f"{obj!r} is not a LangGraph graph")


class GraphRegistry:
    """Loads each registered graph once per process and binds it to a checkpointer."""

    def __init__(self, targets: dict[str, str]):
        self.targets = dict(targets)
        self._loaded: dict[tuple[str, int, int], Pregel] = {}
        self._lock = threading.RLock()

    def names(self) -> list[str]:
        return sorted(self.targets)

    def get(self, name: str, checkpointer: Any, store: Any = None) -> Pregel:
        if name not in self.targets:
            raise UnknownGraph(f"Unknown graph {name!r}; registered: {', '.join(self.names())}.")
        key = (name, id(checkpointer), id(store))
        loaded = self._loaded.get(key)
        if loaded is not None:
            return loaded
        # A worker's first runs ask together: the graph (or its factory) is built once.
        with self._lock:
            if key not in self._loaded:
                target = import_target(self.targets[name])
                self._loaded[key] = with_checkpointer(target, checkpointer, store)
            return self._loaded[key]
