"""Query-count guards on the review cycle's hot paths.

A regression shows up here as more statements, not as seconds. The caps are today's
counts (inside a test transaction, so savepoints count too); lower them when a change
removes statements. bench/peers.py measures the whole cycle, checkpointer included.
"""

from __future__ import annotations

import contextlib

import pytest
from django.db import connection

from hitl.api.langgraph import serializers
from hitl.api.langgraph import services as lg_services
from hitl.core import decisions
from hitl.core.live import eventlog
from hitl.core.models import AuditEvent, HumanInterrupt, Run, Thread
from hitl.core.worker import lease, pauses_record

pytestmark = pytest.mark.django_db

# PostgreSQL claims and ends a run in single statements (hitl/core/db/run_statements.py).
ON_POSTGRES = connection.vendor == "postgresql"


@pytest.fixture
def idle_thread(requester):
    """A thread created by the API first (threads.create), as the LangGraph SDK does."""
    return lg_services.thread_create(user=requester)


@pytest.fixture
def paused_run(manual_runs, requester, idle_thread):
    run = lg_services.run_create(
        user=requester, assistant_id="approval", thread=idle_thread, input={}
    )
    manual_runs(run)
    return Run.objects.select_related("thread").get(pk=run.pk)


def test_starting_a_run_on_an_api_thread_stays_lean(
    requester, idle_thread, django_assert_max_num_queries
):
    # As /langgraph does it. On PostgreSQL the requester's start on a settled thread is
    # one statement: the thread's change (its row lock) and the run's insert. Elsewhere
    # the thread is read once, locked, for the whole start.
    with django_assert_max_num_queries(1 if ON_POSTGRES else 6) as captured:
        run = lg_services.run_create(
            user=requester, assistant_id="approval", thread_id=idle_thread.pk, input={}
        )
    thread = Thread.objects.get(pk=idle_thread.pk)
    assert run.status == "queued" and (thread.graph, thread.status) == ("approval", "busy")
    assert Run.objects.get(pk=run.pk).thread_id == thread.pk
    if ON_POSTGRES:
        (statement,) = [q["sql"] for q in captured.captured_queries]
        assert 'UPDATE "hitl_thread"' in statement and 'INSERT INTO "hitl_run"' in statement
    else:
        thread_reads = [
            q["sql"] for q in captured.captured_queries if 'FROM "hitl_thread"' in q["sql"]
        ]
        assert len(thread_reads) == 1


def test_a_start_the_single_statement_does_not_cover_takes_the_locked_path(
    requester, admin_user, idle_thread, django_assert_max_num_queries
):
    # Someone else's thread (an admin may run on any): read once, locked, then started.
    with django_assert_max_num_queries(5 if ON_POSTGRES else 7) as captured:
        run = lg_services.run_create(
            user=admin_user, assistant_id="approval", thread_id=idle_thread.pk, input={}
        )
    thread_reads = [q["sql"] for q in captured.captured_queries if 'FROM "hitl_thread"' in q["sql"]]
    # Locked where the database locks rows (SQLite locks the whole file on write).
    assert len(thread_reads) == 1 and ("FOR UPDATE" in thread_reads[0]) is ON_POSTGRES
    assert run.status == "queued" and run.created_by == admin_user
    assert Thread.objects.get(pk=idle_thread.pk).status == "busy"


def test_claiming_a_run_stays_lean(requester, idle_thread, django_assert_max_num_queries):
    run = lg_services.run_create(
        user=requester, assistant_id="approval", thread=idle_thread, input={}
    )
    # On SQLite: the lease, its thread and its audit event (run_statements_sqlite), in a
    # transaction (a savepoint here), nothing read first.
    with django_assert_max_num_queries(1 if ON_POSTGRES else 5) as captured:
        claimed, _ = lease.run_lease_take(run_id=run.pk, worker="w1")
    if not ON_POSTGRES:
        statements = [q["sql"].split()[0] for q in captured.captured_queries]
        assert statements[1:4] == ["UPDATE", "INSERT", "SELECT"], statements
    assert claimed is not None and claimed.status == "running"
    assert claimed.thread.pk == idle_thread.pk and claimed.first_lease
    assert AuditEvent.objects.filter(run_id=run.pk, kind="run.started").count() == 1


