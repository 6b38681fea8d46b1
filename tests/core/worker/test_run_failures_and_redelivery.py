"""A failing or unknown graph ends its run in error and frees the thread; a redelivered,
leased, given-up or finished run is handled once. Runs executed in-process."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hitl.core import runs
from hitl.core.models import HumanInterrupt, Run, Thread
from hitl.core.registry import registry
from hitl.core.worker.execute import execute_run
from tests.core.conftest import snapshot

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("in_process_graphs")]


# --- failures -------------------------------------------------------------------------


def test_a_failing_graph_records_the_error_and_frees_the_thread(start, manual_runs, requester):
    thread = start("failing")
    run = thread.runs.get()
    assert (thread.status, run.status) == ("error", "error")
    assert "RuntimeError: the tool exploded" in run.error
    assert (run.lease_owner, run.lease_expires_at) == ("", None)
    assert run.finished_at is not None
    assert not thread.interrupts.exists()

    again = runs.run_start(graph="failing", input={"fail": False}, user=requester, thread=thread)
    assert manual_runs(again) == "success"
    again.refresh_from_db()
    assert again.result["done"] is True
    thread.refresh_from_db()
    assert thread.status == "done"


def test_an_unregistered_graph_fails_the_run_instead_of_hanging(start, manual_runs, monkeypatch):
    thread = start("approval")
    run = runs.run_start(graph="approval", input={}, user=thread.requester)
    # e.g. a worker deployed without the graph the web process knows
    monkeypatch.delitem(registry.targets, "approval")
    assert manual_runs(run) == "error"
    run.refresh_from_db()
    assert "Unknown graph 'approval'" in run.error


# --- redelivery ----------------------------------------------------------------------


def test_a_redelivered_run_records_its_pause_without_rerunning_or_duplicating(start, manual_runs):
    thread = start("approval")
    run = thread.runs.get()
    rows = list(HumanInterrupt.objects.filter(thread=thread).values_list("pk", flat=True))
    checkpoint = snapshot(thread)["checkpoint"]
    # As if the worker died after the graph paused but before its ack: the lease expired.
    Run.objects.filter(pk=run.pk).update(
        status="running",
        lease_owner="dead:1",
        lease_expires_at=timezone.now() - timedelta(seconds=1),
    )
    assert manual_runs(run) == "interrupted"
    assert list(HumanInterrupt.objects.filter(thread=thread).values_list("pk", flat=True)) == rows
    assert snapshot(thread)["checkpoint"] == checkpoint
    run.refresh_from_db()
    assert (run.status, run.attempts) == ("interrupted", 2)


def test_a_run_leased_by_a_live_worker_is_left_alone(start):
    thread = start("approval")
    run = thread.runs.get()
    expires = timezone.now() + timedelta(seconds=30)
    Run.objects.filter(pk=run.pk).update(
        status="running", lease_owner="alive:1", lease_expires_at=expires
    )
    outcome, retry_after = execute_run(str(run.pk), worker="pytest")
    assert outcome == "busy" and 25 < retry_after <= 30
    run.refresh_from_db()
    assert (run.status, run.lease_owner, run.attempts) == ("running", "alive:1", 1)


def test_a_run_that_keeps_killing_its_worker_is_given_up(manual_runs, requester, settings):
    settings.HITL_RUN_MAX_ATTEMPTS = 3
    run = runs.run_start(graph="approval", input={}, user=requester)
    # Three attempts claimed the run and died without recording anything.
    Run.objects.filter(pk=run.pk).update(
        status="running",
        attempts=3,
        lease_owner="dead:3",
        lease_expires_at=timezone.now() - timedelta(seconds=1),
    )
    assert manual_runs(run) == "skipped"
    run.refresh_from_db()
    assert (run.status, run.attempts, run.lease_owner) == ("error", 3, "")
    assert "Gave up after 3 attempts" in run.error
    assert Thread.objects.get(pk=run.thread_id).status == "error"
    assert not HumanInterrupt.objects.filter(thread_id=run.thread_id).exists()


def test_a_finished_run_is_skipped(start, manual_runs):
    thread = start("approval")
    run = thread.runs.get()
    assert manual_runs(run) == "skipped"
    assert HumanInterrupt.objects.filter(thread=thread).count() == 1
