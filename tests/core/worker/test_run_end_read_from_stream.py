"""A run's end read from its own stream matches LangGraph's checkpoint, or is not used.

Each case streams a real graph on the real Postgres checkpointer with the modes a
worker uses when nobody listens, and compares what `_StreamEnd` took from the chunks
with `get_state` read afterwards.
"""

from __future__ import annotations

import operator
import uuid
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from agents.graphs.examples import approval_graph, parallel_approval_graph
from agents.registry import with_checkpointer
from hitl.core.models import Run
from hitl.core.runs.graphs import checkpointer
from hitl.core.worker.execute import _StreamEnd

pytestmark = pytest.mark.postgres


def stream(graph, graph_input, config, modes=("updates", "values")) -> _StreamEnd:
    ended = _StreamEnd()
    for mode, chunk in graph.stream(graph_input, config, stream_mode=list(modes)):
        ended.note(mode, chunk)
    return ended


def bound(graph):
    return with_checkpointer(graph, checkpointer())


def new_config() -> dict[str, Any]:
    return {"configurable": {"thread_id": str(uuid.uuid4())}}


def assert_same_as_checkpoint(graph, config, ended: _StreamEnd) -> None:
    assert ended.known()
    state = graph.get_state(config)
    assert ended.values == state.values
    assert [(i.id, i.value) for i in ended.interrupts] == [
        (i.id, i.value) for i in state.interrupts
    ]


@pytest.mark.django_db
def test_a_pause_and_an_end_match_the_checkpoint():
    graph, config = bound(approval_graph), new_config()
    paused = stream(graph, {"request": "report"}, config)
    assert len(paused.interrupts) == 1
    assert "__interrupt__" not in paused.values
    assert_same_as_checkpoint(graph, config, paused)

    interrupt_id = paused.interrupts[0].id
    done = stream(graph, Command(resume={interrupt_id: {"type": "accept"}}), config)
    assert done.interrupts == [] and done.values["sent"] is True
    assert_same_as_checkpoint(graph, config, done)


class Pair(TypedDict, total=False):
    done: Annotated[list[str], operator.add]
    answer: Any


def _quick(state: Pair) -> dict[str, Any]:
    return {"done": ["quick"]}


def _ask(state: Pair) -> dict[str, Any]:
    return {"answer": interrupt("which one?"), "done": ["ask"]}


# A step where one task finishes and its sibling pauses: the finished task's writes
# are pending on the checkpoint, and both sides must show them.
sibling_graph = (
    StateGraph(Pair)
    .add_node("quick", _quick)
    .add_node("ask", _ask)
    .add_edge(START, "quick")
    .add_edge(START, "ask")
    .add_edge("quick", END)
    .add_edge("ask", END)
    .compile()
)


@pytest.mark.django_db
def test_a_pause_beside_a_finished_task_shows_its_writes():
    graph, config = bound(sibling_graph), new_config()
    ended = stream(graph, {"done": []}, config)
    assert ended.values["done"] == ["quick"]
    assert_same_as_checkpoint(graph, config, ended)


@pytest.mark.django_db
def test_parallel_interrupts_are_left_to_the_checkpoint():
    graph, config = bound(parallel_approval_graph), new_config()
    ended = stream(graph, {"request": "both"}, config)
    assert len(ended.interrupts) > 1
    assert not ended.known()


class Counter(TypedDict, total=False):
    n: int


def _count(state: Counter) -> dict[str, Any]:
    return {"n": state.get("n", 0) + 1}


@pytest.mark.django_db
def test_a_breakpoint_is_left_to_the_checkpoint_and_a_finished_graph_shows_its_end():
    graph = bound(
        StateGraph(Counter)
        .add_node("a", _count)
        .add_node("b", _count)
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", END)
        .compile(interrupt_before=["b"])
    )
    config = new_config()
    stopped = stream(graph, {"n": 0}, config)
    assert stopped.breakpoint and not stopped.known()
    assert graph.get_state(config).next == ("b",)  # what the worker then refuses

    finished, config = bound(approval_graph), new_config()
    first = stream(finished, {"request": "x"}, config)
    stream(finished, Command(resume={first.interrupts[0].id: {"type": "ignore"}}), config)
    # A redelivered run with nothing left to do: the stream shows the state as it is.
    again = stream(finished, None, config)
    assert again.values["sent"] is False
    assert_same_as_checkpoint(finished, config, again)


@pytest.mark.django_db
def test_a_run_reads_no_checkpoint_after_a_plain_stream(
    manual_runs, requester, reviewers_group, monkeypatch
):
    """No checkpoint read in a plain half but the stream's own load: not for the
    resume's pending interrupts, not after the end. A parallel pause reads its end."""
    from hitl.core import decisions, runs
    from hitl.core.models import HumanInterrupt
    from hitl.core.worker.engine import engine

    reads: list[str] = []
    saver = engine.saver()  # runs stream on the run engine's async checkpointer
    original = type(saver).aget_tuple

    async def counted(self, config):
        reads.append(config["configurable"].get("checkpoint_id") or "latest")
        return await original(self, config)

    monkeypatch.setattr(type(saver), "aget_tuple", counted)
    run = runs.run_start(graph="approval", input={"request": "r"}, user=requester)
    assert manual_runs(run) == "interrupted"
    assert reads == ["latest"]  # the stream loading the thread's checkpoint, no more
    row = HumanInterrupt.objects.get(thread_id=run.thread_id)
    reviewer = requester
    reviewer.groups.add(row.reviewer_group)
    decisions.interrupt_resolve(
        interrupt_id=row.pk, user=reviewer, response_type="accept", args=None
    )
    resume = Run.objects.get(thread_id=run.thread_id, kind=Run.Kind.RESUME)
    reads.clear()
    assert manual_runs(resume) == "success"
    assert reads == ["latest"]  # only the stream's own load
    resume.refresh_from_db()
    assert resume.result["sent"] is True

    reads.clear()
    run = runs.run_start(graph="parallel_approval", input={}, user=requester)
    assert manual_runs(run) == "interrupted"
    assert reads == ["latest", "latest"]  # the load, and the end read after two pauses
    assert HumanInterrupt.objects.filter(thread_id=run.thread_id).count() > 1
