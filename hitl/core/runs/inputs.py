"""What a graph takes as input: its JSON Schema, and checking a start input against it."""

from __future__ import annotations

from typing import Any

import jsonschema

from agents.registry import describe
from agents.schema import input_schema
from hitl.core.errors import Invalid
from hitl.core.registry import registry

# name -> (import target, schema, note); the registry loads each graph once per process.
_cache: dict[str, tuple[str, dict[str, Any] | None, str]] = {}

UNDESCRIBED = "This graph does not describe its input; give it as a JSON object."


def graph_input_schema(name: str) -> tuple[dict[str, Any] | None, str]:
    """(the graph's input schema, or None with a note saying why there is none)."""
    if name not in registry.targets:
        raise Invalid(f"Unknown graph {name!r}; registered: {', '.join(registry.names())}.")
    target = registry.targets[name]
    cached = _cache.get(name)
    if cached and cached[0] == target:
        return cached[1], cached[2]
    try:
        # No checkpointer: reading the schema must not open the checkpoint database.
        schema = input_schema(registry.get(name, None))
    except Exception as exc:  # a graph that does not import or compile
        schema, note = (
            None,
            f"This graph could not be loaded ({type(exc).__name__}); give its input as JSON.",
        )
    else:
        props = schema.get("properties") if schema else None
        if not isinstance(props, dict) or not props:
            schema, note = None, UNDESCRIBED
        else:
            note = ""
    _cache[name] = (target, schema, note)
    return schema, note


_descriptions: dict[str, tuple[str, str]] = {}


def graph_description(name: str) -> str:
    """What the graph does, from its docstring (agents.registry.describe); "" if unknown."""
    target = registry.targets.get(name)
    if target is None:
        return ""
    cached = _descriptions.get(name)
    if cached is None or cached[0] != target:
        cached = _descriptions[name] = (target, describe(target))
    return cached[1]


def _where(error: jsonschema.exceptions.ValidationError) -> str | None:
    if error.path:
        return str(error.path[0])
    if error.validator == "required" and isinstance(error.instance, dict):
        # One error per missing key, each saying "'key' is a required property".
        for key in error.validator_value or []:
            if key not in error.instance and error.message == f"{key!r} is a required property":
                return str(key)
    return None


def input_errors(schema: dict[str, Any] | None, value: Any) -> list[tuple[str | None, str]]:
    """Where and why `value` does not match the input schema: (top-level key or None, reason).

    A schema that is itself broken checks nothing (the graph gets the input as it is).
    """
    if not schema:
        return []
    try:
        validator = jsonschema.Draft202012Validator(schema)
        errors = list(validator.iter_errors(value))
    except Exception:  # a broken schema or an unresolvable $ref
        return []
    order = {key: i for i, key in enumerate(schema.get("properties") or {})}
    out = []
    for error in errors:
        key = _where(error)
        if error.validator == "required" and key and not error.path:
            out.append((key, "Required."))
            continue
        where = "/".join(str(p) for p in error.path)
        message = error.message if len(error.message) <= 300 else error.message[:300] + "…"
        out.append((key, f"{where}: {message}" if len(error.path) > 1 else message))
    # In the schema's order (the form's), whatever order the validator found them in.
    return sorted(out, key=lambda item: order.get(item[0], len(order)))
