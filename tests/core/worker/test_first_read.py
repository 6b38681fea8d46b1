"""A thread's first run starts without reading a checkpoint it knows is not there.

When LangGraph's tables are in the runs' database, the run's lease also reads whether
its thread has any checkpoint, in the same statement; when it has none, the run
engine's saver answers the graph's first read itself. Everything else still reads.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

from hitl.api.langgraph import services as lg_services
from hitl.core import decisions
from hitl.core.models import HumanInterrupt, Run
from hitl.core.threads import verbs
from hitl.core.worker import lease
from hitl.core.worker.engine import engine

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


@pytest.fixture
def reads(monkeypatch) -> list[dict]:
    """The configs of the saver reads that went to the database (the stock read)."""
    seen: list[dict] = []
    stock = AsyncPostgresSaver.aget_tuple

    async def counted(self, config):
        seen.append(config["configurable"])
        return await stock(self, config)

    monkeypatch.setattr(AsyncPostgresSaver, "aget_tuple", counted)
    return seen


def _start(requester) -> Run:
    thread = lg_services.thread_create(user=requester)
    return lg_services.run_create(user=requester, assistant_id="approval", thread=thread, input={})


def _warm(manual_runs, requester) -> None:
    """One run, so that this process's saver (and its tables) exists."""
    assert manual_runs(_start(requester)) == "interrupted"
    assert engine.checkpoints_beside_runs()


def test_the_lease_says_whether_the_thread_has_a_checkpoint(
    manual_runs, requester, reviewers_group, reviewer
):
    _warm(manual_runs, requester)
    new = _start(requester)
    claimed, _ = lease.run_lease_take(run_id=new.pk, worker="w1", checkpoints=True)
    assert claimed is not None and claimed.checkpointless is True

    paused = _start(requester)
    assert manual_runs(paused) == "interrupted"
    row = HumanInterrupt.objects.get(thread_id=paused.thread_id)
    decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept")
    resume = Run.objects.get(thread_id=paused.thread_id, kind="resume")
    claimed, _ = lease.run_lease_take(run_id=resume.pk, worker="w1", checkpoints=True)
    assert claimed is not None and claimed.checkpointless is False

    # Not asked: never said.
    other = _start(requester)
    claimed, _ = lease.run_lease_take(run_id=other.pk, worker="w1")
    assert claimed is not None and claimed.checkpointless is False


def test_a_new_threads_first_run_reads_no_checkpoint_and_its_resume_does(
    manual_runs, requester, reviewers_group, reviewer, reads
):
    _warm(manual_runs, requester)
    run = _start(requester)
    reads.clear()
    assert manual_runs(run) == "interrupted"
    assert [c for c in reads if c["thread_id"] == str(run.thread_id)] == []

    row = HumanInterrupt.objects.get(thread_id=run.thread_id)
    decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept")
    resume = Run.objects.get(thread_id=run.thread_id, kind="resume")
    assert manual_runs(resume) == "success"
    assert len([c for c in reads if c["thread_id"] == str(run.thread_id)]) >= 1
    resume.refresh_from_db()
    assert resume.result["sent"] is True


def test_state_written_before_the_first_run_is_read(manual_runs, requester, reviewers_group, reads):
    _warm(manual_runs, requester)
    thread = lg_services.thread_create(user=requester, metadata={"graph_id": "approval"})
    verbs.thread_update_state(
        thread=thread,
        user=requester,
        values={"to": "ops@example.com"},
        as_node="propose",
        checkpoint_id=None,
    )
    run = lg_services.run_create(user=requester, assistant_id="approval", thread=thread, input={})
    reads.clear()
    assert manual_runs(run) == "interrupted"
    assert [c for c in reads if c["thread_id"] == str(thread.pk)]  # asked the database
    row = HumanInterrupt.objects.get(thread_id=thread.pk, status="pending")
    assert row.args["to"] == "ops@example.com"  # and ran on what it read


def test_the_saver_answers_one_root_read_of_a_thread_and_no_other(test_database_url, reads):
    from agents.checkpoint import _amake

    async def main() -> list:
        saver = await _amake(test_database_url, 2)
        assert hasattr(saver, "expect_empty")  # the run engine's saver
        thread_id = str(uuid.uuid4())
        root = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        sub = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "child:1"}}
        try:
            saver.expect_empty(thread_id)
            answered = [await saver.aget_tuple(root)]  # answered here
            answered.append(await saver.aget_tuple(root))  # asked: the mark is spent
            saver.expect_empty(thread_id)
            answered.append(await saver.aget_tuple(sub))  # a subgraph's: asked
            answered.append(await saver.aget_tuple(root))  # and the mark went with it
            saver.expect_empty(thread_id)
            saver.forget_empty(thread_id)
            answered.append(await saver.aget_tuple(root))  # forgotten: asked
            return answered
        finally:
            await saver.conn.close()

    assert asyncio.run(main()) == [None] * 5  # the thread has no checkpoint at all
    assert [c["checkpoint_ns"] for c in reads] == ["", "child:1", "", ""]
