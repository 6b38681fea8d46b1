"""Many runs in flight in one worker process: a SIGKILL loses none of them, and the rest
of the system (cancel, undo, four-eyes) keeps working while they await a model."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from django.utils import timezone

from hitl.core import decisions, runs
from hitl.core.errors import error_line
from hitl.core.models import HumanInterrupt, Run, Thread, ToolExecution
from tests.async_graphs import ASYNC_GRAPHS, TARGETS
from tests.conftest import wait_for
from tests.ops.conftest import OPS_ENV

pytestmark = pytest.mark.postgres

ENV = {**OPS_ENV, "HITL_EXTRA_GRAPHS": ASYNC_GRAPHS, "HITL_RUNS_PER_WORKER": "128"}
FAST_BEAT = {"HITL_REAPER_SECONDS": "1", "HITL_EXPIRY_SWEEP_SECONDS": "0.5"}


@pytest.fixture(autouse=True)
def async_graphs(monkeypatch):
    from hitl.core.registry import registry

    for name, target in TARGETS.items():
        monkeypatch.setitem(registry.targets, name, target)


def arrived(folder: Path, gate: str) -> list[int]:
    return sorted(int(p.name.rsplit("-", 1)[1]) for p in folder.glob(f"at-{gate}-*"))


def lines(path: Path) -> int:
    return path.read_text().count("\n") if path.exists() else 0


def threads_in(thread_ids, status: str) -> bool:
    statuses = list(Thread.objects.filter(pk__in=thread_ids).values_list("status", flat=True))
    if "error" in statuses:
        failed = Run.objects.filter(thread_id__in=thread_ids, status="error").first()
        raise AssertionError(failed.error if failed else "a thread failed")
    return statuses.count(status) == len(thread_ids)


def test_a_worker_sigkilled_with_50_runs_in_flight_loses_none_and_repeats_no_tool(
    worker_factory, beat_factory, transactional_db, requester, reviewer, tmp_path
):
    holder = worker_factory("holder", pool="threads", concurrency=64, **ENV)
    dirs = [tmp_path / f"run{i}" for i in range(50)]
    for folder in dirs:
        folder.mkdir()
    starts = [
        runs.run_start(
            graph="fleet", input={"dir": str(folder), "gates": ["model"]}, user=requester
        )
        for folder in dirs
    ]
    thread_ids = [run.thread_id for run in starts]
    wait_for(
        lambda: all(arrived(folder, "model") for folder in dirs),
        90,
        0.2,
        "all 50 runs to await the model",
    )
    # One process holds all of them.
    assert {pid for folder in dirs for pid in arrived(folder, "model")} == {holder.pid}
    holder.stop(signal.SIGKILL)  # nothing acks, nothing requeues, no goodbye to Redis
    for folder in dirs:
        (folder / "open-model").touch()

    # The reaper sees the expired leases and sends the runs again; another worker takes them.
    beat_factory(**FAST_BEAT)
    second = worker_factory("second", pool="threads", concurrency=64, **ENV)
    wait_for(lambda: threads_in(thread_ids, "interrupted"), 120, 0.2, "every run to pause")
    for run in starts:
        run.refresh_from_db()
        assert (run.status, run.attempts) == ("interrupted", 2)
        assert run.lease_owner == ""
    # Each run paused once for its review: one row each, none skipped or doubled.
    assert HumanInterrupt.objects.filter(thread_id__in=thread_ids).count() == 50
    assert all(lines(folder / "plan.log") == 2 for folder in dirs)  # killed attempt + redo
    assert not any(lines(folder / "transfer.log") for folder in dirs)  # nothing before review

    # Approved; the second worker is killed after each tool ran, before its checkpoint.
    for folder in dirs:
        (folder / "arm-after-transfer").touch()
    for row in HumanInterrupt.objects.filter(thread_id__in=thread_ids):
        decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept")
    wait_for(
        lambda: all(arrived(folder, "after-transfer") for folder in dirs),
        90,
        0.2,
        "every approved transfer to run",
    )
    assert all(lines(folder / "transfer.log") == 1 for folder in dirs)
    second.stop(signal.SIGKILL)
    for folder in dirs:
        (folder / "open-after-transfer").touch()
    worker_factory("third", pool="threads", concurrency=64, **ENV)

    wait_for(lambda: threads_in(thread_ids, "done"), 120, 0.2, "every run to finish")
    assert all(lines(folder / "transfer.log") == 1 for folder in dirs)  # none ran twice
    resumes = Run.objects.filter(thread_id__in=thread_ids, kind="resume")
    assert sorted(resumes.values_list("status", "attempts")) == [("success", 2)] * 50
    executions = ToolExecution.objects.filter(thread_id__in=thread_ids)
    assert executions.count() == 50
    # The ledger shows each as started by the killed worker; the agent was told so.
    assert set(executions.values_list("status", flat=True)) == {"started"}
    for resume in resumes:
        last = resume.result["messages"][-1]
        assert last["status"] == "error" and "not run again" in last["content"]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_100_runs_awaiting_a_model_leave_cancel_undo_and_four_eyes_working(
    worker_factory, transactional_db, requester, reviewer, second_reviewer, tmp_path
):
    worker = worker_factory("busy", pool="threads", concurrency=128, **ENV)
    undo_dir, quorum_dir, shared = tmp_path / "undo", tmp_path / "quorum", tmp_path / "shared"
    for folder in (undo_dir, quorum_dir, shared):
        folder.mkdir()
    undo_run = runs.run_start(graph="async_gated", input={"dir": str(undo_dir)}, user=requester)
    quorum_run = runs.run_start(
        graph="async_gated",
        input={"dir": str(quorum_dir), "request": {"approvals": 2}},
        user=requester,
    )
    side = [undo_run.thread_id, quorum_run.thread_id]
    wait_for(lambda: threads_in(side, "interrupted"), 60, 0.1, "the two reviews to wait")

    fleet = [
        runs.run_start(
            graph="async_gated", input={"dir": str(shared), "gates": ["model"]}, user=requester
        )
        for _ in range(100)
    ]
    fleet_threads = [run.thread_id for run in fleet]

    def awaiting() -> int:
        return Run.objects.filter(
            thread_id__in=fleet_threads, status="running", lease_owner__endswith=f":{worker.pid}"
        ).count()

    wait_for(
        lambda: lines(shared / "plan.log") == 100 and awaiting() == 100,
        120,
        0.2,
        "100 runs to await the model in one process",
    )
    rss = rss_mb(worker.pid)
    print(f"worker RSS with 100 runs in flight: {rss:.0f} MB")
    assert rss < 400, f"{rss:.0f} MB with 100 runs in flight"

    # A cancel stops its run at once, though it is only awaiting the model.
    cancelled = fleet[0]
    before = time.monotonic()
    runs.thread_cancel(thread=Thread.objects.get(pk=cancelled.thread_id), user=requester)
    wait_for(
        lambda: f"run {cancelled.pk} stopped: cancelled" in worker.output(),
        10,
        0.05,
        "the worker to stop the cancelled run",
    )
    noticed = time.monotonic() - before
    print(f"cancel of a run awaiting the model noticed after {noticed:.2f} s")
    assert noticed < 2.0, f"cancel noticed after {noticed:.2f} s"

    # A decision with a grace period, undone: the item is pending again, nothing resumes.
    [undo_row] = HumanInterrupt.objects.filter(thread_id=undo_run.thread_id)
    decisions.interrupt_resolve(
        interrupt_id=undo_row.pk, user=reviewer, response_type="accept", grace=1
    )
    decisions.interrupt_undo(interrupt_id=undo_row.pk, user=reviewer)
    wait_for(
        lambda: any(
            "interrupt_release[" in line and "succeeded" in line
            for line in worker.output().splitlines()
        ),
        30,
        0.1,
        "the grace period's release to pass",
    )
    undo_row.refresh_from_db()
    assert undo_row.status == "pending"
    assert not Run.objects.filter(thread_id=undo_run.thread_id, kind="resume").exists()

    # Four eyes: one approval waits for the second; the second resumes the run to its end.
    [quorum_row] = HumanInterrupt.objects.filter(thread_id=quorum_run.thread_id)
    decisions.interrupt_resolve(interrupt_id=quorum_row.pk, user=reviewer, response_type="accept")
    quorum_row.refresh_from_db()
    assert quorum_row.status == "pending"
    assert not Run.objects.filter(thread_id=quorum_run.thread_id, kind="resume").exists()
    decisions.interrupt_resolve(
        interrupt_id=quorum_row.pk, user=second_reviewer, response_type="accept"
    )
    wait_for(lambda: threads_in([quorum_run.thread_id], "done"), 30, 0.1, "the approved run")
    assert lines(quorum_dir / "published.log") == 1

    # All the while the other 99 kept waiting on the model; opened, each pauses once.
    assert awaiting() == 99
    (shared / "open-model").touch()
    rest = fleet_threads[1:]
    wait_for(lambda: threads_in(rest, "interrupted"), 120, 0.2, "the 99 runs to pause")
    assert HumanInterrupt.objects.filter(thread_id__in=rest).count() == 99
    cancelled.refresh_from_db()
    assert cancelled.status == "cancelled"
    assert not HumanInterrupt.objects.filter(thread_id=cancelled.thread_id).exists()
    assert Thread.objects.get(pk=undo_run.thread_id).status == "interrupted"


def test_the_seeds_pattern_runs_its_approved_effect_once_across_a_kill(
    worker_factory, beat_factory, transactional_db, requester, reviewer, tmp_path
):
    """A node that calls interrupt() and then performs the approved effect itself, through
    agents.ledger.once: killed between the effect and the checkpoint, it does not repeat."""
    first = worker_factory("first", pool="threads", concurrency=4, **ENV)
    run = runs.run_start(graph="seed_once", input={"dir": str(tmp_path)}, user=requester)
    wait_for(lambda: threads_in([run.thread_id], "interrupted"), 60, 0.1, "the review")
    (tmp_path / "arm-after-effect").touch()
    [row] = HumanInterrupt.objects.filter(thread_id=run.thread_id)
    decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept")
    wait_for(lambda: arrived(tmp_path, "after-effect"), 60, 0.1, "the effect to happen")
    assert lines(tmp_path / "effect.log") == 1
    first.stop(signal.SIGKILL)
    (tmp_path / "open-after-effect").touch()
    beat_factory(**FAST_BEAT)
    worker_factory("second", pool="threads", concurrency=4, **ENV)

    wait_for(lambda: threads_in([run.thread_id], "done"), 60, 0.1, "the resume to finish")
    resume = Run.objects.get(thread_id=run.thread_id, kind="resume")
    assert (resume.status, resume.attempts) == ("success", 2)
    assert len(arrived(tmp_path, "after-effect")) == 2  # the node ran again...
    assert lines(tmp_path / "effect.log") == 1  # ...but its effect did not
    assert resume.result["plan"] == "sent #1"  # the first attempt's recorded result
    [execution] = ToolExecution.objects.filter(thread_id=run.thread_id)
    assert (execution.tool, execution.status) == ("send", "done")


def test_a_run_over_the_time_limit_ends_with_its_error_and_the_worker_keeps_the_others(
    worker_factory, transactional_db, requester, tmp_path
):
    limit = 6
    worker = worker_factory(
        "limited", pool="threads", concurrency=8, HITL_RUN_TIME_LIMIT=str(limit), **ENV
    )
    stuck_dir, other_dir = tmp_path / "stuck", tmp_path / "other"
    stuck_dir.mkdir()
    other_dir.mkdir()
    # A sync node blocking its thread (never opened): the worst case, a thread that
    # cannot be interrupted.
    stuck = runs.run_start(graph="sync_gated", input={"dir": str(stuck_dir)}, user=requester)
    wait_for(lambda: arrived(stuck_dir, "model"), 60, 0.1, "the stuck run to block")
    stuck.refresh_from_db()
    # The other run starts when the stuck one is halfway through its time: it is in
    # flight, awaiting its model in the same process, when the stuck one hits the limit.
    wait_for(
        lambda: (timezone.now() - stuck.started_at).total_seconds() >= limit / 2,
        limit,
        0.1,
        "half the stuck run's time",
    )
    other = runs.run_start(
        graph="async_gated", input={"dir": str(other_dir), "gates": ["model"]}, user=requester
    )
    wait_for(lambda: arrived(other_dir, "model"), 30, 0.1, "the other run to await its model")

    wait_for(
        lambda: Thread.objects.get(pk=stuck.thread_id).status == "error",
        limit * 3,
        0.1,
        "the stuck run to end over its limit",
    )
    stuck.refresh_from_db()
    assert stuck.status == "error" and stuck.lease_owner == ""
    assert error_line(stuck.error) == (
        f"RuntimeError: The run took longer than HITL_RUN_TIME_LIMIT ({limit} s)."
    )
    # The same process still holds the other run, which goes on to its review.
    other.refresh_from_db()
    assert other.status == "running" and other.lease_owner.endswith(f":{worker.pid}")
    assert worker.popen.poll() is None
    (other_dir / "open-model").touch()
    wait_for(lambda: threads_in([other.thread_id], "interrupted"), 30, 0.1, "the other to pause")
    other.refresh_from_db()
    assert (other.status, other.attempts) == ("interrupted", 1)
    assert HumanInterrupt.objects.filter(thread_id=other.thread_id).count() == 1
    # The stuck run is not sent again: its error stands.
    assert Run.objects.get(pk=stuck.pk).attempts == 1
    # Its thread is let go, so the worker may stop without waiting out its kill timeout.
    (stuck_dir / "open-model").touch()
