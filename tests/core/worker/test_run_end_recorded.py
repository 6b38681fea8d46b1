"""Ending a run: the single-statement PostgreSQL path.

pauses_record.run_finish, on PostgreSQL, locks the thread, marks the run ended and the
thread's new status, inserts the pause's interrupt rows and appends their audit events
and the run's run.finished event, in one statement (run_statements.run_end_record, a
data-modifying CTE). Given the leased run (as the worker calls it) that is all it sends;
without it, it reads the thread first. SQLite's statements, which must leave the same
rows behind, are tests/core/db/test_run_statements_sqlite.py's.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from hitl.api.langgraph import services as lg_services
from hitl.core.db import prepared
from hitl.core.models import AuditEvent, HumanInterrupt, Run, Thread
from hitl.core.worker import lease, pauses_record
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

RESULT = {"zeta": 1, "alpha": {"y": [1, 2, {"b": None, "a": "x"}], "b": True}, "mid": "é"}
RUN_TABLE = Run._meta.db_table
THREAD_TABLE = Thread._meta.db_table


def human_interrupt(action: str = "send_email", n: int = 1) -> list[dict[str, Any]]:
    """An Agent Inbox HumanInterrupt list of one request, as a graph's interrupt() sends it."""
    return [
        {
            "action_request": {"action": action, "args": {"to": "a@b.c", "n": n}},
            "config": {
                "allow_accept": True,
                "allow_edit": True,
                "allow_respond": True,
                "allow_ignore": True,
            },
            "description": "Send?",
        }
    ]


def two_interrupts() -> list[tuple[str, Any, Any]]:
    return [
        (uuid.uuid4().hex, human_interrupt("send_email", 1), None),
        (uuid.uuid4().hex, human_interrupt("send_fax", 2), None),
    ]


def claimed_run(requester) -> Run:
    """A run of the approval graph, claimed by worker w1 (not executed: the test ends it)."""
    thread = lg_services.thread_create(user=requester)
    run = lg_services.run_create(
        user=requester, assistant_id="approval", thread=thread, input={"request": "q3"}
    )
    claimed, wait = lease.run_lease_take(run_id=run.pk, worker="w1")
    assert claimed is not None and wait == 0.0
    assert (claimed.status, claimed.lease_owner) == (Run.Status.RUNNING, "w1")
    return claimed


@pytest.fixture
def claimed(manual_runs, requester, reviewers_group) -> Run:
    return claimed_run(requester)


def events_of(run_id) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(run_id=run_id).order_by("id"))


def finished_events(run_id) -> list[AuditEvent]:
    return [e for e in events_of(run_id) if e.kind == AuditEvent.Kind.RUN_FINISHED]


def locking_selects(queries: list[dict[str, Any]], table: str) -> list[int]:
    """Indexes of the plain `SELECT ... FROM table ... FOR UPDATE` statements."""
    pattern = re.compile(rf'^SELECT .* FROM "{table}" .*FOR UPDATE$', re.DOTALL)
    return [i for i, q in enumerate(queries) if pattern.match(q["sql"])]


def outcome(run_id) -> dict[str, Any]:
    """What an end leaves in the database, without the ids and times that differ."""
    run = Run.objects.get(pk=run_id)
    thread = Thread.objects.get(pk=run.thread_id)
    rows = list(
        HumanInterrupt.objects.filter(thread_id=thread.pk).order_by("interrupt_id", "position")
    )
    row_pks = {row.pk: row.interrupt_id for row in rows}
    return {
        "run": {
            "status": run.status,
            "result": run.result,
            "result_keys": list(run.result) if isinstance(run.result, dict) else None,
            "finished": run.finished_at is not None,
            "lease": (run.lease_owner, run.lease_expires_at),
            "attempts": run.attempts,
            "error": run.error,
        },
        "thread": thread.status,
        "events": [
            {
                "kind": e.kind,
                "data": e.data,
                "keys": list(e.data),
                "thread": e.thread_id == thread.pk,
                "actor": e.actor_id,
                "interrupt": row_pks.get(e.interrupt_id, e.interrupt_id),
            }
            for e in events_of(run_id)
        ],
        "interrupts": [
            {
                "interrupt_id": row.interrupt_id,
                "position": row.position,
                "status": row.status,
                "kind": row.kind,
                "action": row.action,
                "args": row.args,
                "description": row.description,
                "flags": row.allowed_types,
                "group": row.reviewer_group_id,
                "of_run": row.run_id == run.pk,
                "raw_value": row.raw_value,
            }
            for row in rows
        ],
    }


