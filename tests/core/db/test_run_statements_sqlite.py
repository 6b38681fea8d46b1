"""A run's lease, start and end, and an answer with its event, on SQLite
(hitl/core/db/run_statements_sqlite.py), as the embedded server records them: the same
rows, events and refusals as PostgreSQL's single statements
(tests/core/worker/test_run_lease_taken.py, test_run_end_recorded.py).

The suite's database is PostgreSQL: each test points this thread's default database at
a fresh copy of one migrated SQLite file, with the embedded server's options.
"""

from __future__ import annotations

import dataclasses
import shutil
import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.db import connections
from django.db.utils import ConnectionHandler
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from hitl.core.db import answer_statements, prepared, run_statements
from hitl.core.models import AuditEvent, HumanInterrupt, Run, Thread
from hitl.core.worker import lease

WORKER = "w1"
RESULT = {"zeta": 1, "alpha": {"y": [1, 2, {"b": None, "a": "x"}]}, "mid": "é"}


def _handler(path) -> ConnectionHandler:
    return ConnectionHandler(
        {
            "default": {
                "ENGINE": "hitl.sqlite",
                "NAME": str(path),
                "OPTIONS": dict(settings.EMBEDDED_SQLITE_OPTIONS),
            }
        }
    )


class _OnSqlite:
    """This thread's default database is `handler`'s until `restore`."""

    def __init__(self, handler: ConnectionHandler):
        self.handler, self.saved = handler, connections["default"]
        connections["default"] = handler["default"]

    def restore(self) -> None:
        connections["default"] = self.saved
        self.handler.close_all()


@pytest.fixture(scope="module")
def migrated(tmp_path_factory, django_db_blocker):
    """One SQLite file with every migration applied, copied by each test."""
    path = tmp_path_factory.mktemp("sqlite") / "migrated.sqlite3"
    with django_db_blocker.unblock():
        swapped = _OnSqlite(_handler(path))
        try:
            call_command("migrate", verbosity=0, interactive=False)
        finally:
            swapped.restore()
    return path


@pytest.fixture
def on_sqlite(migrated, tmp_path, django_db_blocker):
    path = tmp_path / "db.sqlite3"
    shutil.copyfile(migrated, path)
    with django_db_blocker.unblock():
        swapped = _OnSqlite(_handler(path))
        assert prepared.db().vendor == "sqlite" and not prepared.available()
        try:
            yield
        finally:
            swapped.restore()


@pytest.fixture
def requester(on_sqlite):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("quinn", password="x")


def _run(requester, *, status=Run.Status.QUEUED, thread=None, **fields) -> Run:
    thread = thread or Thread.objects.create(
        graph="approval", requester=requester, status=Thread.Status.BUSY
    )
    return Run.objects.create(
        thread=thread, kind=Run.Kind.START, status=status, created_by=requester, **fields
    )


def _take(run: Run, worker: str = WORKER):
    now = timezone.now()
    return now, run_statements.run_lease_take(
        run_id=run.pk,
        worker=worker,
        now=now,
        expires=now + timedelta(seconds=settings.HITL_RUN_LEASE_SECONDS),
        max_attempts=settings.HITL_RUN_MAX_ATTEMPTS,
    )


def _events(run_id) -> list[tuple[str, dict]]:
    return [(e.kind, e.data) for e in AuditEvent.objects.filter(run_id=run_id).order_by("id")]


# --- the lease --------------------------------------------------------------------------


def test_a_queued_run_is_leased_with_its_thread_and_event_and_nothing_read_first(requester):
    run = _run(requester, input={"b": 1, "a": [1, None]}, metadata={"source": "t"})
    with CaptureQueriesContext(prepared.db()) as captured:
        now, taken = _take(run)
    statements = [q["sql"].split()[0] for q in captured.captured_queries]
    assert statements == ["BEGIN", "UPDATE", "INSERT", "SELECT", "COMMIT"], statements
    assert (taken.status, taken.lease_owner, taken.attempts) == ("running", WORKER, 1)
    assert taken.started_at == now and taken.first_lease is True
    assert (taken.input, taken.metadata) == ({"b": 1, "a": [1, None]}, {"source": "t"})
    assert list(taken.input) == ["b", "a"]
    assert (taken.thread.pk, taken.thread.graph) == (run.thread_id, "approval")
    row = Run.objects.get(pk=run.pk)
    assert (row.status, row.lease_owner, row.lease_expires_at) == (
        "running",
        WORKER,
        taken.lease_expires_at,
    )
    [event] = AuditEvent.objects.filter(run_id=run.pk)
    assert (event.kind, event.actor_id, event.thread_id) == (
        "run.started",
        requester.pk,
        run.thread_id,
    )
    assert event.data == {"run_kind": "start", "attempt": 1, "worker": WORKER}
    assert list(event.data) == ["run_kind", "attempt", "worker"]


