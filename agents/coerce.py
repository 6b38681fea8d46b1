"""Read typed values out of the strings that string-sending clients edit with.

LangChain's Agent Inbox edits every argument in a text box and sends what was typed
as a string (`"3"`, `"true"`, `'["a", "b"]'`). For such clients an edit is converted
to the JSON type the tool's argument schema asks for (or, without a schema, the type
of the proposed value) before it is validated. Typed clients never come here.
"""

from __future__ import annotations

import json
import re
from typing import Any

_INTEGER = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_BOOLEANS = {"true": True, "false": False}


def _ref(root: dict[str, Any], node: Any) -> Any:
    ref = node.get("$ref") if isinstance(node, dict) else None
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return (root.get("$defs") or {}).get(ref[len("#/$defs/") :])
    return node


def schema_types(root: dict[str, Any], node: Any) -> list[str]:
    """The JSON types a (sub)schema admits, in the order it names them."""
    node = _ref(root, node)
    if not isinstance(node, dict):
        return []
    types: list[str] = []
    declared = node.get("type")
    if isinstance(declared, str):
        types.append(declared)
    elif isinstance(declared, list):
        types.extend(t for t in declared if isinstance(t, str))
    if "const" in node or "enum" in node:
        values = [node["const"]] if "const" in node else node.get("enum") or []
        types.extend(json_type(v) for v in values)
    for key in ("anyOf", "oneOf", "allOf"):
        for branch in node.get(key) or []:
            types.extend(schema_types(root, branch))
    return list(dict.fromkeys(types))


def json_type(value: Any) -> str:
    """The JSON Schema type name of a decoded JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _convert(text: str, kind: str) -> tuple[bool, Any]:
    """(converted?, value) for one string read as one JSON type."""
    stripped = text.strip()
    if kind == "integer" and _INTEGER.fullmatch(stripped):
        return True, int(stripped)
    if kind == "number" and _NUMBER.fullmatch(stripped):
        number = float(stripped)
        return True, int(number) if number.is_integer() and _INTEGER.fullmatch(stripped) else number
    if kind == "boolean" and stripped.lower() in _BOOLEANS:
        return True, _BOOLEANS[stripped.lower()]
    if kind == "null" and stripped.lower() in ("", "null"):
        return True, None
    if kind in ("array", "object"):
        try:
            parsed = json.loads(stripped)
        except ValueError:
            return False, text
        if isinstance(parsed, list if kind == "array" else dict):
            return True, parsed
    return False, text


def coerce_value(text: str, types: list[str]) -> Any:
    """`text` as the first of `types` it reads as; unchanged when a string is allowed."""
    if not types or "string" in types:
        return text
    for kind in types:
        converted, value = _convert(text, kind)
        if converted:
            return value
    return text  # the validator names the type it wanted


def coerce_edit(
    edited: dict[str, Any], schema: dict[str, Any] | None, proposed: dict[str, Any]
) -> dict[str, Any]:
    """Convert an edit's string values to the types its schema (or the proposal) asks."""
    properties = (schema or {}).get("properties") if isinstance(schema, dict) else None
    out: dict[str, Any] = {}
    for key, value in edited.items():
        if isinstance(value, str):
            if isinstance(properties, dict) and key in properties:
                types = schema_types(schema or {}, properties[key])
            elif schema is None and key in proposed and proposed[key] is not None:
                kind = json_type(proposed[key])
                types = ["number", "integer"] if kind in ("integer", "number") else [kind]
            else:
                types = []
            value = coerce_value(value, types)
        out[key] = value
    return out