# --- the single-statement path: an end with nothing paused -------------------------------


def test_an_end_with_nothing_paused_marks_run_and_thread_and_audits_in_one_statement(
    claimed, django_assert_num_queries
):
    before = timezone.now()
    with django_assert_num_queries(1) as captured:
        finished = pauses_record.run_finish(
            run_id=claimed.pk, worker="w1", interrupts=[], result=RESULT, leased=claimed
        )
    after = timezone.now()

    # One statement locked, marked and audited; the ORM path never ran.
    [locking] = [q["sql"] for q in captured.captured_queries if "FOR UPDATE" in q["sql"]]
    assert f'INSERT INTO "{AuditEvent._meta.db_table}"' in locking
    assert locking_selects(captured.captured_queries, RUN_TABLE) == []
    assert not any(q["sql"].startswith("INSERT") for q in captured.captured_queries)

    row = Run.objects.get(pk=claimed.pk)
    assert row.status == Run.Status.SUCCESS
    assert row.result == RESULT
    assert list(row.result) == list(RESULT)  # the json column keeps the key order
    assert list(row.result["alpha"]["y"][2]) == ["b", "a"]
    assert row.finished_at is not None and before <= row.finished_at <= after
    assert (row.lease_owner, row.lease_expires_at) == ("", None)
    assert row.attempts == 1
    thread = Thread.objects.get(pk=claimed.thread_id)
    assert thread.status == Thread.Status.DONE
    assert before <= thread.updated_at <= after
    assert not HumanInterrupt.objects.filter(thread_id=thread.pk).exists()

    [event] = finished_events(claimed.pk)
    assert event.data == {"status": "success", "interrupts": 0, "attempt": 1}
    assert list(event.data) == ["status", "interrupts", "attempt"]
    assert (event.thread_id, event.run_id) == (thread.pk, row.pk)
    assert (event.actor_id, event.interrupt_id) == (None, None)
    assert [e.kind for e in events_of(claimed.pk)] == ["run.started", "run.finished"]

    # What the statement returned agrees with the rows, the thread included.
    assert isinstance(finished, Run) and finished.pk == row.pk
    assert finished.status == row.status
    assert finished.result == row.result and list(finished.result) == list(RESULT)
    assert finished.finished_at == row.finished_at
    assert (finished.lease_owner, finished.lease_expires_at) == ("", None)
    assert (finished.attempts, finished.thread_id) == (row.attempts, row.thread_id)
    assert (finished.input, finished.created_by_id) == (row.input, row.created_by_id)
    with django_assert_num_queries(0):
        returned_thread = finished.thread
    assert isinstance(returned_thread, Thread) and returned_thread.pk == thread.pk
    assert returned_thread.status == thread.status == Thread.Status.DONE
    assert returned_thread.updated_at == thread.updated_at
    assert (returned_thread.graph, returned_thread.metadata) == (thread.graph, thread.metadata)
    assert returned_thread.requester_id == thread.requester_id


def test_a_result_of_none_is_stored_as_null(claimed):
    finished = pauses_record.run_finish(
        run_id=claimed.pk, worker="w1", interrupts=[], result=None, thread_id=claimed.thread_id
    )

    assert finished.result is None
    assert Run.objects.filter(pk=claimed.pk, result__isnull=True).exists()
    assert Run.objects.get(pk=claimed.pk).status == Run.Status.SUCCESS


# --- the single-statement path: a pause ----------------------------------------------------


