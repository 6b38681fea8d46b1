"""Helpers for the core room's tests: graphs run in this process and what they leave."""

from __future__ import annotations

import pytest

from hitl.core import runs
from hitl.core.models import AuditEvent, HumanInterrupt, Run, Thread
from hitl.core.registry import registry
from hitl.core.runs.graphs import checkpointer
from tests.graphs import register_in_process


@pytest.fixture
def in_process_graphs(monkeypatch):
    """The test graphs (tests/graphs.py) in this process's registry."""
    register_in_process(monkeypatch)


@pytest.fixture
def start(in_process_graphs, manual_runs, requester, reviewers_group):
    """Start a thread as the requester and run it until it pauses or ends."""

    def start_(graph: str, input: dict | None = None, user=None) -> Thread:
        run = runs.run_start(graph=graph, input=input or {}, user=user or requester)
        manual_runs(run)
        return Thread.objects.get(pk=run.thread_id)

    return start_


def pending(thread) -> list[HumanInterrupt]:
    return list(thread.interrupts.pending().order_by("interrupt_id", "position"))


def state_of(thread):
    graph = registry.get(thread.graph, checkpointer())
    return graph.get_state({"configurable": {"thread_id": str(thread.pk)}})


def resume(thread, manual_runs) -> Run:
    """Execute the single resume run of the thread's latest answers."""
    run = Run.objects.filter(thread=thread, kind=Run.Kind.RESUME, status="queued").get()
    assert manual_runs(run) in ("success", "interrupted")
    run.refresh_from_db()
    return run


def snapshot(thread) -> dict:
    """Everything a refused decision must leave untouched: rows and the checkpoint."""
    state = state_of(thread)
    return {
        "thread": Thread.objects.filter(pk=thread.pk).values().get(),
        "runs": list(Run.objects.filter(thread=thread).order_by("created_at").values()),
        "interrupts": list(
            HumanInterrupt.objects.filter(thread=thread)
            .order_by("interrupt_id", "position")
            .values()
        ),
        "audit": list(AuditEvent.objects.filter(thread=thread).values_list("pk", flat=True)),
        "checkpoint": state.config["configurable"]["checkpoint_id"],
        "values": state.values,
        "next": state.next,
        "pending": [(i.id, i.value) for i in state.interrupts],
    }