def test_a_live_lease_of_another_worker_is_left_alone_and_its_wait_told(requester):
    run = _run(requester)
    _take(run, "other")
    taken, wait = lease.run_lease_take(run_id=run.pk, worker=WORKER)
    assert taken is None and 0 < wait <= settings.HITL_RUN_LEASE_SECONDS
    assert Run.objects.get(pk=run.pk).lease_owner == "other"
    assert [kind for kind, _ in _events(run.pk)] == ["run.started"]


def test_a_lapsed_lease_is_taken_over_as_a_second_attempt(requester):
    run = _run(requester)
    _take(run, "gone")
    Run.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    _, taken = _take(run)
    assert (taken.lease_owner, taken.attempts, taken.first_lease) == (WORKER, 2, False)
    assert [data["worker"] for _, data in _events(run.pk)] == ["gone", WORKER]


def test_a_run_out_of_attempts_is_not_leased_unless_an_operator_retried_it(requester):
    spent = settings.HITL_RUN_MAX_ATTEMPTS
    run = _run(requester, attempts=spent)
    assert _take(run)[1] is None
    assert Run.objects.get(pk=run.pk).attempts == spent and _events(run.pk) == []
    # An operator's retry counts the attempts from where it was made (Run.budget_used).
    Run.objects.filter(pk=run.pk).update(metadata={Run.RETRIED_AFTER: spent})
    _, taken = _take(run)
    assert taken is not None and taken.attempts == spent + 1
    # Only an integer offset counts: anything else leaves the run to the ORM path.
    other = _run(requester, attempts=spent, metadata={Run.RETRIED_AFTER: "all"})
    assert _take(other)[1] is None


@pytest.mark.parametrize("status", ["success", "error", "interrupted", "cancelled"])
def test_a_finished_run_is_not_leased_and_writes_nothing(requester, status):
    run = _run(requester, status=status)
    assert _take(run)[1] is None
    assert Run.objects.get(pk=run.pk).status == status and _events(run.pk) == []


def test_an_enqueued_run_waits_for_the_run_before_it_then_is_leased(requester):
    first = _run(requester)
    second = _run(requester, thread=first.thread, multitask_strategy="enqueue")
    assert _take(second)[1] is None  # the first is still queued
    _take(first)
    assert _take(second)[1] is None  # and now running
    Run.objects.filter(pk=first.pk).update(status=Run.Status.SUCCESS)
    _, taken = _take(second)
    assert taken is not None and taken.pk == second.pk
    # Its thread must be busy (a paused one is settled on the ORM path first).
    third = _run(requester, thread=first.thread, multitask_strategy="enqueue")
    Run.objects.filter(pk=second.pk).update(status=Run.Status.SUCCESS)
    Thread.objects.filter(pk=first.thread_id).update(status=Thread.Status.INTERRUPTED)
    assert _take(third)[1] is None


# --- the end ----------------------------------------------------------------------------


def _leased(requester, group=None) -> Run:
    thread = Thread.objects.create(
        graph="approval", requester=requester, status=Thread.Status.BUSY, reviewer_group=group
    )
    return _take(_run(requester, thread=thread))[1]


def _ending(run: Run, *, status="success", worker=WORKER, result=RESULT):
    return run_statements.RunEnding(
        run_id=run.pk,
        thread_id=run.thread_id,
        worker=worker,
        status=status,
        thread_status="done" if status == "success" else "interrupted",
        result=result,
        now=timezone.now(),
    )


def _rows(run: Run, group, *ids: str) -> list[HumanInterrupt]:
    return [
        HumanInterrupt(
            thread_id=run.thread_id,
            run_id=run.pk,
            interrupt_id=interrupt_id,
            position=0,
            kind=HumanInterrupt.Kind.HUMAN_INTERRUPT,
            action=f"act_{n}",
            args={"n": n, "to": "a@b.c"},
            allow_accept=True,
            reviewer_group=group,
        )
        for n, interrupt_id in enumerate(ids)
    ]


def test_an_end_with_nothing_paused_updates_run_and_thread_and_audits_it(requester):
    run = _leased(requester)
    end = _ending(run)
    with CaptureQueriesContext(prepared.db()) as captured:
        ended = run_statements.run_end_record(end)
    statements = [q["sql"].split()[0] for q in captured.captured_queries]
    assert statements == ["BEGIN", "UPDATE", "UPDATE", "INSERT", "COMMIT"], statements
    thread, done, inserted = ended
    assert (done.status, done.result, done.finished_at) == ("success", RESULT, end.now)
    assert list(done.result) == list(RESULT) and inserted == []
    assert (thread.status, thread.updated_at) == ("done", end.now)
    row = Run.objects.get(pk=run.pk)
    assert (row.status, row.result, row.lease_owner, row.lease_expires_at) == (
        "success",
        RESULT,
        "",
        None,
    )
    assert Thread.objects.get(pk=run.thread_id).status == "done"
    assert _events(run.pk)[-1] == (
        "run.finished",
        {"status": "success", "interrupts": 0, "attempt": 1},
    )