def test_a_pause_with_two_interrupts_makes_two_pending_rows_and_audits_them_in_order(
    claimed, reviewers_group, django_assert_max_num_queries
):
    interrupts = two_interrupts()
    (first_id, first_value, _), (second_id, _, _) = interrupts

    # The statement; and, as this process has no copies yet, the reads of the active
    # decision rules, the reviewer group and its policy.
    with django_assert_max_num_queries(4) as captured:
        finished = pauses_record.run_finish(
            run_id=claimed.pk, worker="w1", interrupts=interrupts, result=None, leased=claimed
        )
    [statement] = [q["sql"] for q in captured.captured_queries if "FOR UPDATE" in q["sql"]]
    assert f'INSERT INTO "{HumanInterrupt._meta.db_table}"' in statement

    row = Run.objects.get(pk=claimed.pk)
    assert row.status == Run.Status.INTERRUPTED and row.result is None
    assert row.finished_at is not None and (row.lease_owner, row.lease_expires_at) == ("", None)
    assert Thread.objects.get(pk=claimed.thread_id).status == Thread.Status.INTERRUPTED
    assert finished.status == Run.Status.INTERRUPTED and finished.result is None
    assert finished.thread.status == Thread.Status.INTERRUPTED

    rows = {r.interrupt_id: r for r in HumanInterrupt.objects.filter(thread_id=claimed.thread_id)}
    assert set(rows) == {first_id, second_id}
    for interrupt_id, action, n in [(first_id, "send_email", 1), (second_id, "send_fax", 2)]:
        r = rows[interrupt_id]
        assert r.status == HumanInterrupt.Status.PENDING
        assert (r.run_id, r.position, r.kind) == (claimed.pk, 0, "human_interrupt_list")
        assert (r.action, r.args, r.description) == (action, {"to": "a@b.c", "n": n}, "Send?")
        assert list(r.args) == ["to", "n"]
        assert r.allowed_types == ["accept", "edit", "response", "ignore"]
        assert r.reviewer_group_id == reviewers_group.pk
    assert rows[first_id].raw_value == first_value

    events = events_of(claimed.pk)
    assert [e.kind for e in events] == [
        "run.started",
        "interrupt.created",
        "interrupt.created",
        "run.finished",
    ]
    _, created_first, created_second, end = events
    assert [created_first.data["interrupt_id"], created_second.data["interrupt_id"]] == [
        first_id,
        second_id,
    ]
    assert created_first.interrupt_id == rows[first_id].pk
    assert created_second.interrupt_id == rows[second_id].pk
    assert created_first.data["action"] == "send_email"
    assert created_second.data["args"] == {"to": "a@b.c", "n": 2}
    assert end.data == {"status": "interrupted", "interrupts": 2, "attempt": 1}
    assert list(end.data) == ["status", "interrupts", "attempt"]
    assert all(e.thread_id == claimed.thread_id for e in events)
    # The rows as made, in the order they are read back, for the AG-UI stream's end.
    in_order = list(HumanInterrupt.objects.filter(run_id=claimed.pk).in_order())
    assert [r.pk for r in finished.interrupt_rows] == [r.pk for r in in_order]
    for made, read in zip(finished.interrupt_rows, in_order, strict=True):
        assert (made.args, made.raw_value, made.expires_at) == (
            read.args,
            read.raw_value,
            read.expires_at,
        )
        assert made.reviewer_group.name == read.reviewer_group.name


def test_a_pause_is_routed_to_the_group_the_thread_has_when_the_run_ends(
    claimed, reviewers_group, finance_group
):
    # The worker routes the rows with the thread it leased; an operator moved the thread
    # to another group while the run ran: the rows go to that one, as read under lock.
    Thread.objects.filter(pk=claimed.thread_id).update(reviewer_group=finance_group)

    finished = pauses_record.run_finish(
        run_id=claimed.pk, worker="w1", interrupts=two_interrupts(), result=None, leased=claimed
    )

    assert finished.status == Run.Status.INTERRUPTED
    rows = HumanInterrupt.objects.filter(thread_id=claimed.thread_id)
    assert [r.reviewer_group_id for r in rows] == [finance_group.pk] * 2
    assert [r.reviewer_group.name for r in finished.interrupt_rows] == ["finance"] * 2
    assert [e.data["group"] for e in events_of(claimed.pk) if e.kind == "interrupt.created"] == [
        "finance"
    ] * 2
    assert [e.data["interrupts"] for e in finished_events(claimed.pk)] == [2]


# --- what the statement leaves alone ---------------------------------------------------------


def assert_nothing_ended(run: Run, *, status: str, lease_owner: str, thread_status: str) -> None:
    row = Run.objects.get(pk=run.pk)
    assert (row.status, row.lease_owner) == (status, lease_owner)
    assert row.result is None and row.finished_at is None
    assert Thread.objects.get(pk=run.thread_id).status == thread_status
    assert finished_events(run.pk) == []
    assert not AuditEvent.objects.filter(
        run_id=run.pk, kind=AuditEvent.Kind.INTERRUPT_CREATED
    ).exists()
    assert not HumanInterrupt.objects.filter(thread_id=run.thread_id).exists()


@pytest.mark.parametrize("paused", [False, True], ids=["nothing_paused", "two_interrupts"])
@pytest.mark.parametrize(
    "lease_owner",
    ["", "w1"],
    # thread_cancel clears the lease; with it kept, the status alone must stop the end.
    ids=["lease_cleared", "lease_kept"],
)
def test_a_run_cancelled_before_it_finishes_is_not_finished(claimed, paused, lease_owner):
    Run.objects.filter(pk=claimed.pk).update(status=Run.Status.CANCELLED, lease_owner=lease_owner)
    thread_status = Thread.objects.get(pk=claimed.thread_id).status

    finished = pauses_record.run_finish(
        run_id=claimed.pk,
        worker="w1",
        interrupts=two_interrupts() if paused else [],
        result=None if paused else RESULT,
        thread_id=claimed.thread_id,
    )

    assert finished is None
    assert_nothing_ended(
        claimed, status=Run.Status.CANCELLED, lease_owner=lease_owner, thread_status=thread_status
    )