def test_ending_a_run_with_nothing_paused_is_one_statement(
    requester, idle_thread, django_assert_num_queries
):
    run = lg_services.run_create(
        user=requester, assistant_id="approval", thread=idle_thread, input={}
    )
    claimed, _ = lease.run_lease_take(run_id=run.pk, worker="w1")
    # As the worker ends it (with the run it leased): no transaction around the one
    # statement. On SQLite: the run's and the thread's updates and the audit event, in
    # one transaction (the test's, here), nothing read first.
    with django_assert_num_queries(1 if ON_POSTGRES else 3) as captured:
        finished = pauses_record.run_finish(
            run_id=run.pk, worker="w1", interrupts=[], result={"ok": 1}, leased=claimed
        )
    assert finished.status == "success" and finished.result == {"ok": 1}
    assert Thread.objects.get(pk=run.thread_id).status == "done"
    assert Run.objects.get(pk=run.pk).lease_owner == ""
    assert AuditEvent.objects.filter(run_id=run.pk, kind="run.finished").count() == 1
    if ON_POSTGRES:
        assert sum("FOR UPDATE" in q["sql"] for q in captured.captured_queries) == 1


def test_executing_a_run_to_its_pause_stays_lean(
    manual_runs, requester, reviewers_group, idle_thread, django_assert_max_num_queries
):
    run = lg_services.run_create(
        user=requester, assistant_id="approval", thread=idle_thread, input={}
    )
    # Claim, the graph (its checkpointer has a connection of its own), finish, and, as
    # this process has no copies yet, the reads of the active decision rules, the
    # reviewer group and its policy.
    with django_assert_max_num_queries(5 if ON_POSTGRES else 18):
        assert manual_runs(run) == "interrupted"


def test_the_worker_books_a_cycle_in_four_statements(
    manual_runs, requester, reviewer, reviewers_group, django_assert_num_queries
):
    """A cycle as the benchmark runs it (a run to its pause, an answer, the resume run to
    its end): the worker claims each run (its turn checked with it) and records each end
    (the run, its interrupt rows, their audit events, the thread) in one statement each
    on PostgreSQL, and reads nothing back for the AG-UI stream's end. Configuration
    (rules, groups, policies) comes from the process's copies, as after a first run."""

    def cycle(measured: bool) -> None:
        thread = lg_services.thread_create(user=requester)
        # Streamed from its start, as a /langgraph client's run is: its end is published.
        run = lg_services.run_create(
            user=requester,
            assistant_id="approval",
            thread=thread,
            input={},
            request=lg_services.RunRequest(stream_modes=["values"]),
        )
        # On SQLite (run_statements_sqlite): the claim's update, its thread's read and its
        # audit event in a transaction (a savepoint here); the end's updates of run and
        # thread, its interrupt rows and its audit events (the test's transaction).
        counted = django_assert_num_queries(2 if ON_POSTGRES else 9)
        with counted if measured else contextlib.nullcontext():
            assert manual_runs(run) == "interrupted"
        row = HumanInterrupt.objects.get(thread_id=thread.pk)
        [finished] = [
            event
            for _, event in eventlog.read_from(thread.pk, "0-0")
            if event.get("type") == "RUN_FINISHED"
        ]
        assert [item["id"] for item in finished["outcome"]["interrupts"]] == [str(row.pk)]
        decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept")
        resume = Run.objects.get(thread_id=thread.pk, kind="resume")
        counted = django_assert_num_queries(2 if ON_POSTGRES else 8)
        with counted if measured else contextlib.nullcontext():
            assert manual_runs(resume) == "success"

    cycle(measured=False)  # the process's copies of rules, groups and policies
    cycle(measured=True)


def test_the_wait_answer_reads_one_query(paused_run, django_assert_max_num_queries):
    with django_assert_max_num_queries(1):
        output = serializers.run_output(paused_run)
    assert output["__interrupt__"]


def test_a_finished_wait_reads_its_run_and_answer_in_two_queries(
    paused_run, django_assert_max_num_queries
):
    from hitl.api.langgraph.api import _read_finished

    with django_assert_max_num_queries(2):
        run = _read_finished(paused_run.pk)
    assert run.wait_output["__interrupt__"]


