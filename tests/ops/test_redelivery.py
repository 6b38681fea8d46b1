"""A redelivered run continues from its checkpoint: a review is never skipped.

The worker may die between a node's saved writes and the step's checkpoint. LangGraph
then lists no next node (`state.next` is empty) although the graph has not ended; the
run must continue, pause on its interrupt, and never be recorded as done.
"""

from __future__ import annotations

import copy
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from agents.registry import import_target, with_checkpointer
from hitl.core import decisions, runs
from hitl.core.models import HumanInterrupt, Run, Thread
from hitl.core.registry import registry
from hitl.core.runs.graphs import checkpointer
from hitl.core.worker import graph_input, lease


class Killed(Exception):
    """Stands for SIGKILL: the stream stops there; nothing records the run."""


def dying_copy(saver, *, step: int):
    """The same checkpointer, dying when it is asked to save checkpoint `step`: the
    writes of the tasks before it are saved, the checkpoint that applies them is not."""

    class Dying(type(saver)):
        def put(self, config, checkpoint, metadata, new_versions):
            if metadata.get("step", -1) >= step:
                raise Killed(f"killed before checkpoint {step} was saved")
            return super().put(config, checkpoint, metadata, new_versions)

    dying = copy.copy(saver)
    dying.__class__ = Dying
    return dying


def first_attempt_dies(run: Run, *, step: int) -> None:
    """What the killed worker did: claim, stream until checkpoint `step` would be
    saved, die, and leave its lease to expire."""
    claimed, _ = lease.run_lease_take(run_id=run.pk, worker="doomed:1")
    assert claimed is not None
    graph = with_checkpointer(
        import_target(registry.targets[run.thread.graph]),
        dying_copy(checkpointer(), step=step),
    )
    config = {
        "configurable": {"thread_id": str(run.thread_id)},
        "metadata": {"hitl_run_id": str(run.pk), "hitl_thread_id": str(run.thread_id)},
    }
    with pytest.raises(Killed):
        for _ in graph.stream(
            graph_input.graph_input_for(graph, config, run), config, durability="sync"
        ):
            pass
    # The reaper's view once the lease ran out.
    Run.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def saved_state(run: Run):
    return registry.get(run.thread.graph, checkpointer()).get_state(
        {"configurable": {"thread_id": str(run.thread_id)}}
    )


def test_a_run_killed_between_writes_and_checkpoint_still_pauses_for_review(
    manual_runs, ops_graphs, transactional_db, requester, tmp_path: Path
):
    run = runs.run_start(graph="ops_gated", input={"dir": str(tmp_path)}, user=requester)
    first_attempt_dies(run, step=1)  # the input step's writes saved; its checkpoint not
    state = saved_state(run)
    assert state.next == () and not state.interrupts  # what once read as "already done"

    assert manual_runs(run) == "interrupted"

    thread = Thread.objects.get(pk=run.thread_id)
    assert thread.status == "interrupted"
    [row] = HumanInterrupt.objects.filter(thread=thread)
    assert row.status == "pending" and row.action == "publish"
    # The saved writes were applied, not recomputed: prepare ran once.
    assert (tmp_path / "prepare.log").read_text().count("\n") == 1
    run.refresh_from_db()
    assert (run.status, run.attempts) == ("interrupted", 2)


def test_a_resume_killed_after_the_approved_step_finishes_without_repeating_it(
    manual_runs, ops_graphs, transactional_db, requester, reviewer, tmp_path: Path
):
    run = runs.run_start(graph="ops_gated", input={"dir": str(tmp_path)}, user=requester)
    assert manual_runs(run) == "interrupted"
    row = HumanInterrupt.objects.get(thread_id=run.thread_id)
    decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept")
    resume = Run.objects.get(thread_id=run.thread_id, kind="resume")
    first_attempt_dies(resume, step=saved_state(resume).metadata["step"] + 2)
    assert (tmp_path / "published.log").read_text().count("\n") == 1

    assert manual_runs(resume) == "success"

    assert Thread.objects.get(pk=run.thread_id).status == "done"
    assert (tmp_path / "published.log").read_text().count("\n") == 1  # not published twice
    assert (tmp_path / "wrapup.log").read_text().count("\n") == 1


# --- the same with real processes: a worker child SIGKILLed at each boundary -------------


def _writes_of(thread_id, node: str) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM checkpoint_writes WHERE thread_id = %s AND task_path LIKE %s",
            [str(thread_id), f"%{node}%"],
        )
        return cursor.fetchone()[0]


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("held_table", "saved_node"),
    [
        # prepare's writes are saved; the checkpoint that applies them waits on the lock
        ("checkpoints", "prepare"),
        # the graph paused (approve's interrupt is saved); recording the rows waits
        ("hitl_humaninterrupt", "approve"),
    ],
)
def test_a_worker_child_killed_at_a_step_boundary_still_pauses_for_review(
    worker_factory,
    ops_graphs,
    transactional_db,
    test_database_url,
    requester,
    tmp_path,
    held_table,
    saved_node,
):
    import os
    import signal

    import psycopg

    from tests.conftest import wait_for
    from tests.ops.conftest import OPS_ENV

    worker = worker_factory("w1", concurrency=1, **OPS_ENV)
    folder = tmp_path / "graph"
    folder.mkdir()
    run = runs.run_start(
        graph="ops_gated", input={"dir": str(folder), "gates": ["prepare"]}, user=requester
    )
    at = wait_for(lambda: list(folder.glob("at-prepare-*")), 30, what="the run to reach prepare")
    child = int(at[0].name.rsplit("-", 1)[1])
    with psycopg.connect(test_database_url) as holder:
        # Writes to the table wait (reads go on) until this transaction ends.
        holder.execute(f"LOCK TABLE {held_table} IN EXCLUSIVE MODE")
        (folder / "open-prepare").touch()
        wait_for(lambda: _writes_of(run.thread_id, saved_node), 30, what=f"{saved_node}'s writes")
        os.kill(child, signal.SIGKILL)
        holder.rollback()

    def paused():
        thread = Thread.objects.get(pk=run.thread_id)
        assert thread.status not in ("done", "error"), thread.status
        return thread.status == "interrupted"

    wait_for(paused, 60, 0.1, "the redelivered run to pause")
    [row] = HumanInterrupt.objects.filter(thread_id=run.thread_id)
    assert row.status == "pending"
    run.refresh_from_db()
    assert run.status == "interrupted" and run.attempts == 2
    assert (folder / "prepare.log").read_text().count("\n") == 1  # saved writes reused
    assert worker.popen.poll() is None  # the parent replaced its child