def test_a_pause_inserts_its_rows_in_order_with_an_event_each(requester):
    group = Group.objects.create(name="reviewers")
    run = _leased(requester, group)
    rows = _rows(run, group, "b-second", "a-first")
    summaries = [{"action": row.action} for row in rows]
    ended = run_statements.run_end_record(
        _ending(run, status="interrupted", result=None),
        rows=rows,
        summaries=summaries,
        group_id=group.pk,
    )
    thread, paused, inserted = ended
    assert (paused.status, paused.result, thread.status) == ("interrupted", None, "interrupted")
    # In the order the graph asked (by pause, then interrupt id, then request).
    in_order = HumanInterrupt.objects.filter(thread_id=run.thread_id).in_order()
    assert inserted == list(in_order.values_list("pk", flat=True))
    assert all(not row._state.adding for row in rows)
    stored = {r.pk: r for r in HumanInterrupt.objects.filter(thread_id=run.thread_id)}
    assert set(stored) == {row.pk for row in rows}
    assert [(stored[r.pk].action, stored[r.pk].args) for r in rows] == [
        ("act_0", {"n": 0, "to": "a@b.c"}),
        ("act_1", {"n": 1, "to": "a@b.c"}),
    ]
    assert all(r.status == "pending" and r.reviewer_group_id == group.pk for r in stored.values())
    events = AuditEvent.objects.filter(run_id=run.pk).order_by("id")
    assert [(e.kind, e.interrupt_id, e.data) for e in events][1:] == [
        ("interrupt.created", rows[0].pk, {"action": "act_0"}),
        ("interrupt.created", rows[1].pk, {"action": "act_1"}),
        ("run.finished", None, {"status": "interrupted", "interrupts": 2, "attempt": 1}),
    ]


def test_an_end_recorded_again_skips_the_rows_an_earlier_attempt_made(requester):
    group = Group.objects.create(name="reviewers")
    run = _leased(requester, group)
    earlier = _rows(run, group, "x")[0]
    earlier.save()
    rows = _rows(run, group, "x", "y")
    ended = run_statements.run_end_record(
        _ending(run, status="interrupted", result=None),
        rows=rows,
        summaries=[{}, {}],
        group_id=group.pk,
    )
    assert ended.inserted == [rows[1].pk]
    assert rows[0]._state.adding is True  # not inserted: the earlier attempt's row stays
    assert HumanInterrupt.objects.filter(thread_id=run.thread_id).count() == 2
    assert [kind for kind, _ in _events(run.pk)].count("interrupt.created") == 1
    assert _events(run.pk)[-1][1]["interrupts"] == 1


def test_an_end_whose_thread_changed_group_is_rerouted_and_writes_nothing(requester):
    group, other = Group.objects.create(name="reviewers"), Group.objects.create(name="other")
    run = _leased(requester, group)
    Thread.objects.filter(pk=run.thread_id).update(reviewer_group=other)
    ended = run_statements.run_end_record(
        _ending(run, status="interrupted", result=None),
        rows=_rows(run, group, "x"),
        summaries=[{}],
        group_id=group.pk,
    )
    assert ended == run_statements.REROUTED
    assert Run.objects.get(pk=run.pk).status == "running"
    assert Thread.objects.get(pk=run.thread_id).status == "busy"
    assert not HumanInterrupt.objects.filter(thread_id=run.thread_id).exists()
    assert [kind for kind, _ in _events(run.pk)] == ["run.started"]


@pytest.mark.parametrize("how", ["cancelled", "taken_over", "other_thread"])
def test_an_end_of_a_run_no_longer_the_workers_writes_nothing(requester, how):
    group = Group.objects.create(name="reviewers")
    run = _leased(requester, group)
    end = _ending(run, status="interrupted", result=None)
    if how == "cancelled":
        Run.objects.filter(pk=run.pk).update(status=Run.Status.CANCELLED)
    elif how == "taken_over":
        Run.objects.filter(pk=run.pk).update(lease_owner="other")
    else:
        end = dataclasses.replace(end, thread_id=uuid.uuid4())
    before = Run.objects.get(pk=run.pk)
    ended = run_statements.run_end_record(
        end, rows=_rows(run, group, "x"), summaries=[{}], group_id=group.pk
    )
    assert ended is None
    after = Run.objects.get(pk=run.pk)
    assert (after.status, after.lease_owner, after.result) == (
        before.status,
        before.lease_owner,
        before.result,
    )
    assert Thread.objects.get(pk=run.thread_id).status == "busy"
    assert not HumanInterrupt.objects.exists()
    assert [kind for kind, _ in _events(run.pk)] == ["run.started"]


