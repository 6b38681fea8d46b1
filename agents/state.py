"""The agent state and its reducers."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from langgraph.managed import RemainingSteps


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
