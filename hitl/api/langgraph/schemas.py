"""Request bodies of the LangGraph-compatible API (the shapes langgraph_sdk sends)."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from ninja import Field, Schema

from hitl.api.langgraph.streaming import STREAM_MODES

SortOrder = Literal["asc", "desc"]
MAX_OFFSET = 1_000_000_000  # beyond it SQL OFFSET arithmetic would overflow
# "tools" and "lifecycle" parse, to be refused as LangGraph Server refuses them (run_create).
_MODES = (*STREAM_MODES, "tools", "lifecycle")
StreamModes = list[Literal[_MODES]] | Literal[_MODES] | None  # type: ignore[valid-type]


AssistantField = Literal[
    "assistant_id",
    "graph_id",
    "name",
    "description",
    "config",
    "context",
    "metadata",
    "version",
    "created_at",
    "updated_at",
]


class AssistantCountIn(Schema):
    graph_id: str | None = None
    name: str | None = None
    metadata: dict[str, Any] | None = None


class AssistantSearchIn(AssistantCountIn):
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0, le=MAX_OFFSET)
    sort_by: Literal["assistant_id", "graph_id", "name", "created_at", "updated_at"] | None = None
    sort_order: SortOrder | None = None
    select: list[AssistantField] | None = None


class AssistantCreateIn(Schema):
    graph_id: str
    assistant_id: str | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] | None = None
    name: str | None = Field(None, max_length=200)
    description: str | None = Field(None, max_length=10_000)


class AssistantPatchIn(Schema):
    graph_id: str | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    name: str | None = Field(None, max_length=200)
    description: str | None = Field(None, max_length=10_000)


class AssistantVersionsIn(Schema):
    metadata: dict[str, Any] | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0, le=MAX_OFFSET)


class AssistantLatestIn(Schema):
    version: int = Field(..., ge=1)


class ThreadCreateIn(Schema):
    thread_id: uuid.UUID | None = None
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] = "raise"
    graph_id: str | None = None


class ThreadPatchIn(Schema):
    metadata: dict[str, Any] = {}


class ThreadSearchIn(Schema):
    ids: list[uuid.UUID] | None = Field(None, max_length=1000)
    metadata: dict[str, Any] | None = None
    values: dict[str, Any] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0, le=MAX_OFFSET)
    sort_by: Literal["thread_id", "status", "created_at", "updated_at"] | None = None
    sort_order: SortOrder | None = None


class ThreadCountIn(Schema):
    metadata: dict[str, Any] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None


class CheckpointIn(Schema):
    checkpoint_id: str | None = None
    checkpoint_ns: str = ""


class StateCheckpointIn(Schema):
    checkpoint: CheckpointIn
    subgraphs: bool = False


class StateUpdateIn(Schema):
    values: Any = None
    as_node: str | None = None
    checkpoint_id: str | None = None
    checkpoint: CheckpointIn | None = None


class HistoryIn(Schema):
    limit: int = Field(10, ge=1, le=1000)
    before: str | CheckpointIn | None = None
    metadata: dict[str, Any] | None = None
    checkpoint: CheckpointIn | None = None


class CommandIn(Schema):
    resume: Any = None
    update: Any = None
    goto: Any = None


class RunCreateIn(Schema):
    assistant_id: str
    input: Any = None
    command: CommandIn | None = None
    metadata: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    webhook: str | None = Field(None, max_length=500)
    stream_mode: StreamModes = None
    stream_subgraphs: bool = False
    stream_resumable: bool = False
    multitask_strategy: Literal["reject"] | None = None
    if_not_exists: Literal["create", "reject"] | None = None
    on_disconnect: Literal["cancel", "continue"] | None = None
    on_completion: Literal["delete", "keep"] | None = None
    durability: Literal["sync", "async", "exit"] | None = None
    interrupt_before: Any = None
    interrupt_after: Any = None
    checkpoint: Any = None
    checkpoint_id: str | None = None
    after_seconds: int | None = None
    feedback_keys: list[str] | None = None


class RunsCancelIn(Schema):
    """Either a thread and some of its runs, or a status (LangGraph's bulk cancel)."""

    thread_id: uuid.UUID | None = None
    run_ids: list[uuid.UUID] | None = Field(None, max_length=1000)
    status: Literal["pending", "running", "all"] | None = None
