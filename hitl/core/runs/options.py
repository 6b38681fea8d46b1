"""What a new run carries, and what a caller already holds locked: two values, built once
at each edge (an API request, the start form, a cron, a fork) and passed through start
and resume alike, as LangGraph passes a RunnableConfig instead of its fields."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hitl.core.models import HumanInterrupt, Thread


@dataclass(frozen=True)
class RunOptions:
    """The settings a new run (a start or a resume) is stored with, besides its input.

    Checked already: the edge that builds one has refused what it may not carry. On a
    resume, `config`/`context` and `breakpoints` left None go on with the paused run's
    (as a reviewer's answer does), and so does an empty `webhook`; `checkpoint_id`,
    `multitask_strategy` and `supersede` only mean something to a start.
    """

    metadata: Mapping[str, Any] = field(default_factory=dict)
    webhook: str = ""
    # Start from this earlier checkpoint of the thread, forking its history.
    checkpoint_id: str = ""
    stream_modes: Sequence[str] = ()
    stream_subgraphs: bool = False
    config: Mapping[str, Any] | None = None
    context: Mapping[str, Any] | None = None
    # A LangGraph command's goto/update (its resume is the answers, not a setting).
    command: Mapping[str, Any] = field(default_factory=dict)
    breakpoints: Mapping[str, Any] | None = None
    # The stored assistant the run is on, at the version it started with ("" / None: a
    # registered graph's default assistant).
    assistant_id: str = ""
    assistant_version: int | None = None
    # What a run in flight on the thread becomes (hitl.core.runs.multitask): reject
    # (409), interrupt, rollback or enqueue.
    multitask_strategy: str = "reject"
    # New input on a paused thread withdraws its pending interrupts (as LangGraph
    # Server goes on from new input) instead of a 409.
    supersede: bool = False

    def start_fields(self) -> dict[str, Any]:
        """The Run fields of a start."""
        return {
            "metadata": dict(self.metadata),
            "webhook": self.webhook,
            "checkpoint_id": self.checkpoint_id or "",
            "stream_modes": list(self.stream_modes),
            "stream_subgraphs": self.stream_subgraphs,
            "config": dict(self.config or {}),
            "context": dict(self.context or {}),
            "command": dict(self.command),
            "breakpoints": dict(self.breakpoints or {}),
            "assistant_id": self.assistant_id,
            "assistant_version": self.assistant_version,
        }

    def resume_fields(self, row: HumanInterrupt) -> dict[str, Any]:
        """The Run fields of the resume of `row`'s run; what is not set here is the
        paused run's (read only then: the row's run may not be loaded)."""
        paused = row.run if row.run_id else None
        fields: dict[str, Any] = {
            "metadata": dict(self.metadata),
            # The thread's API client keeps hearing about it (hitl/ops/webhooks.py).
            "webhook": self.webhook or (paused.webhook if paused else ""),
            "command": dict(self.command),
            "assistant_id": self.assistant_id,
            "assistant_version": self.assistant_version,
        }
        if self.config is not None:
            fields.update(config=dict(self.config), context=dict(self.context or {}))
        elif paused is not None:
            fields.update(config=paused.config, context=paused.context)
        if self.breakpoints is not None:
            fields["breakpoints"] = dict(self.breakpoints)
        elif paused is not None:
            fields["breakpoints"] = paused.breakpoints
        if self.stream_modes:
            fields.update(
                stream_modes=list(self.stream_modes), stream_subgraphs=self.stream_subgraphs
            )
        return fields


@dataclass(frozen=True)
class Locked:
    """What the caller read with select_for_update in its own open transaction: current,
    so it is not read (or locked) again.

    `row` is an interrupt of `thread` read with its responded_by, reviewer_group and run;
    `siblings` every row of `row`'s run. `answerable`: every row of the thread's paused
    runs, read with the thread (answer_statements.thread_and_answerable_locked).
    """

    thread: Thread
    row: HumanInterrupt | None = None
    siblings: Sequence[HumanInterrupt] | None = None
    answerable: Sequence[HumanInterrupt] | None = None
