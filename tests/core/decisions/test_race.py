"""Reviewers racing on Postgres: real threads, real connections, one winner."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import connection, transaction

from hitl.core import runs
from hitl.core.models import HumanInterrupt, Run, Thread
from hitl.core.worker import lease, pauses_record
from tests.conftest import wait_for
from tests.core.decisions.conftest import race, reviewers_with_tokens

pytestmark = pytest.mark.postgres


@pytest.fixture
def reviewers(transactional_db, reviewers_group):
    return reviewers_with_tokens(50, "racer", reviewers_group)


def started(manual_runs, requester, graph: str) -> Thread:
    run = runs.run_start(graph=graph, input={}, user=requester)
    assert manual_runs(run) == "interrupted"
    return Thread.objects.get(pk=run.thread_id)


def test_fifty_concurrent_answers_have_exactly_one_winner(manual_runs, requester, reviewers):
    thread = started(manual_runs, requester, "approval")
    [row] = thread.interrupts.all()
    path = f"/api/v1/interrupts/{row.pk}/decision"
    results = race([(key, path, {"type": "accept"}) for key in reviewers.values()])

    assert Counter(status for _, status, _ in results) == {200: 1, 409: 49}
    [winner_key] = [key for key, status, _ in results if status == 200]
    winner = next(name for name, key in reviewers.items() if key == winner_key)
    losers = {body["detail"] for _, status, body in results if status == 409}
    assert losers == {f"Already answered by {winner}."}

    row.refresh_from_db()
    assert (row.status, row.responded_by.username) == ("resolved", winner)
    [resume] = Run.objects.filter(thread=thread, kind="resume")
    assert resume.input == {"resume": {row.interrupt_id: {"type": "accept", "args": None}}}
    assert Thread.objects.get(pk=thread.pk).status == "busy"


def test_racing_on_two_parallel_interrupts_resumes_once_with_both(
    manual_runs, requester, reviewers
):
    thread = started(manual_runs, requester, "parallel_approval")
    rows = list(thread.interrupts.order_by("interrupt_id"))
    assert len(rows) == 2
    keys = list(reviewers.values())
    calls = [
        (key, f"/api/v1/interrupts/{rows[i % 2].pk}/decision", {"type": "accept"})
        for i, key in enumerate(keys)
    ]
    results = race(calls)

    assert Counter(status for _, status, _ in results) == {200: 2, 409: 48}
    assert set(HumanInterrupt.objects.filter(thread=thread).values_list("status", flat=True)) == {
        "resolved"
    }
    # Whoever answered last saw nothing left pending: one resume carrying both answers.
    [resume] = Run.objects.filter(thread=thread, kind="resume")
    assert set(resume.input["resume"]) == {r.interrupt_id for r in rows}
    assert manual_runs(resume) == "success"
    assert Thread.objects.get(pk=thread.pk).status == "done"


def test_run_finish_waits_for_a_cancel_instead_of_deadlocking(
    transactional_db, manual_runs, requester, test_database_url
):
    """Lock order is thread first, then run, everywhere: a finishing run meeting a cancel
    that holds the thread waits for it (and then sees the cancel) instead of deadlocking."""
    import psycopg

    run = runs.run_start(graph="approval", input={}, user=requester)
    claimed, _ = lease.run_lease_take(run_id=run.pk, worker="w")
    assert claimed is not None
    outcome: dict = {}

    def finish() -> None:
        try:
            outcome["run"] = pauses_record.run_finish(
                run_id=run.pk, worker="w", interrupts=[], result={"done": True}
            )
        except Exception as exc:  # the failure under test: DeadlockDetected
            outcome["error"] = exc
        finally:
            connection.close()

    finisher = threading.Thread(target=finish)
    with psycopg.connect(test_database_url, autocommit=True) as watcher, transaction.atomic():
        # What thread_cancel does: lock the thread, then cancel its lease.
        Thread.objects.select_for_update().get(pk=run.thread_id)
        finisher.start()
        wait_for(
            lambda: watcher.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE wait_event_type = 'Lock' AND datname = current_database()"
            ).fetchone()[0],
            10,
            0.02,
            "run_finish to wait for a lock",
        )
        Run.objects.filter(pk=run.pk).update(status="cancelled", lease_owner="")
    finisher.join(timeout=30)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["run"] is None  # it saw the cancel
    assert Run.objects.get(pk=run.pk).status == "cancelled"
