"""Fault tests with real processes: Celery workers, celery beat, daphne, redis-server.

Each test kills, races or restarts something and then counts: runs, attempts,
interrupt rows and side effects must come out exact.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from hitl.core import decisions, runs
from hitl.core.live import listeners
from hitl.core.models import ApiToken, AuditEvent, HumanInterrupt, ReviewerGroupPolicy, Run, Thread
from hitl.core.worker.tasks import run_execute
from tests.conftest import wait_for
from tests.ops.conftest import OPS_ENV

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("ops_graphs")]
Kind = AuditEvent.Kind
FAST_BEAT = {"HITL_REAPER_SECONDS": "1", "HITL_EXPIRY_SWEEP_SECONDS": "0.5"}


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def arrived(folder: Path, gate: str) -> list[int]:
    return sorted(int(p.name.rsplit("-", 1)[1]) for p in folder.glob(f"at-{gate}-*"))


def wait_thread(thread_id, status: str, timeout: float = 45) -> Thread:
    def reached():
        thread = Thread.objects.get(pk=thread_id)
        if thread.status == "error":
            raise AssertionError(Run.objects.filter(thread_id=thread_id).last().error)
        return thread if thread.status == status else None

    return wait_for(reached, timeout, 0.1, f"thread {thread_id} to be {status}")


def audit_kinds(**filters) -> list[str]:
    return list(AuditEvent.objects.filter(**filters).order_by("id").values_list("kind", flat=True))


@pytest.fixture
def folder(tmp_path) -> Path:
    path = tmp_path / "graph"
    path.mkdir()
    return path


def test_a_sigkilled_worker_is_reaped_and_its_runs_finish_elsewhere(
    worker_factory, beat_factory, transactional_db, requester, reviewer, folder
):
    doomed = worker_factory("doomed", concurrency=1, **OPS_ENV)
    run = runs.run_start(
        graph="ops_gated",
        input={"dir": str(folder), "gates": ["prepare", "wrapup"]},
        user=requester,
    )
    [pid] = wait_for(lambda: arrived(folder, "prepare"), 30, what="the run to reach prepare")
    assert pid != doomed.pid
    doomed.stop(signal.SIGKILL)  # parent and child: nothing acks, nothing requeues
    (folder / "open-prepare").touch()

    # The broker would hand the message out again only after an hour; the reaper
    # notices the expired lease within seconds and sends the run again.
    beat_factory(**FAST_BEAT)
    second = worker_factory("second", concurrency=1, **OPS_ENV)
    thread = wait_thread(run.thread_id, "interrupted")
    run.refresh_from_db()
    assert (run.status, run.attempts) == ("interrupted", 2)
    [retried] = AuditEvent.objects.filter(run=run, kind=Kind.RUN_RETRIED)
    assert retried.data["reason"] == "lease expired"
    assert retried.data["previous_owner"].endswith(f":{pid}")
    assert len(lines(folder / "prepare.log")) == 2  # the killed attempt and the redo
    [row] = HumanInterrupt.objects.filter(thread=thread)  # one row, not one per attempt

    # Approved, then killed after the side effect: the checkpoint keeps it done.
    decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept")
    wait_for(lambda: len(arrived(folder, "wrapup")) == 1, 30, what="the resume to reach wrapup")
    assert len(lines(folder / "published.log")) == 1
    second.stop(signal.SIGKILL)
    (folder / "open-wrapup").touch()
    worker_factory("third", concurrency=1, **OPS_ENV)

    wait_thread(run.thread_id, "done")
    resume = Run.objects.get(thread=thread, kind="resume")
    assert (resume.status, resume.attempts) == ("success", 2)
    assert len(lines(folder / "published.log")) == 1  # the approved side effect, once
    assert len(lines(folder / "wrapup.log")) == 2
    assert HumanInterrupt.objects.filter(thread=thread).count() == 1
    assert Run.objects.filter(thread=thread).count() == 2
    assert audit_kinds(run=resume, kind=Kind.RUN_RETRIED) == [Kind.RUN_RETRIED]


def test_two_workers_racing_for_one_run_execute_it_once(
    worker_factory, transactional_db, requester, folder
):
    first = worker_factory("racer1", concurrency=1, **OPS_ENV)
    second = worker_factory("racer2", concurrency=1, **OPS_ENV)
    run = runs.run_start(
        graph="ops_gated", input={"dir": str(folder), "gates": ["prepare"]}, user=requester
    )
    [pid] = wait_for(lambda: arrived(folder, "prepare"), 30, what="one worker to start the run")
    run_execute.apply_async(args=[str(run.pk)])  # a duplicate delivery of the same run
    # The other worker takes the duplicate, finds a live lease and backs off.
    wait_for(
        lambda: "Retry in" in first.output() + second.output(), 30, what="the loser to back off"
    )
    (folder / "open-prepare").touch()
    wait_thread(run.thread_id, "interrupted")
    wait_for(
        lambda: "'skipped'" in first.output() + second.output(),
        30,
        what="the retried duplicate to find the run finished",
    )
    run.refresh_from_db()
    assert run.attempts == 1
    assert arrived(folder, "prepare") == [pid]
    assert len(lines(folder / "prepare.log")) == 1
    assert audit_kinds(run=run, kind=Kind.RUN_STARTED) == [Kind.RUN_STARTED]
    assert HumanInterrupt.objects.filter(thread_id=run.thread_id).count() == 1


def test_sigterm_lets_the_in_flight_run_finish(worker_factory, transactional_db, requester, folder):
    worker = worker_factory("graceful", concurrency=1, **OPS_ENV)
    run = runs.run_start(
        graph="ops_gated", input={"dir": str(folder), "gates": ["prepare"]}, user=requester
    )
    wait_for(lambda: arrived(folder, "prepare"), 30, what="the run to reach prepare")
    os.kill(worker.pid, signal.SIGTERM)  # what `docker compose stop` sends to PID 1
    wait_for(lambda: "Warm shutdown" in worker.output(), 10, what="a warm shutdown")
    assert worker.popen.poll() is None  # still finishing the run
    (folder / "open-prepare").touch()
    assert worker.popen.wait(timeout=30) == 0
    run.refresh_from_db()
    assert (run.status, run.attempts) == ("interrupted", 1)
    assert HumanInterrupt.objects.filter(thread_id=run.thread_id).count() == 1
    assert not AuditEvent.objects.filter(run=run, kind=Kind.RUN_RETRIED).exists()


def test_a_redis_restart_mid_flight_loses_no_decision(
    private_redis,
    worker_factory,
    beat_factory,
    web_factory,
    transactional_db,
    requester,
    reviewer,
    folder,
):
    env = {
        **OPS_ENV,
        "REDIS_URL": private_redis.url,
        "HITL_REDISPATCH_AFTER": "3",
        **FAST_BEAT,
    }
    worker = worker_factory("survivor", concurrency=2, **env)
    beat_factory(**env)
    base, _ = web_factory(**env)
    keys = {u: ApiToken.issue(user=u, name="t")[1] for u in (requester, reviewer)}

    def call(user, path, body):
        response = httpx.post(
            base + path,
            json=body,
            headers={"Authorization": f"Bearer {keys[user]}"},
            timeout=60,
        )
        assert response.status_code in (200, 201), response.text
        return response.json()

    def start(input):
        return call(requester, "/api/v1/threads", {"graph": "ops_gated", "input": input})[
            "thread_id"
        ]

    waiting = [start({}), start({})]
    in_flight = start({"dir": str(folder), "gates": ["prepare"]})
    rows = {t: wait_for(lambda t=t: HumanInterrupt.objects.filter(thread_id=t).first(), 30)
            for t in waiting}  # fmt: skip
    wait_for(lambda: arrived(folder, "prepare"), 30, what="a run in flight")

    private_redis.stop()
    # Decided while Redis is down: committed to Postgres, the resume cannot be sent yet.
    call(reviewer, f"/api/v1/interrupts/{rows[waiting[0]].pk}/decision", {"type": "accept"})
    assert Thread.objects.get(pk=waiting[0]).status == "busy"
    [resume] = Run.objects.filter(thread_id=waiting[0], kind="resume")
    assert resume.dispatched_at is None
    started_blind = start({})  # a new thread too: queued, never sent
    private_redis.start()  # empty: whatever the old Redis held is gone

    call(reviewer, f"/api/v1/interrupts/{rows[waiting[1]].pk}/decision", {"type": "ignore"})
    (folder / "open-prepare").touch()

    for thread_id, decision in ((waiting[0], "accept"), (waiting[1], "ignore")):
        wait_thread(thread_id, "done", timeout=60)
        [resume] = Run.objects.filter(thread_id=thread_id, kind="resume")
        assert resume.result["decision"] == {"type": decision, "args": None}
        assert audit_kinds(thread_id=thread_id, kind=Kind.INTERRUPT_ANSWERED) == [
            Kind.INTERRUPT_ANSWERED
        ]
    wait_thread(in_flight, "interrupted", timeout=60)
    wait_thread(started_blind, "interrupted", timeout=60)
    assert HumanInterrupt.objects.filter(thread_id=in_flight).count() == 1
    assert HumanInterrupt.objects.filter(thread_id=started_blind).count() == 1
    assert "re-sent to the broker" in worker.output()


def test_expiry_and_escalation_end_to_end(
    worker_factory,
    beat_factory,
    transactional_db,
    api_for,
    requester,
    reviewers_group,
    finance_group,
):
    ReviewerGroupPolicy.objects.create(
        group=reviewers_group, expire_after_seconds=1, expiry_policy="escalate",
        escalate_to=finance_group,
    )  # fmt: skip
    ReviewerGroupPolicy.objects.create(
        group=finance_group, expire_after_seconds=1, expiry_policy="respond",
        expiry_message="Finance did not answer either; hold it.",
    )  # fmt: skip
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(listeners.inbox_group(finance_group.pk), channel)

    worker_factory("w1", concurrency=1, **OPS_ENV)
    beat_factory(**FAST_BEAT)
    started = api_for(requester).post("/api/v1/threads", {"graph": "ops_gated", "input": {}})
    thread_id = started.json()["thread_id"]

    thread = wait_thread(thread_id, "done")
    row = HumanInterrupt.objects.get(thread=thread)
    assert (row.status, row.reviewer_group, row.escalation_count) == ("expired", finance_group, 1)
    resume = Run.objects.get(thread=thread, kind="resume")
    assert resume.result["decision"] == {
        "type": "response",
        "args": "Finance did not answer either; hold it.",
    }
    assert audit_kinds(interrupt=row) == [
        Kind.INTERRUPT_CREATED,
        Kind.INTERRUPT_ESCALATED,
        Kind.INTERRUPT_EXPIRED,
    ]

    async def first_message():
        import asyncio

        return await asyncio.wait_for(layer.receive(channel), 5)

    pushed = async_to_sync(first_message)()  # published by the worker that ran the sweep
    assert pushed["type"] == "interrupt.changed"
    assert (pushed["interrupt_id"], pushed["status"]) == (str(row.pk), "pending")


def test_the_embedded_server_expires_interrupts_without_beat(
    web_factory, transactional_db, requester, reviewers_group
):
    ReviewerGroupPolicy.objects.create(group=reviewers_group, expire_after_seconds=1)
    base, _ = web_factory(HITL_EXECUTOR="inprocess", HITL_EXPIRY_SWEEP_SECONDS="0.5")
    key = ApiToken.issue(user=requester, name="t")[1]
    response = httpx.post(
        f"{base}/api/v1/threads",
        json={"graph": "ops_gated", "input": {}},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert response.status_code == 201, response.text
    thread = wait_thread(response.json()["thread_id"], "done")
    row = HumanInterrupt.objects.get(thread=thread)
    assert (row.status, row.response_type) == ("expired", "ignore")
    resume = Run.objects.get(thread=thread, kind="resume")
    assert resume.result["decision"] == {"type": "ignore", "args": None}


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except FileNotFoundError:
        return []
    return [int(p) for p in text.split()]


def test_a_worker_whose_child_dies_during_start_up_loses_no_run(
    worker_factory, test_database_url, transactional_db, requester, folder, tmp_path
):
    from tests.conftest import BIN, service_env, spawn

    run = runs.run_start(graph="ops_gated", input={"dir": str(folder)}, user=requester)
    command = [
        str(BIN / "celery"), "-A", "hitl", "worker", "-Q", "runs,default", "-c", "1",
        "--pool", "prefork", "-n", "starting@%h", "--without-gossip", "--without-mingle",
        "--without-heartbeat", "-l", "INFO",
    ]  # fmt: skip
    env = service_env(test_database_url, **OPS_ENV, HITL_WORKER_POOL="prefork")
    starting = spawn(command, env, tmp_path / "w.log")
    try:
        # SIGKILL the pool child the moment it exists, before the worker is ready.
        def kill_a_child() -> bool:
            for child in _children(starting.pid):
                try:
                    os.kill(child, signal.SIGKILL)
                except ProcessLookupError:
                    continue
                return True
            return False

        wait_for(kill_a_child, 60, 0.005, "a pool child to kill")
        assert "ready." not in starting.output()
        # Celery may give up ("Could not start worker processes") or replace the child;
        # either way whatever runs it starts a worker again, as compose's restart policy
        # or systemd's Restart=always does, and the run is not lost.
        worker_factory("restarted", concurrency=1, **OPS_ENV)
        wait_thread(run.thread_id, "interrupted", timeout=60)
    finally:
        starting.stop(signal.SIGKILL)
    run.refresh_from_db()
    assert run.status == "interrupted" and run.attempts <= 2
    assert HumanInterrupt.objects.filter(thread_id=run.thread_id).count() == 1
    assert len(lines(folder / "prepare.log")) in (1, 2)  # at most the killed attempt again