def test_answering_an_interrupt_stays_lean(paused_run, reviewer, django_assert_max_num_queries):
    row = HumanInterrupt.objects.get(thread_id=paused_run.thread_id)
    # On PostgreSQL the answer, its audit event and the resume run it completes (with
    # the thread's change) are one statement.
    with django_assert_max_num_queries(8 if ON_POSTGRES else 11):
        decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept")
    assert Run.objects.filter(thread_id=paused_run.thread_id, kind="resume").count() == 1


def test_resuming_through_the_langgraph_api_stays_lean(
    paused_run, reviewer, django_assert_num_queries
):
    # lease.wait(command={"resume": ...}): lock the thread and read its pending rows (and
    # their runs' other rows) locked, once; answer them as read, and create the resume
    # run with its metadata and webhook (on PostgreSQL the last answer with its audit
    # event, the thread's change and the run's insert are one statement; so are the
    # thread's locked read and its rows'). 5 with the savepoint of run_create's
    # transaction in the test's and the reviewer's look at the thread (an item of their
    # group on it?): 22, 15, 13, 10, 8, 7, then 6 before, counting the thread's read by
    # the view. The reviewer's permissions are loaded first, as any earlier check in the
    # request loads them.
    from hitl.core.access.permissions import user_can_view_thread

    assert user_can_view_thread(reviewer, Thread.objects.get(pk=paused_run.thread_id))
    with django_assert_num_queries(5 if ON_POSTGRES else 9) as captured:
        run = lg_services.run_create(
            user=reviewer,
            assistant_id="approval",
            thread_id=paused_run.thread_id,
            command={"resume": {"type": "accept"}},
            metadata={"source": "test"},
        )
    assert (run.kind, run.metadata) == ("resume", {"source": "test"})
    reads = [
        q["sql"] for q in captured.captured_queries if 'FROM "hitl_humaninterrupt"' in q["sql"]
    ]
    assert sum("'pending'" in sql for sql in reads) == 1  # pending rows, once
    locked = [("FOR UPDATE" in sql) is ON_POSTGRES for sql in reads if "'pending'" in sql]
    assert all(locked)  # locked as read
    assert not any("NOT (" in sql for sql in reads)  # no look for answered ones
    thread_reads = [q["sql"] for q in captured.captured_queries if 'FROM "hitl_thread"' in q["sql"]]
    assert len(thread_reads) == 1  # the thread, once, locked


def test_lookups_by_primary_key_compile_no_order_by(
    requester, idle_thread, django_assert_max_num_queries
):
    # `.first()` would add ORDER BY pk, whose compilation costs as much as the query.
    from hitl.api.langgraph.api import _read_finished

    run = lg_services.run_create(
        user=requester, assistant_id="approval", thread=idle_thread, input={}
    )
    with django_assert_max_num_queries(2 if ON_POSTGRES else 7) as captured:
        claimed, _ = lease.run_lease_take(run_id=run.pk, worker="w1")
        read = _read_finished(run.pk)
    assert claimed.pk == read.pk == run.pk
    selects = [q["sql"] for q in captured.captured_queries if q["sql"].startswith("SELECT")]
    assert selects and not any("ORDER BY" in sql for sql in selects), selects
    assert Run.objects.filter(pk=idle_thread.pk).one_or_none() is None


def test_creating_a_thread_answers_without_reading_state(
    requester, django_assert_num_queries, monkeypatch
):
    # threads.create: the insert alone (no transaction, no savepoint), and no checkpoint
    # or interrupt read for a thread nothing has run on.
    from hitl.api.langgraph import state

    reads = []
    read = state.thread_values
    monkeypatch.setattr(state, "thread_values", lambda t: reads.append(t) or read(t))
    with django_assert_num_queries(1):
        thread = lg_services.thread_create(user=requester, metadata={"graph_id": "approval"})
        answer = serializers.thread_json(thread)
    assert answer["values"] == {} and answer["interrupts"] == {}
    assert answer["status"] == "idle" and answer["thread_id"] == str(thread.pk)
    assert reads == []
    # Read back later, the same thread's state is read as usual.
    assert serializers.thread_json(Thread.objects.get(pk=thread.pk))["values"] == {}
    assert len(reads) == 1