@pytest.mark.parametrize("paused", [False, True], ids=["nothing_paused", "two_interrupts"])
def test_a_run_taken_over_by_another_worker_is_not_finished_by_the_first(claimed, paused):
    Run.objects.filter(pk=claimed.pk).update(lease_owner="w2")
    thread_status = Thread.objects.get(pk=claimed.thread_id).status

    finished = pauses_record.run_finish(
        run_id=claimed.pk,
        worker="w1",
        interrupts=two_interrupts() if paused else [],
        result=None if paused else RESULT,
        thread_id=claimed.thread_id,
    )

    assert finished is None
    assert_nothing_ended(
        claimed, status=Run.Status.RUNNING, lease_owner="w2", thread_status=thread_status
    )
    assert Run.objects.get(pk=claimed.pk).lease_expires_at == claimed.lease_expires_at


@pytest.mark.parametrize("paused", [False, True], ids=["nothing_paused", "two_interrupts"])
def test_a_finish_naming_another_thread_finishes_nothing(claimed, requester, paused):
    other = lg_services.thread_create(user=requester)
    thread_status = Thread.objects.get(pk=claimed.thread_id).status

    finished = pauses_record.run_finish(
        run_id=claimed.pk,
        worker="w1",
        interrupts=two_interrupts() if paused else [],
        result=None if paused else RESULT,
        thread_id=other.pk,
    )

    assert finished is None
    assert_nothing_ended(
        claimed, status=Run.Status.RUNNING, lease_owner="w1", thread_status=thread_status
    )
    assert Thread.objects.get(pk=other.pk).status == other.status
    assert not HumanInterrupt.objects.filter(thread_id=other.pk).exists()
    assert not AuditEvent.objects.filter(thread_id=other.pk).exists()


@pytest.mark.parametrize("with_thread_id", [True, False], ids=["statement", "orm"])
def test_a_redelivered_finish_does_not_duplicate_the_interrupts_it_made_before(
    claimed, with_thread_id
):
    interrupts = two_interrupts()
    thread_id = claimed.thread_id if with_thread_id else None
    first = pauses_record.run_finish(
        run_id=claimed.pk, worker="w1", interrupts=interrupts, result=None, thread_id=thread_id
    )
    assert first is not None
    rows_before = set(
        HumanInterrupt.objects.filter(thread_id=claimed.thread_id).values_list("pk", flat=True)
    )
    assert len(rows_before) == 2
    # The worker died after committing; the redelivered task runs the graph to the same pause.
    Run.objects.filter(pk=claimed.pk).update(
        status=Run.Status.RUNNING, lease_owner="w1", finished_at=None
    )

    again = pauses_record.run_finish(
        run_id=claimed.pk, worker="w1", interrupts=interrupts, result=None, thread_id=thread_id
    )

    assert again is not None and again.status == Run.Status.INTERRUPTED
    rows = HumanInterrupt.objects.filter(thread_id=claimed.thread_id)
    assert rows.count() == 2
    assert set(rows.values_list("pk", flat=True)) == rows_before
    assert set(rows.values_list("status", flat=True)) == {HumanInterrupt.Status.PENDING}
    assert Run.objects.get(pk=claimed.pk).status == Run.Status.INTERRUPTED
    assert Thread.objects.get(pk=claimed.thread_id).status == Thread.Status.INTERRUPTED
    assert [e.kind for e in events_of(claimed.pk)] == [
        "run.started",
        "interrupt.created",
        "interrupt.created",
        "run.finished",
        "run.finished",  # the second end made no new rows
    ]
    assert [e.data["interrupts"] for e in finished_events(claimed.pk)] == [2, 0]


# --- callers without thread_id (SQLite's statements: tests/core/db/test_run_statements_sqlite.py)


def test_the_single_statement_path_is_available_on_postgresql(db):
    assert prepared.available() is True


