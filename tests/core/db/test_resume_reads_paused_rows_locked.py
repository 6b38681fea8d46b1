"""The reads a /langgraph wait and resume lock, as SQL built once, on every database.

answer_statements.interrupts_answerable_locked must return what the ORM query it replaces
(decisions.interrupt_rows_for_update over the thread's paused runs) returns: the same
rows in the same order, the same field values, the same run, reviewer group and
answerer attached, and (on PostgreSQL) every row locked. The same for
locked_reads.thread_locked. The parity tests run on SQLite too; the locks, the prepared
statements and the single-statement answer are PostgreSQL's.
"""

from __future__ import annotations

import contextlib
import uuid

import psycopg
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from hitl.core import decisions, runs
from hitl.core.db import answer_statements, locked_reads, prepared
from hitl.core.models import HumanInterrupt, Thread


def orm_read(thread_id) -> list[HumanInterrupt]:
    paused = HumanInterrupt.objects.filter(
        thread_id=thread_id, status=HumanInterrupt.Status.PENDING
    ).values("run_id")
    return list(
        decisions.interrupt_rows_for_update(thread_id)
        .filter(run_id__in=paused)
        .order_by("created_at", "interrupt_id", "position")
    )


def described(rows: list[HumanInterrupt]) -> list[tuple]:
    def fields(obj):
        return (
            None
            if obj is None
            else {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields}
        )

    return [
        (fields(row), fields(row.run), fields(row.reviewer_group), fields(row.responded_by))
        for row in rows
    ]


@pytest.fixture
def half_answered(manual_runs, requester, reviewer, reviewers_group):
    """The parallel graph's pause, one of its two rows answered by the reviewer."""
    run = runs.run_start(graph="parallel_approval", input={}, user=requester)
    assert manual_runs(run) == "interrupted"
    first, _ = HumanInterrupt.objects.filter(thread_id=run.thread_id).order_by("position", "pk")[:2]
    decisions.interrupt_resolve(
        interrupt_id=first.pk, user=reviewer, response_type="accept", args=None
    )
    return Thread.objects.get(pk=run.thread_id)


@pytest.mark.django_db
def test_the_sql_read_returns_what_the_orm_read_returns(half_answered, reviewer):
    with transaction.atomic():
        orm = orm_read(half_answered.pk)
        with CaptureQueriesContext(connection) as queries:
            raw = answer_statements.interrupts_answerable_locked(half_answered.pk)
    assert len(queries) == 1
    assert len(raw) == 2 and [r.status for r in raw].count("pending") == 1
    assert described(raw) == described(orm)
    answered = next(r for r in raw if r.status == "resolved")
    assert answered.responded_by.get_username() == reviewer.get_username()
    assert answered.reviewer_group.name == orm[0].reviewer_group.name
    assert {r.run.status for r in raw} == {"interrupted"}
    assert raw[0].args == orm[0].args and isinstance(raw[0].raw_value, (list, dict))


@pytest.mark.django_db
def test_a_thread_with_nothing_pending_reads_nothing(requester):
    thread = Thread.objects.create(graph="approval", requester=requester)
    with transaction.atomic():
        assert answer_statements.interrupts_answerable_locked(thread.pk) == []


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_resume_reads_the_thread_and_its_rows_locked_in_one_statement(
    half_answered, requester, test_database_url
):
    ids = list(HumanInterrupt.objects.filter(thread=half_answered).values_list("pk", flat=True))
    with transaction.atomic():
        orm = orm_read(half_answered.pk)
    with transaction.atomic():
        with CaptureQueriesContext(connection) as queries:
            thread, rows = answer_statements.thread_and_answerable_locked(half_answered.pk)
        assert len(queries) == 1
        assert {f.attname: getattr(thread, f.attname) for f in Thread._meta.concrete_fields} == (
            Thread.objects.filter(pk=half_answered.pk).values().get()
        )
        assert thread._state.adding is False
        assert described(rows) == described(orm) and len(rows) == 2
        with psycopg.connect(test_database_url, autocommit=True) as probe:
            for table, pk in [(Thread._meta.db_table, thread.pk)] + [
                (HumanInterrupt._meta.db_table, pk) for pk in ids
            ]:
                with pytest.raises(psycopg.errors.LockNotAvailable):
                    probe.execute(f'SELECT 1 FROM "{table}" WHERE id = %s FOR UPDATE NOWAIT', [pk])
    quiet = Thread.objects.create(graph="approval", requester=requester)
    with transaction.atomic():
        thread, rows = answer_statements.thread_and_answerable_locked(quiet.pk)
        assert (thread.pk, rows) == (quiet.pk, [])
        assert answer_statements.thread_and_answerable_locked(uuid.uuid4()) == (None, [])


