"""Helpers shared by the built-in tools."""

from __future__ import annotations

import json
import re
from typing import Any

from langchain_core.tools import ToolException

from agents.paths import FileAccessError, ThreadFiles, files_from_config

RESPONSE_TYPES = ("accept", "ignore", "response", "edit")

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+!|~])")


def escape_md(value: Any) -> str:
    """Escape model-written text before it goes into a markdown description."""
    return _MD_SPECIAL.sub(r"\\\1", str(value))


def thread_files(runtime: Any) -> ThreadFiles:
    """The thread's file store from a ToolRuntime (or a RunnableConfig)."""
    config = getattr(runtime, "config", runtime)
    try:
        return files_from_config(config)
    except FileAccessError as exc:
        raise ToolException(str(exc)) from None


def state_value(state: Any, key: str, default: Any = None) -> Any:
    if isinstance(state, dict):
        return state.get(key, default)
    return getattr(state, key, default)


def read_human_response(value: Any) -> tuple[str, Any]:
    """Normalize a resume value into (type, args).

    HITL resumes a HumanInterrupt with {"type", "args"}; a list of one such dict and a
    bare string (e.g. `Command(resume="Q3")` from another client) are accepted too.
    """
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, str):
        return "response", value
    if value is None:
        return "ignore", None
    if isinstance(value, dict) and value.get("type") in RESPONSE_TYPES:
        return value["type"], value.get("args")
    raise ToolException(
        f"The review answer could not be read ({json.dumps(value, default=str)[:200]}); "
        "nothing was done."
    )


def parse_string_list(value: Any, *, field: str) -> list[str] | None:
    """A list of strings, also when the model sent it as a JSON-encoded string."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            raise ToolException(
                f'`{field}` must be a list of strings, e.g. ["a", "b"]; got the text {text[:80]!r}.'
            ) from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ToolException(f'`{field}` must be a list of strings, e.g. ["a", "b"].')
    return [v.strip() for v in value if v.strip()]