@pytest.mark.parametrize("paused", [False, True], ids=["nothing_paused", "two_interrupts"])
def test_an_end_without_the_leased_run_reads_its_thread_then_ends_it_the_same_way(
    manual_runs, requester, reviewers_group, paused
):
    def statements_sent(queries) -> int:
        return sum(q["sql"].lstrip().startswith("WITH t AS") for q in queries)

    by_statement, by_orm = claimed_run(requester), claimed_run(requester)
    interrupts = two_interrupts()  # the same ids on both threads: the same audit data
    result = None if paused else RESULT

    with CaptureQueriesContext(connection) as captured:
        pauses_record.run_finish(
            run_id=by_statement.pk,
            worker="w1",
            interrupts=interrupts if paused else [],
            result=result,
            leased=by_statement,
        )
    assert statements_sent(captured.captured_queries) == 1
    assert locking_selects(captured.captured_queries, RUN_TABLE) == []

    with CaptureQueriesContext(connection) as captured:
        finished = pauses_record.run_finish(
            run_id=by_orm.pk,
            worker="w1",
            interrupts=interrupts if paused else [],
            result=result,
        )
    # Without the leased run its thread is read first (unlocked), then the statement.
    assert statements_sent(captured.captured_queries) == 1
    assert finished.status == (Run.Status.INTERRUPTED if paused else Run.Status.SUCCESS)

    expected = outcome(by_statement.pk)
    assert outcome(by_orm.pk) == expected
    # And what both agree on is the right end.
    assert expected["run"]["status"] == ("interrupted" if paused else "success")
    assert expected["thread"] == ("interrupted" if paused else "done")
    assert [e["kind"] for e in expected["events"]] == [
        "run.started",
        *(["interrupt.created"] * (2 if paused else 0)),
        "run.finished",
    ]
    assert expected["events"][-1]["data"] == {
        "status": expected["run"]["status"],
        "interrupts": 2 if paused else 0,
        "attempt": 1,
    }
    assert expected["events"][-1]["keys"] == ["status", "interrupts", "attempt"]
    assert len(expected["interrupts"]) == (2 if paused else 0)
    if not paused:
        assert expected["run"]["result_keys"] == list(RESULT)


# --- lock order, with a real concurrent transaction -----------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_statement_locks_the_thread_before_the_run(manual_runs, requester, test_database_url):
    import psycopg

    run = claimed_run(requester)
    outcome_of: dict[str, Any] = {}
    returned = threading.Event()

    def finish() -> None:
        try:
            outcome_of["run"] = pauses_record.run_finish(
                run_id=run.pk, worker="w1", interrupts=[], result=RESULT, thread_id=run.thread_id
            )
        except Exception as exc:
            outcome_of["error"] = exc
        finally:
            connection.close()
            returned.set()

    finisher = threading.Thread(target=finish, daemon=True)
    holder = psycopg.connect(test_database_url)
    watcher = psycopg.connect(test_database_url, autocommit=True)
    try:
        holder.execute(f'SELECT id FROM "{THREAD_TABLE}" WHERE id = %s FOR UPDATE', [run.thread_id])
        holder_pid = holder.info.backend_pid
        finisher.start()

        def blocked_by_holder() -> bool:
            pids = watcher.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock' AND %s = ANY(pg_blocking_pids(pid))",
                [holder_pid],
            ).fetchall()
            return bool(pids)

        wait_for(blocked_by_holder, 10, 0.02, "run_finish to wait for the thread's lock")
        time.sleep(0.5)
        assert not returned.is_set(), outcome_of  # still waiting on the thread

        # Meanwhile the run row is free: the statement has not reached it.
        with psycopg.connect(test_database_url) as probe:
            try:
                probe.execute(
                    f'SELECT 1 FROM "{RUN_TABLE}" WHERE id = %s FOR UPDATE NOWAIT', [run.pk]
                )
            except psycopg.errors.LockNotAvailable:
                pytest.fail("the run row was locked while the thread's lock was awaited")
            finally:
                probe.rollback()
        assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING

        holder.rollback()  # release the thread
        assert returned.wait(20), "run_finish did not return after the thread was released"
    finally:
        holder.close()
        finisher.join(timeout=20)
        watcher.close()

    assert "error" not in outcome_of, outcome_of.get("error")
    assert outcome_of["run"] is not None and outcome_of["run"].status == Run.Status.SUCCESS
    row = Run.objects.get(pk=run.pk)
    assert (row.status, row.lease_owner) == (Run.Status.SUCCESS, "")
    assert row.result == RESULT and list(row.result) == list(RESULT)
    assert Thread.objects.get(pk=run.thread_id).status == Thread.Status.DONE
    assert [e.data for e in finished_events(run.pk)] == [
        {"status": "success", "interrupts": 0, "attempt": 1}
    ]
