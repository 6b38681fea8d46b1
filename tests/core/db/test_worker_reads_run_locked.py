"""The worker's locked reads of a run (its end's thread and run, its lease's run with its
thread), as SQL built once rather than ORM queries compiled on every call: the path
every database without the single statements takes (the embedded SQLite above all)
and the one PostgreSQL falls back to. They must read what the ORM reads, lock what it
locks, and compile nothing."""

from __future__ import annotations

import psycopg
import pytest
from django.db import transaction
from django.db.models.sql import compiler

from hitl.core.db import locked_reads
from hitl.core.models import Run, Thread
from hitl.core.worker import lease

pytestmark = pytest.mark.django_db


def _fields(obj) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields}


@pytest.fixture
def compiled(monkeypatch):
    """The ORM queries compiled meanwhile."""
    seen: list[str] = []
    real = compiler.SQLCompiler.as_sql

    def as_sql(self, *args, **kwargs):
        seen.append(type(self).__name__)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(compiler.SQLCompiler, "as_sql", as_sql)
    return seen


@pytest.fixture
def leased_run(requester):
    thread = Thread.objects.create(graph="approval", requester=requester, metadata={"k": "v"})
    run = Run.objects.create(thread=thread, status=Run.Status.QUEUED, input={"a": 1})
    taken, _ = lease.run_lease_take(run_id=run.pk, worker="w1")
    assert taken is not None
    return taken


def test_an_ending_runs_thread_and_run_are_read_as_the_orm_reads_them(leased_run, compiled):
    with transaction.atomic():
        thread, run = locked_reads.lock_thread_and_run(leased_run.pk, leased_run.thread_id)
    assert compiled == []
    assert _fields(thread) == Thread.objects.filter(pk=leased_run.thread_id).values().get()
    assert _fields(run) == Run.objects.filter(pk=leased_run.pk).values().get()
    assert run._state.adding is False and run.input == {"a": 1}
    other = Thread.objects.create(graph="approval")
    with transaction.atomic():
        assert locked_reads.lock_thread_and_run(leased_run.pk, other.pk) == (other, None)


def test_a_lease_held_elsewhere_is_read_with_its_thread_compiling_nothing(leased_run, compiled):
    """Another worker's live lease: the one statement does not take it, and the locked
    read (built once) tells how long it has left."""
    taken, wait = lease.run_lease_take(run_id=leased_run.pk, worker="w2")
    assert taken is None and 0 < wait <= 600
    assert compiled == []
    with transaction.atomic():
        run = locked_reads.run_with_thread_locked(leased_run.pk)
    assert _fields(run) == Run.objects.filter(pk=leased_run.pk).values().get()
    assert _fields(run.thread) == Thread.objects.filter(pk=leased_run.thread_id).values().get()
    assert run.thread.metadata == {"k": "v"}
    assert locked_reads.run_with_thread_locked(Run(thread=run.thread).pk) is None


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_both_reads_lock_the_run_and_its_thread(leased_run, test_database_url):
    for read in (
        lambda: locked_reads.lock_thread_and_run(leased_run.pk, leased_run.thread_id),
        lambda: locked_reads.run_with_thread_locked(leased_run.pk),
    ):
        with transaction.atomic():
            read()
            with psycopg.connect(test_database_url, autocommit=True) as probe:
                for table, pk in (
                    (Run._meta.db_table, leased_run.pk),
                    (Thread._meta.db_table, leased_run.thread_id),
                ):
                    with pytest.raises(psycopg.errors.LockNotAvailable):
                        probe.execute(
                            f'SELECT 1 FROM "{table}" WHERE id = %s FOR UPDATE NOWAIT', [pk]
                        )