@pytest.mark.django_db
def test_elsewhere_a_resume_reads_the_thread_alone_and_its_rows_when_needed(
    half_answered, monkeypatch
):
    # SQLite has no locks to take with a read: the thread's read, and the rows when the
    # resume reads them (interrupts_answerable_locked, as above).
    monkeypatch.setattr(prepared, "available", lambda: False)
    with transaction.atomic():
        thread, rows = answer_statements.thread_and_answerable_locked(half_answered.pk)
    assert (thread.pk, thread.status, rows) == (half_answered.pk, half_answered.status, None)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_every_row_read_is_locked_until_the_transaction_ends(half_answered, test_database_url):
    table = HumanInterrupt._meta.db_table
    ids = list(HumanInterrupt.objects.filter(thread=half_answered).values_list("pk", flat=True))
    with transaction.atomic():
        rows = answer_statements.interrupts_answerable_locked(half_answered.pk)
        assert {r.pk for r in rows} == set(ids)
        with psycopg.connect(test_database_url, autocommit=True) as probe:
            for pk in ids:
                with pytest.raises(psycopg.errors.LockNotAvailable):
                    probe.execute(f'SELECT 1 FROM "{table}" WHERE id = %s FOR UPDATE NOWAIT', [pk])
    with psycopg.connect(test_database_url, autocommit=True) as probe:
        probe.execute(f'SELECT 1 FROM "{table}" WHERE id = ANY(%s) FOR UPDATE NOWAIT', [ids])


def answer_in(
    manual_runs, requester, reviewer, grace: float = 0, orm: pytest.MonkeyPatch | None = None
) -> tuple[dict, dict]:
    """Pause an approval thread, answer it with an edit (through the ORM with `orm`); the
    row's answer and its audit event as stored."""
    from hitl.core.models import AuditEvent

    run = runs.run_start(graph="approval", input={}, user=requester)
    assert manual_runs(run) == "interrupted"
    row = HumanInterrupt.objects.get(thread_id=run.thread_id)
    args = {"action": "send_email", "args": {**row.args, "to": "ops@example.com"}}
    with contextlib.ExitStack() as stack:
        if orm is not None:
            stack.enter_context(orm.context()).setattr(prepared, "available", lambda: False)
        decisions.interrupt_resolve(
            interrupt_id=row.pk, user=reviewer, response_type="edit", args=args, grace=grace
        )
    stored = HumanInterrupt.objects.filter(pk=row.pk).values().get()
    assert stored["responded_at"] is not None
    event = AuditEvent.objects.filter(interrupt_id=row.pk, kind="interrupt.answered").values()
    (event,) = event
    answer = {k: stored[k] for k in ("status", "response_type", "response_args")}
    answer["grace"] = stored["undo_until"] is not None
    answer["by"] = stored["responded_by_id"]
    event["data"].pop("wait_seconds")
    kept = {k: event[k] for k in ("kind", "actor_id", "data")}
    kept["same_thread"] = event["thread_id"] == row.thread_id
    return answer, kept


@pytest.mark.postgres
@pytest.mark.django_db
@pytest.mark.parametrize("grace", [0, 30])
def test_an_answer_and_its_audit_event_are_one_statement_written_as_the_orm_writes_them(
    manual_runs, requester, reviewer, reviewers_group, monkeypatch, grace
):
    with CaptureQueriesContext(connection) as queries:
        single = answer_in(manual_runs, requester, reviewer, grace)
    written = [
        q["sql"] for q in queries.captured_queries if 'INSERT INTO "hitl_auditevent"' in q["sql"]
    ]
    assert any(sql.lstrip().startswith("WITH u AS") for sql in written)
    orm = answer_in(manual_runs, requester, reviewer, grace, orm=monkeypatch)
    assert single == orm
    assert single[0]["status"] == "resolved" and single[0]["grace"] is bool(grace)
    assert single[1]["data"]["answer"]["args"]["to"] == "ops@example.com"


@pytest.mark.django_db
def test_the_thread_is_read_as_the_orm_reads_it(half_answered):
    with transaction.atomic():
        thread = locked_reads.thread_locked(half_answered.pk)
    fields = {f.attname: getattr(thread, f.attname) for f in Thread._meta.concrete_fields}
    assert fields == Thread.objects.filter(pk=half_answered.pk).values().get()
    assert thread._state.adding is False and thread.metadata == half_answered.metadata
    assert locked_reads.thread_locked(uuid.uuid4()) is None


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_thread_is_read_locked_as_the_orm_reads_it(half_answered, test_database_url):
    table = Thread._meta.db_table
    with transaction.atomic():
        thread = locked_reads.thread_locked(half_answered.pk)
        assert {f.attname: getattr(thread, f.attname) for f in Thread._meta.concrete_fields} == (
            Thread.objects.filter(pk=half_answered.pk).values().get()
        )
        assert thread._state.adding is False
        with (
            psycopg.connect(test_database_url, autocommit=True) as probe,
            pytest.raises(psycopg.errors.LockNotAvailable),
        ):
            probe.execute(f'SELECT 1 FROM "{table}" WHERE id = %s FOR UPDATE NOWAIT', [thread.pk])
    assert locked_reads.thread_locked(uuid.uuid4()) is None


@pytest.mark.postgres
@pytest.mark.django_db
def test_these_statements_are_prepared_once_per_session_and_still_logged(half_answered):
    """statements binds on the server and prepares what it runs: PostgreSQL keeps the plan
    for the session. Django's query log still shows each statement with its values."""
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        for _ in range(3):
            locked_reads.thread_locked(half_answered.pk)
    logged = [q["sql"] for q in queries.captured_queries if "hitl_thread" in q["sql"]]
    assert len(logged) == 3
    assert all(f"t.id = '{half_answered.pk.hex}'::uuid FOR UPDATE" in sql for sql in logged)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
            ['%FROM "hitl_thread" t WHERE t.id = $1 FOR UPDATE%'],
        )
        assert cursor.fetchone()[0] == 1