# --- a run's start with its thread, an answer with its event ------------------------------


def _statements(captured) -> list[str]:
    return [q["sql"].split()[0] for q in captured.captured_queries]


@pytest.mark.parametrize("only_if_no_runs", [False, True])
def test_a_run_is_inserted_with_its_threads_fields_and_nothing_read(requester, only_if_no_runs):
    thread = Thread.objects.create(graph="", requester=requester, status=Thread.Status.IDLE)
    before = thread.updated_at
    run = Run(thread=thread, kind=Run.Kind.START, input={"n": "é"}, created_by=requester)
    thread.graph, thread.status = "approval", Thread.Status.BUSY
    with CaptureQueriesContext(prepared.db()) as captured:
        inserted = run_statements.run_insert_with_thread(
            run=run,
            thread=thread,
            fields=["graph", "status", "updated_at"],
            only_if_no_runs=only_if_no_runs,
        )
    assert inserted is True
    assert _statements(captured) == ["BEGIN", "UPDATE", "INSERT", "COMMIT"]
    assert not run._state.adding
    stored = Thread.objects.get(pk=thread.pk)
    assert (stored.graph, stored.status) == ("approval", "busy")
    assert stored.updated_at == thread.updated_at > before
    row = Run.objects.get(pk=run.pk)
    assert (row.thread_id, row.kind, row.status, row.input, row.created_by_id) == (
        thread.pk,
        "start",
        "queued",
        {"n": "é"},
        requester.pk,
    )
    assert row.created_at == run.created_at


def test_a_run_only_if_none_is_not_inserted_beside_an_earlier_run(requester):
    earlier = _run(requester, status=Run.Status.SUCCESS)
    thread = earlier.thread
    Thread.objects.filter(pk=thread.pk).update(graph="other", status=Thread.Status.DONE)
    run = Run(thread=thread, kind=Run.Kind.START, input={}, created_by=requester)
    thread.graph, thread.status = "approval", Thread.Status.BUSY
    inserted = run_statements.run_insert_with_thread(
        run=run, thread=thread, fields=["graph", "status"], only_if_no_runs=True
    )
    assert inserted is False
    assert run._state.adding
    assert list(Run.objects.filter(thread_id=thread.pk)) == [earlier]
    stored = Thread.objects.get(pk=thread.pk)
    assert (stored.graph, stored.status) == ("other", "done")


def test_an_answer_is_saved_with_its_event_and_a_missing_row_writes_neither(requester):
    group = Group.objects.create(name="reviewers")
    run = _leased(requester, group)
    row = _rows(run, group, "x")[0]
    row.save()
    row.status, row.response_type = HumanInterrupt.Status.RESOLVED, "accept"
    row.response_args, row.responded_by = {"b": 1, "a": "é"}, requester
    event = AuditEvent(
        kind=AuditEvent.Kind.INTERRUPT_ANSWERED,
        thread_id=run.thread_id,
        interrupt=row,
        actor=requester,
        data={"zeta": 1, "alpha": 2},
    )
    fields = ["status", "response_type", "response_args", "responded_by"]
    with CaptureQueriesContext(prepared.db()) as captured:
        assert answer_statements.save_with_audit(row, fields, event) is True
    assert _statements(captured) == ["BEGIN", "UPDATE", "INSERT", "COMMIT"]
    stored = HumanInterrupt.objects.get(pk=row.pk)
    assert (stored.status, stored.response_type, stored.response_args, stored.responded_by_id) == (
        "resolved",
        "accept",
        {"b": 1, "a": "é"},
        requester.pk,
    )
    appended = AuditEvent.objects.get(interrupt_id=row.pk, kind="interrupt.answered")
    assert (appended.thread_id, appended.actor_id, list(appended.data)) == (
        run.thread_id,
        requester.pk,
        ["zeta", "alpha"],
    )
    assert appended.created_at is not None

    gone = _rows(run, group, "y")[0]  # never inserted
    gone.status = HumanInterrupt.Status.RESOLVED
    late = AuditEvent(kind=AuditEvent.Kind.INTERRUPT_ANSWERED, thread_id=run.thread_id, data={})
    assert answer_statements.save_with_audit(gone, ["status"], late) is False
    assert not HumanInterrupt.objects.filter(pk=gone.pk).exists()
    assert AuditEvent.objects.filter(kind="interrupt.answered").count() == 1
