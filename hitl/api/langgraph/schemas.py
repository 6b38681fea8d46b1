"""Request bodies of the LangGraph-compatible API (the shapes langgraph_sdk sends)."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from ninja import Field, Schema
from pydantic import model_validator

from hitl.api.langgraph.streaming import STREAM_MODES
from hitl.core import errors

SortOrder = Literal["asc", "desc"]
# What `select` may name in a thread (LangGraph Server's ThreadSelectField).
ThreadField = Literal[
    "thread_id",
    "created_at",
    "updated_at",
    "metadata",
    "config",
    "context",
    "status",
    "values",
    "interrupts",
]
MAX_OFFSET = 1_000_000_000  # beyond it SQL OFFSET arithmetic would overflow
# "tools" and "lifecycle" parse, to be refused as LangGraph Server refuses them (run_create).
_MODES = (*STREAM_MODES, "tools", "lifecycle")
StreamModes = list[Literal[_MODES]] | Literal[_MODES] | None  # type: ignore[valid-type]


RunField = Literal[
    "run_id",
    "thread_id",
    "assistant_id",
    "created_at",
    "updated_at",
    "status",
    "metadata",
    "kwargs",
    "multitask_strategy",
]

# Parameters of LangGraph Server that HITL refuses rather than ignore, and why (docs/langgraph-api.md).
UNSUPPORTED = {
    "ttl": "thread TTLs are not supported: HITL keeps threads with their audit trail "
    "(delete them with threads.delete).",
    "supersteps": "creating a thread from supersteps is not supported: create it, then "
    "update_state.",
    "values": "filtering threads by state values is not supported (state lives in the "
    "checkpointer, not in the thread rows); filter by metadata or status.",
    "extract": "extract is not supported; read the values with select or get_state.",
    "after_seconds": "delayed runs are not supported: HITL queues a run at once.",
    "on_completion": 'on_completion="delete" is not supported: HITL keeps every thread '
    "with its audit trail (delete it with threads.delete).",
    "durability": 'HITL checkpoints every step before the next (durability "sync"), so a '
    "killed worker's run resumes without repeating side-effecting tools; send "
    '"sync" or nothing.',
    "checkpoint_during": "HITL checkpoints every step (checkpoint_during true); send true "
    "or nothing.",
    "feedback_keys": "LangSmith feedback is not supported: HITL does not trace runs to "
    "LangSmith (its audit trail records each run and decision).",
    "langsmith_tracer": "LangSmith tracing is not supported: HITL does not trace runs to "
    "LangSmith (its audit trail records each run and decision).",
    "strategy": 'only the "delete" strategy is supported: "keep_latest" would rewrite '
    "checkpoint history the audit trail points into.",
}


def refuse_unsupported(**sent: Any) -> None:
    """A clear 400 for each parameter HITL does not support that the client set."""
    for name, value in sent.items():
        if value not in (None, [], {}):
            raise errors.Invalid(f"{name}: {UNSUPPORTED[name]}")


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


class ObjectBody(Schema):
    """A body that must be a JSON object. ninja's Schema reads attributes, so a list, a
    string, a number or null would otherwise pass as an empty body (an empty change)."""

    @model_validator(mode="wrap")
    @classmethod
    def _object_only(cls, values, handler, info):
        if not isinstance(values, dict | Schema):
            raise ValueError("The body must be a JSON object.")
        return handler(values)


class AssistantCountIn(ObjectBody):
    graph_id: str | None = None
    name: str | None = None
    metadata: dict[str, Any] | None = None


class AssistantSearchIn(AssistantCountIn):
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0, le=MAX_OFFSET)
    sort_by: Literal["assistant_id", "graph_id", "name", "created_at", "updated_at"] | None = None
    sort_order: SortOrder | None = None
    select: list[AssistantField] | None = None


class AssistantCreateIn(ObjectBody):
    graph_id: str
    assistant_id: str | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] | None = None
    name: str | None = Field(None, max_length=200)
    description: str | None = Field(None, max_length=10_000)


class AssistantPatchIn(ObjectBody):
    graph_id: str | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    name: str | None = Field(None, max_length=200)
    description: str | None = Field(None, max_length=10_000)


class AssistantVersionsIn(ObjectBody):
    metadata: dict[str, Any] | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0, le=MAX_OFFSET)


class AssistantLatestIn(ObjectBody):
    version: int = Field(..., ge=1)


class ThreadCreateIn(Schema):
    thread_id: uuid.UUID | None = None
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] = "raise"
    graph_id: str | None = None
    ttl: Any = None  # refused (docs/langgraph-api.md: what HITL refuses)
    supersteps: Any = None  # refused


class ThreadPatchIn(Schema):
    metadata: dict[str, Any] = {}
    ttl: Any = None  # refused


class ThreadSearchIn(Schema):
    ids: list[uuid.UUID] | None = Field(None, max_length=1000)
    metadata: dict[str, Any] | None = None
    values: dict[str, Any] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0, le=MAX_OFFSET)
    sort_by: Literal["thread_id", "status", "created_at", "updated_at"] | None = None
    sort_order: SortOrder | None = None
    select: list[ThreadField] | None = None
    extract: Any = None  # refused


class ThreadCountIn(Schema):
    metadata: dict[str, Any] | None = None
    values: dict[str, Any] | None = None  # refused, as search refuses it
    status: Literal["idle", "busy", "interrupted", "error"] | None = None


class CheckpointIn(Schema):
    checkpoint_id: str | None = None
    checkpoint_ns: str = ""


class StateCheckpointIn(Schema):
    checkpoint: CheckpointIn
    subgraphs: bool = False
    select: list[str] | None = Field(None, max_length=20)


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
    select: list[str] | None = Field(None, max_length=20)


class PruneIn(Schema):
    thread_ids: list[uuid.UUID] = Field(..., max_length=1000)
    strategy: Literal["delete", "keep_latest"] = "delete"


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
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"] | None = None
    if_not_exists: Literal["create", "reject"] | None = None
    on_disconnect: Literal["cancel", "continue"] | None = None
    on_completion: Literal["delete", "keep"] | None = None
    durability: Literal["sync", "async", "exit"] | None = None
    interrupt_before: list[str] | Literal["*"] | None = None
    interrupt_after: list[str] | Literal["*"] | None = None
    checkpoint: Any = None
    checkpoint_id: str | None = None
    after_seconds: int | None = None
    checkpoint_during: bool | None = None
    feedback_keys: list[str] | None = None  # refused
    langsmith_tracer: dict[str, Any] | None = None  # refused
    # HITL is always strict: a resume naming an interrupt that is not waiting is a 4xx.
    strict_resume: bool | None = None


class RunsCancelIn(Schema):
    """Either a thread and some of its runs, or a status (LangGraph's bulk cancel)."""

    thread_id: uuid.UUID | None = None
    run_ids: list[uuid.UUID] | None = Field(None, max_length=1000)
    status: Literal["pending", "running", "all"] | None = None
