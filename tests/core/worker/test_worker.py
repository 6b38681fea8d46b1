"""Runs on real Celery worker processes against Postgres + Redis, including killed workers."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from hitl.core.models import DecisionRule, HumanInterrupt, Run, Thread
from tests.conftest import ROOT, start_celery_worker, wait_for
from tests.graphs import WORKER_GRAPHS

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("in_process_graphs")]

# Test graphs importable in the worker; a short lease so a dead worker's run is taken
# over within seconds (the live worker heartbeats it every lease/3).
WORKER_ENV = {
    "HITL_EXTRA_GRAPHS": WORKER_GRAPHS,
    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    "HITL_RUN_LEASE_SECONDS": "2",
}


@pytest.fixture(scope="module")
def shared_worker(test_database_url, tmp_path_factory):
    """One worker for the module (starting one costs seconds); the last test kills it."""
    proc = start_celery_worker(
        test_database_url,
        tmp_path_factory.mktemp("worker") / "celery.log",
        name="shared",
        concurrency=2,
        **WORKER_ENV,
    )
    yield proc
    proc.stop()


@pytest.fixture
def worker(shared_worker, transactional_db):
    assert shared_worker.popen.poll() is None, (
        "the shared worker died:\n" + shared_worker.output()[-3000:]
    )
    return shared_worker


@pytest.fixture
def requester_api(api_for, requester):
    return api_for(requester)


@pytest.fixture
def reviewer_api(api_for, reviewer):
    return api_for(reviewer)


def start(api, graph: str, input: dict | None = None) -> str:
    response = api.post("/api/v1/threads", {"graph": graph, "input": input or {}})
    assert response.status_code == 201, response.content
    return response.json()["thread_id"]


def pending_rows(thread_id: str, count: int) -> list[HumanInterrupt]:
    def ready():
        assert_not_failed(thread_id)
        rows = list(
            HumanInterrupt.objects.filter(thread_id=thread_id, status="pending").order_by(
                "interrupt_id", "position"
            )
        )
        return rows if len(rows) >= count else None

    rows = wait_for(ready, 30, what=f"{count} interrupt rows on {thread_id}")
    assert len(rows) == count
    return rows


def assert_not_failed(thread_id: str) -> Thread:
    thread = Thread.objects.get(pk=thread_id)
    if thread.status == "error":
        failed = Run.objects.filter(thread_id=thread_id, status="error").first()
        raise AssertionError(f"thread failed: {failed.error if failed else '?'}")
    return thread


def wait_status(thread_id: str, status: str, timeout: float = 30) -> Thread:
    def reached():
        thread = assert_not_failed(thread_id)
        return thread if thread.status == status else None

    return wait_for(reached, timeout, what=f"thread {thread_id} {status}")


def test_four_decision_types_end_to_end(worker, requester_api, reviewer_api):
    answers = {
        "accept": None,
        "ignore": None,
        "response": "Hold it until Monday.",
        "edit": {"args": {"to": "cfo@example.com", "subject": "Q3", "copies": 4, "urgent": True}},
    }
    threads = {kind: start(requester_api, "approval", {"request": kind}) for kind in answers}
    for kind, thread_id in threads.items():
        [row] = pending_rows(thread_id, 1)
        assert row.args["subject"] == f"Re: {kind}"
        reviewer_api.decide(row, kind, answers[kind], expect=200)

    expected = {
        "accept": {"type": "accept", "args": None},
        "ignore": {"type": "ignore", "args": None},
        "response": {"type": "response", "args": "Hold it until Monday."},
        "edit": {
            "type": "edit",
            "args": {
                "action": "send_email",
                "args": {"to": "cfo@example.com", "subject": "Q3", "copies": 4, "urgent": True},
            },
        },
    }
    for kind, thread_id in threads.items():
        wait_status(thread_id, "done")
        resume = Run.objects.get(thread_id=thread_id, kind="resume")
        assert resume.status == "success"
        assert resume.result["decision"] == expected[kind]
        assert resume.result["sent"] is (kind in ("accept", "edit"))
        detail = requester_api.get(f"/api/v1/threads/{thread_id}").json()
        assert detail["status"] == "done"
        assert detail["latest_run"]["result"]["decision"] == expected[kind]


def test_a_rule_saved_here_reaches_the_workers_next_pause(worker, requester_api):
    before = start(requester_api, "approval", {"request": "before the rule"})
    [untouched] = pending_rows(before, 1)  # the worker has read (and kept) the rules
    DecisionRule.objects.create(
        name="auto-mail", outcome="accept", mode=DecisionRule.Mode.LIVE, action="send_email"
    )
    after = start(requester_api, "approval", {"request": "after the rule"})
    wait_status(after, "done")
    decided = HumanInterrupt.objects.get(thread_id=after)
    assert decided.decided_by_rule == "auto-mail v1"
    untouched.refresh_from_db()
    assert untouched.status == "pending"


def test_parallel_interrupts_through_a_worker(worker, requester_api, reviewer_api):
    thread_id = start(requester_api, "parallel_approval", {"files": ["a.txt", "b.txt", "c.txt"]})
    rows = pending_rows(thread_id, 3)
    assert len({r.interrupt_id for r in rows}) == 3

    for row in rows[:2]:
        reviewer_api.decide(row, "accept", expect=200)
        # The decision commits before the response: no resume exists yet, none will.
        assert not Run.objects.filter(thread_id=thread_id, kind="resume").exists()
        assert Thread.objects.get(pk=thread_id).status == "interrupted"
    reviewer_api.decide(rows[2], "ignore", expect=200)

    wait_status(thread_id, "done")
    [resume] = Run.objects.filter(thread_id=thread_id, kind="resume")
    answers = {a["path"]: a["response"]["type"] for a in resume.result["answers"]}
    assert answers == {
        rows[0].args["path"]: "accept",
        rows[1].args["path"]: "accept",
        rows[2].args["path"]: "ignore",
    }


def test_middleware_agent_through_a_worker(worker, requester_api, reviewer_api):
    thread_id = start(
        requester_api, "agent_batched", {"messages": [{"role": "user", "content": "go"}]}
    )
    send, delete = pending_rows(thread_id, 2)
    reviewer_api.decide(send, "edit", {"args": {"to": "al@example.com", "copies": 2}}, expect=200)
    reviewer_api.decide(delete, "response", "Keep it.", expect=200)
    wait_status(thread_id, "done")
    [resume] = Run.objects.filter(thread_id=thread_id, kind="resume")
    final = resume.result["messages"][-1]["content"]
    assert "sent to al@example.com x2" in final
    assert "with reason: Keep it." in final


def test_cancelling_a_running_thread_stops_its_run(worker, requester_api, tmp_path):
    folder = tmp_path / "graph"
    folder.mkdir()
    thread_id = start(requester_api, "slow_side_effect", {"dir": str(folder)})
    wait_for(lambda: slow_pids(folder), 30, what="the run to reach the slow node")
    run = Run.objects.get(thread_id=thread_id)

    cancelled = requester_api.post(f"/api/v1/threads/{thread_id}/cancel")
    assert cancelled.status_code == 200, cancelled.content
    assert cancelled.json()["status"] == "idle"
    (folder / "release").touch()

    # The task's outcome as Celery logs it: "... succeeded in 0.1s: 'cancelled'".
    wait_for(
        lambda: ": 'cancelled'" in worker.output(), 30, what="the worker to drop the cancelled run"
    )
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert Thread.objects.get(pk=thread_id).status == "idle"
    assert not HumanInterrupt.objects.filter(thread_id=thread_id).exists()
    assert not (folder / "published.log").exists()


# --- killed workers -------------------------------------------------------------------


def slow_pids(folder: Path) -> list[int]:
    return sorted(int(p.name.split("-", 1)[1]) for p in folder.glob("slow-*"))


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def finish_after_redelivery(thread_id: str, folder: Path, reviewer_api) -> Run:
    """The redelivered run pauses once; answering it publishes once."""
    [row] = pending_rows(thread_id, 1)
    wait_status(thread_id, "interrupted")
    run = Run.objects.get(thread_id=thread_id, kind="start")
    assert run.status == "interrupted"
    assert run.attempts >= 2
    assert len(slow_pids(folder)) == 2  # the killed attempt and the one that finished
    # The node before the kill was checkpointed: its side effect happened once.
    assert len(lines(folder / "side_effects.log")) == 1
    assert HumanInterrupt.objects.filter(thread_id=thread_id).count() == 1

    reviewer_api.decide(row, "accept", expect=200)
    wait_status(thread_id, "done")
    assert len(lines(folder / "published.log")) == 1
    assert HumanInterrupt.objects.filter(thread_id=thread_id).count() == 1
    assert Run.objects.filter(thread_id=thread_id).count() == 2
    return run


def test_a_killed_worker_child_is_redelivered_without_duplicates(
    worker, requester_api, reviewer_api, tmp_path
):
    folder = tmp_path / "graph"
    folder.mkdir()
    thread_id = start(requester_api, "slow_side_effect", {"dir": str(folder)})

    [pid] = wait_for(lambda: slow_pids(folder), 30, what="the run to reach the slow node")
    assert pid != worker.pid  # a prefork child, not the parent
    os.kill(pid, signal.SIGKILL)
    (folder / "release").touch()

    finish_after_redelivery(thread_id, folder, reviewer_api)
    assert "WorkerLostError" in worker.output()


def test_a_killed_worker_is_taken_over_by_another(
    worker, worker_factory, requester_api, reviewer_api, tmp_path
):
    folder = tmp_path / "graph"
    folder.mkdir()
    thread_id = start(requester_api, "slow_side_effect", {"dir": str(folder)})
    wait_for(lambda: slow_pids(folder), 30, what="the run to reach the slow node")

    worker.stop(signal.SIGKILL)  # the whole worker: parent and child, no goodbye to Redis
    (folder / "release").touch()
    # The second worker finds the unacked message once the visibility timeout passed.
    worker_factory(
        "survivor",
        concurrency=1,
        HITL_VISIBILITY_TIMEOUT="2",
        HITL_UNACKED_RESTORE_INTERVAL="1",
        **WORKER_ENV,
    )
    finish_after_redelivery(thread_id, folder, reviewer_api)
