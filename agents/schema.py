"""A graph's input and state as JSON Schema, for start forms and state edits.

LangGraph builds these with pydantic, which cannot read a `typing.TypedDict` on Python
3.11 (it wants `typing_extensions.TypedDict`), so the built-in graphs and many others
fail there. This falls back to reading the state's type hints key by key: a key whose
type has no JSON Schema (a message, a custom class) becomes "any value".
"""

from __future__ import annotations

import typing
from typing import Any

import pydantic

from agents.state import is_managed

# How a `messages` key is offered: LangGraph's reducer (add_messages) takes message
# dicts ({"role": "user", "content": "..."}) and strings, whatever the declared type.
MESSAGES_KEY = "messages"
MESSAGES_SCHEMA: dict[str, Any] = {
    "type": "array",
    "title": "Messages",
    "items": {"type": ["object", "string"]},
    "x-hitl-messages": True,
}


def _from_hints(state: Any) -> dict[str, Any] | None:
    """A JSON Schema built key by key from the type hints of a state class."""
    try:
        hints = typing.get_type_hints(state, include_extras=True)
    except Exception:  # not a class with type hints (a dict schema, a broken annotation)
        return None
    properties: dict[str, Any] = {}
    defs: dict[str, Any] = {}
    for key, hint in hints.items():
        if is_managed(hint):
            continue
        try:
            schema = pydantic.TypeAdapter(hint).json_schema()
        except Exception:  # a type with no JSON schema: any value
            properties[key] = {"title": key.replace("_", " ").capitalize()}
            continue
        # Shared definitions (enums, models) move to the root so `#/$defs/...` resolves;
        # a name already taken by another type leaves this key untyped rather than wrong.
        own = schema.pop("$defs", {})
        if any(name in defs and defs[name] != value for name, value in own.items()):
            properties[key] = {"title": key.replace("_", " ").capitalize()}
            continue
        defs.update(own)
        schema.setdefault("title", key.replace("_", " ").capitalize())
        properties[key] = schema
    out: dict[str, Any] = {"type": "object", "properties": properties}
    required = [k for k in getattr(state, "__required_keys__", ()) if k in properties]
    if required:
        out["required"] = required
    if defs:
        out["$defs"] = defs
    return out


def _schema(graph: Any, method: str, attr: str) -> dict[str, Any] | None:
    try:
        schema = getattr(graph, method)()
    except Exception:
        schema = _from_hints(getattr(getattr(graph, "builder", None), attr, None))
    return schema if isinstance(schema, dict) else None


def state_schema(graph: Any) -> dict[str, Any] | None:
    """The JSON Schema of a compiled graph's state (None when it cannot be told)."""
    return _schema(graph, "get_output_jsonschema", "state_schema")


def input_schema(graph: Any) -> dict[str, Any] | None:
    """The JSON Schema of what a compiled graph takes as input (None when unknown).

    A `messages` key is described as a list of message dicts or strings (see
    MESSAGES_SCHEMA), which is what LangGraph's message reducer accepts.
    """
    schema = _schema(graph, "get_input_jsonschema", "input_schema")
    if schema is None:
        return None
    properties = schema.get("properties")
    if isinstance(properties, dict) and MESSAGES_KEY in properties:
        schema = {**schema, "properties": {**properties, MESSAGES_KEY: dict(MESSAGES_SCHEMA)}}
    return schema


def is_messages(prop: Any) -> bool:
    """Whether a property of `input_schema` is the message list."""
    return isinstance(prop, dict) and bool(prop.get("x-hitl-messages"))
