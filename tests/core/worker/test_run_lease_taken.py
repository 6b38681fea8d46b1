"""Claiming a run's lease: the single-statement PostgreSQL path and its ORM fallback.

lease.run_lease_take tries run_statements.run_lease_take first on PostgreSQL (one UPDATE ... RETURNING
that also appends the run.started audit event and joins the thread); whatever that
statement leaves alone (a live lease of another worker, exhausted attempts, a finished
or missing run) is decided by the ORM path under lock.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from hitl.api.langgraph import services as lg_services
from hitl.core.db import prepared, run_statements
from hitl.core.models import AuditEvent, HumanInterrupt, Run, Thread
from hitl.core.runs import multitask
from hitl.core.worker import lease, pauses_record

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

RUN_INPUT = {"messages": [{"role": "user", "content": "ship it"}], "amount": 42, "z": None}
RUN_METADATA = {"source": "claim-test", "nested": {"a": [1, 2, 3]}}


@pytest.fixture
def queued_run(manual_runs, requester) -> Run:
    """A queued run (not dispatched: the test claims it itself)."""
    thread = lg_services.thread_create(user=requester)
    run = lg_services.run_create(
        user=requester,
        assistant_id="approval",
        thread=thread,
        input=RUN_INPUT,
        metadata=RUN_METADATA,
    )
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED
    return run


def started_events(run_id) -> list[AuditEvent]:
    return list(
        AuditEvent.objects.filter(run_id=run_id, kind=AuditEvent.Kind.RUN_STARTED).order_by("id")
    )


def assert_claimed_by(run: Run, worker: str, *, attempts: int, created_by_id) -> None:
    """The claimed run as returned, and the row in the database, agree."""
    now = timezone.now()
    assert run.status == Run.Status.RUNNING
    assert run.lease_owner == worker
    assert run.attempts == attempts
    assert run.lease_expires_at is not None and run.lease_expires_at > now
    assert run.started_at is not None and run.started_at <= now
    assert run.created_by_id == created_by_id
    row = Run.objects.get(pk=run.pk)
    assert (row.status, row.lease_owner, row.attempts) == (Run.Status.RUNNING, worker, attempts)
    assert row.lease_expires_at == run.lease_expires_at
    assert row.started_at == run.started_at


# --- the single-statement path ---------------------------------------------------------


def test_a_queued_run_is_claimed_in_one_query_with_its_thread_and_audit_event(
    queued_run, requester, django_assert_num_queries
):
    with django_assert_num_queries(1) as captured:
        run, wait = lease.run_lease_take(run_id=queued_run.pk, worker="w1")
    assert "RETURNING" in captured.captured_queries[0]["sql"]

    assert wait == 0.0
    assert isinstance(run, Run) and run.pk == queued_run.pk
    assert_claimed_by(run, "w1", attempts=1, created_by_id=requester.pk)
    assert run.first_lease is True
    assert run.thread_id == queued_run.thread_id
    # The thread came with the run: reading it asks the database nothing more.
    with django_assert_num_queries(0):
        assert isinstance(run.thread, Thread)
        assert run.thread.pk == queued_run.thread_id
        assert run.thread.graph == "approval"
        graph, status = run.thread.graph, run.thread.status
    thread = Thread.objects.get(pk=queued_run.thread_id)
    assert (graph, status) == (thread.graph, thread.status)

    [event] = started_events(run.pk)
    assert event.data == {"run_kind": "start", "attempt": 1, "worker": "w1"}
    assert event.actor_id == run.created_by_id == requester.pk
    assert event.thread_id == run.thread_id
    assert event.interrupt_id is None


def test_a_claimed_run_comes_back_with_its_json_fields_decoded(queued_run, requester):
    run, _ = lease.run_lease_take(run_id=queued_run.pk, worker="w1")

    assert isinstance(run.input, dict) and run.input == RUN_INPUT
    assert list(run.input) == list(RUN_INPUT)  # the json column keeps the key order
    assert isinstance(run.metadata, dict) and run.metadata == RUN_METADATA
    assert run.stream_modes == [] and run.result is None and run.final_result is None
    assert isinstance(run.thread.metadata, dict)
    assert run.thread.metadata == Thread.objects.get(pk=run.thread_id).metadata
    assert run.thread.requester_id == requester.pk
    # The same values the ORM reads back.
    row = Run.objects.get(pk=run.pk)
    assert (row.input, row.metadata) == (run.input, run.metadata)


def test_a_run_leased_by_another_live_worker_is_not_claimed(queued_run):
    expires = timezone.now() + timedelta(seconds=30)
    Run.objects.filter(pk=queued_run.pk).update(
        status=Run.Status.RUNNING,
        lease_owner="other",
        lease_expires_at=expires,
        attempts=1,
        started_at=timezone.now(),
    )

    run, wait = lease.run_lease_take(run_id=queued_run.pk, worker="w1")

    assert run is None
    assert 0 < wait <= 30
    row = Run.objects.get(pk=queued_run.pk)
    assert (row.status, row.lease_owner, row.attempts) == (Run.Status.RUNNING, "other", 1)
    assert row.lease_expires_at == expires
    assert started_events(queued_run.pk) == []


def test_a_run_whose_other_workers_lease_expired_is_taken_over_as_a_second_attempt(
    queued_run, requester
):
    first, _ = lease.run_lease_take(run_id=queued_run.pk, worker="doomed")
    assert first is not None and first.first_lease is True
    Run.objects.filter(pk=queued_run.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )

    run, wait = lease.run_lease_take(run_id=queued_run.pk, worker="w2")

    assert wait == 0.0
    assert_claimed_by(run, "w2", attempts=2, created_by_id=requester.pk)
    assert run.first_lease is False  # the first attempt may have left checkpoints
    assert run.started_at == first.started_at  # kept from the first claim
    assert [e.data for e in started_events(queued_run.pk)] == [
        {"run_kind": "start", "attempt": 1, "worker": "doomed"},
        {"run_kind": "start", "attempt": 2, "worker": "w2"},
    ]


def test_a_worker_reclaiming_its_own_running_run_gets_it_again(queued_run, requester):
    first, _ = lease.run_lease_take(run_id=queued_run.pk, worker="w1")
    assert first is not None

    again, wait = lease.run_lease_take(run_id=queued_run.pk, worker="w1")

    assert wait == 0.0
    assert_claimed_by(again, "w1", attempts=2, created_by_id=requester.pk)
    assert again.first_lease is False
    assert again.lease_expires_at >= first.lease_expires_at
    assert [e.data["attempt"] for e in started_events(queued_run.pk)] == [1, 2]


# --- what the statement leaves to the ORM path -------------------------------------------


def test_a_run_out_of_attempts_is_not_claimed_and_ends_failed(queued_run):
    attempts = settings.HITL_RUN_MAX_ATTEMPTS
    Run.objects.filter(pk=queued_run.pk).update(
        status=Run.Status.RUNNING,
        lease_owner="doomed",
        lease_expires_at=timezone.now() - timedelta(seconds=1),
        attempts=attempts,
        started_at=timezone.now() - timedelta(minutes=5),
    )

    run, wait = lease.run_lease_take(run_id=queued_run.pk, worker="w1")

    assert (run, wait) == (None, 0.0)
    row = Run.objects.get(pk=queued_run.pk)
    assert row.status == Run.Status.ERROR
    assert row.attempts == attempts  # not spent once more
    assert row.lease_owner == "" and row.lease_expires_at is None
    assert row.finished_at is not None
    assert f"Gave up after {attempts} attempts" in row.error
    assert Thread.objects.get(pk=queued_run.thread_id).status == Thread.Status.ERROR
    assert started_events(queued_run.pk) == []
    [failed] = AuditEvent.objects.filter(run_id=queued_run.pk, kind=AuditEvent.Kind.RUN_FAILED)
    assert failed.data["attempt"] == attempts


def test_a_queued_run_out_of_attempts_is_not_claimed_either(queued_run):
    Run.objects.filter(pk=queued_run.pk).update(attempts=settings.HITL_RUN_MAX_ATTEMPTS)

    assert lease.run_lease_take(run_id=queued_run.pk, worker="w1") == (None, 0.0)

    assert Run.objects.get(pk=queued_run.pk).status == Run.Status.ERROR
    assert started_events(queued_run.pk) == []


@pytest.mark.parametrize(
    "status", [Run.Status.SUCCESS, Run.Status.INTERRUPTED, Run.Status.CANCELLED]
)
def test_a_finished_run_is_not_claimed_and_writes_no_audit_event(queued_run, status):
    finished_at = timezone.now()
    Run.objects.filter(pk=queued_run.pk).update(
        status=status, started_at=finished_at, finished_at=finished_at, attempts=1
    )
    events_before = AuditEvent.objects.count()

    assert lease.run_lease_take(run_id=queued_run.pk, worker="w1") == (None, 0.0)

    row = Run.objects.get(pk=queued_run.pk)
    assert (row.status, row.attempts, row.lease_owner) == (status, 1, "")
    assert row.finished_at == finished_at
    assert AuditEvent.objects.count() == events_before


def test_a_missing_run_is_not_claimed_and_writes_no_audit_event(db):
    events_before = AuditEvent.objects.count()

    assert lease.run_lease_take(run_id=uuid.uuid4(), worker="w1") == (None, 0.0)

    assert AuditEvent.objects.count() == events_before


# --- an enqueued run's turn (double-texting), checked with the claim ----------------------


def enqueued(requester, thread: Thread) -> Run:
    return lg_services.run_create(
        user=requester,
        assistant_id="approval",
        thread=thread,
        input={"request": "next"},
        request=lg_services.RunRequest(multitask_strategy="enqueue"),
    )


def test_an_enqueued_run_whose_turn_came_is_claimed_in_one_query(
    manual_runs, requester, django_assert_num_queries
):
    thread = lg_services.thread_create(user=requester)
    run = enqueued(requester, thread)  # the first on its thread: the thread is busy with it

    with django_assert_num_queries(1):
        claimed, wait = lease.run_lease_take(run_id=run.pk, worker="w1")

    assert wait == 0.0
    assert_claimed_by(claimed, "w1", attempts=1, created_by_id=requester.pk)


def test_an_enqueued_run_behind_a_run_in_flight_waits_for_it(queued_run, requester):
    first, _ = lease.run_lease_take(run_id=queued_run.pk, worker="w1")
    second = enqueued(requester, first.thread)
    dispatched = Run.objects.get(pk=second.pk).dispatched_at

    claimed, wait = lease.run_lease_take(run_id=second.pk, worker="w2")

    assert (claimed, wait) == (None, multitask.ENQUEUE_RECHECK_SECONDS)
    row = Run.objects.get(pk=second.pk)
    assert (row.status, row.lease_owner, row.attempts) == (Run.Status.QUEUED, "", 0)
    assert dispatched is None or row.dispatched_at > dispatched  # not sent again meanwhile
    assert started_events(second.pk) == []


def test_an_enqueued_run_finding_its_thread_paused_supersedes_the_pause(
    queued_run, requester, reviewers_group
):
    first, _ = lease.run_lease_take(run_id=queued_run.pk, worker="w1")
    second = enqueued(requester, first.thread)
    pause = [{"action_request": {"action": "ship", "args": {}}, "config": {"allow_accept": True}}]
    pauses_record.run_finish(
        run_id=first.pk, worker="w1", interrupts=[("i1", pause, None)], result=None, leased=first
    )
    assert Thread.objects.get(pk=first.thread_id).status == Thread.Status.INTERRUPTED

    claimed, wait = lease.run_lease_take(run_id=second.pk, worker="w2")

    assert wait == 0.0
    assert_claimed_by(claimed, "w2", attempts=1, created_by_id=requester.pk)
    assert Thread.objects.get(pk=first.thread_id).status == Thread.Status.BUSY
    [row] = HumanInterrupt.objects.filter(thread_id=first.thread_id)
    assert row.status == HumanInterrupt.Status.CANCELLED


# --- the ORM path, where the statement stands aside ---------------------------------------


def test_the_single_statement_path_is_available_on_postgresql(db):
    assert prepared.available() is True


def test_without_the_single_statement_path_the_orm_path_claims_the_same_way(
    queued_run, requester, monkeypatch, django_assert_num_queries, django_assert_max_num_queries
):
    calls = []
    # As for any case the statement leaves alone (SQLite's own statements are
    # tests/core/db/test_run_statements_sqlite.py's).
    monkeypatch.setattr(run_statements, "run_lease_take", lambda **kw: calls.append(kw))

    # savepoint, lock, update, audit, release (a run that is not enqueued: no turn to check)
    with django_assert_max_num_queries(5) as captured:
        run, wait = lease.run_lease_take(run_id=queued_run.pk, worker="w1")

    assert len(calls) == 1  # the statement stood aside: the ORM path claimed it
    assert any("FOR UPDATE" in q["sql"] for q in captured.captured_queries)
    assert wait == 0.0
    assert_claimed_by(run, "w1", attempts=1, created_by_id=requester.pk)
    assert run.first_lease is True
    assert (run.input, run.metadata) == (RUN_INPUT, RUN_METADATA)
    with django_assert_num_queries(0):
        assert (run.thread.pk, run.thread.graph) == (queued_run.thread_id, "approval")
    [event] = started_events(run.pk)
    assert event.data == {"run_kind": "start", "attempt": 1, "worker": "w1"}
    assert event.actor_id == requester.pk
    assert event.thread_id == run.thread_id
