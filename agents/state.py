"""The agent state and its reducers."""

from __future__ import annotations

import typing
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from langgraph.managed import RemainingSteps
from langgraph.managed.base import is_managed_value


def merge_unique(left: list[str] | None, right: list[str] | str | None) -> list[str]:
    """Append new items, keep the first occurrence's position, drop duplicates."""
    merged = list(dict.fromkeys(left or []))
    if right is None:
        return merged
    for item in [right] if isinstance(right, str) else right:
        if item not in merged:
            merged.append(item)
    return merged


def merge_dicts(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    return {**(left or {}), **(right or {})}


class ImageRef(TypedDict):
    """What the state keeps of a viewed image: no pixels, so checkpoints stay small."""

    mime_type: str
    size: int
    path: str


class AgentState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    # Convenience input: {"request": "..."} becomes the next user message.
    request: str | None
    # Virtual paths of presented files (/mnt/user-data/outputs/...), in order.
    artifacts: Annotated[list[str], merge_unique]
    viewed_images: Annotated[dict[str, ImageRef], merge_dicts]
    # The reviewer group the agent routed its next interrupts to (None: the default).
    reviewer_group: str | None
    # The structured result the agent finished with; stored on the run.
    final_result: dict[str, Any] | None
    remaining_steps: RemainingSteps


# What the agent writes and never takes: its input schema leaves these keys out, so start
# forms and API clients that read the graph's input schema do not offer them.
OUTPUT_ONLY = ("artifacts", "viewed_images", "final_result")


def is_managed(hint: Any) -> bool:
    """Whether a state key is a LangGraph managed value (never part of the input)."""
    if typing.get_origin(hint) is Annotated:
        return any(is_managed_value(meta) for meta in typing.get_args(hint)[1:])
    return is_managed_value(hint)


def input_schema_of(state_schema: type) -> type:
    """The agent's input: its state's keys but the output-only ones and managed values
    (never input), with their reducers (a subclass of AgentState keeps its own keys)."""
    hints = typing.get_type_hints(state_schema, include_extras=True)
    keys = {k: v for k, v in hints.items() if k not in OUTPUT_ONLY and not is_managed(v)}
    return TypedDict(f"{state_schema.__name__}Input", keys, total=False)  # type: ignore[operator]
