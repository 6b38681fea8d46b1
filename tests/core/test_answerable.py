"""The locked read a /langgraph resume answers from: SQL on PostgreSQL, the ORM elsewhere.

pgpaths.interrupts_answerable_locked must return what the ORM query it replaces
(services.interrupt_rows_for_update over the thread's paused runs) returns: the same
rows in the same order, the same field values, the same run, reviewer group and
answerer attached, and every row locked.
"""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from hitl.core import pgpaths, services
from hitl.core.models import HumanInterrupt, Thread

pytestmark = pytest.mark.postgres


def orm_read(thread_id) -> list[HumanInterrupt]:
    paused = HumanInterrupt.objects.filter(
        thread_id=thread_id, status=HumanInterrupt.Status.PENDING
    ).values("run_id")
    return list(
        services.interrupt_rows_for_update(thread_id)
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
    run = services.run_start(graph="parallel_approval", input={}, user=requester)
    assert manual_runs(run) == "interrupted"
    first, _ = HumanInterrupt.objects.filter(thread_id=run.thread_id).order_by("position", "pk")[:2]
    services.interrupt_resolve(
        interrupt_id=first.pk, user=reviewer, response_type="accept", args=None
    )
    return Thread.objects.get(pk=run.thread_id)


@pytest.mark.django_db
def test_the_sql_read_returns_what_the_orm_read_returns(half_answered, reviewer):
    with transaction.atomic():
        orm = orm_read(half_answered.pk)
        with CaptureQueriesContext(connection) as queries:
            raw = pgpaths.interrupts_answerable_locked(half_answered.pk)
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
        assert pgpaths.interrupts_answerable_locked(thread.pk) == []


@pytest.mark.django_db(transaction=True)
def test_every_row_read_is_locked_until_the_transaction_ends(half_answered, test_database_url):
    table = HumanInterrupt._meta.db_table
    ids = list(HumanInterrupt.objects.filter(thread=half_answered).values_list("pk", flat=True))
    with transaction.atomic():
        rows = pgpaths.interrupts_answerable_locked(half_answered.pk)
        assert {r.pk for r in rows} == set(ids)
        with psycopg.connect(test_database_url, autocommit=True) as probe:
            for pk in ids:
                with pytest.raises(psycopg.errors.LockNotAvailable):
                    probe.execute(f'SELECT 1 FROM "{table}" WHERE id = %s FOR UPDATE NOWAIT', [pk])
    with psycopg.connect(test_database_url, autocommit=True) as probe:
        probe.execute(f'SELECT 1 FROM "{table}" WHERE id = ANY(%s) FOR UPDATE NOWAIT', [ids])
