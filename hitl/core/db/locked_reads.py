"""Locked reads of a thread and its runs, as SQL built once rather than an ORM query
compiled on every call (on every database): a wait's thread, a lease's run, and a run's
thread then the run, in the order every service that changes a thread locks them.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.db import connection

from hitl.core.db import prepared
from hitl.core.models import Run, Thread


def lock_thread_and_run(run_id: Any, thread_id: Any = None) -> tuple[Thread | None, Run | None]:
    """Lock a run's thread, then the run.

    Thread first, like every service that changes a thread (decide, cancel, start):
    with the opposite order a finishing run and a cancel deadlock each other.
    """
    if thread_id is None:
        thread_id = Run.objects.filter(pk=run_id).values_list("thread_id", flat=True).one_or_none()
        if thread_id is None:
            return None, None
    thread = thread_locked(thread_id)
    run = _run_locked(run_id, thread_id)
    return thread, run


@cache
def _thread_locked_sql(vendor: str) -> str:
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    return f'SELECT {prepared.select(Thread, "t")} FROM "{Thread._meta.db_table}" t WHERE t.id = %s{lock}'


def thread_locked(thread_id: Any) -> Thread | None:
    """The thread, locked: `Thread.objects.select_for_update()…one_or_none()` without
    compiling the query on each call (on every database)."""
    with prepared.cursor() as cursor:
        cursor.execute(
            _thread_locked_sql(connection.vendor),
            [Thread._meta.pk.get_db_prep_value(thread_id, connection)],
        )
        row = cursor.fetchone()
    return None if row is None else prepared.instance(Thread, prepared.concrete_fields(Thread), row)


@cache
def _run_locked_sql(vendor: str, with_thread: bool) -> str:
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    runs = f'"{Run._meta.db_table}" r'
    if with_thread:
        thread = f'JOIN "{Thread._meta.db_table}" t ON t.id = r.thread_id'
        return (
            f"SELECT {prepared.select(Run, 'r')}, {prepared.select(Thread, 't')} FROM {runs} {thread} "
            f"WHERE r.id = %s{lock}"
        )
    return (
        f"SELECT {prepared.select(Run, 'r')} FROM {runs} WHERE r.id = %s AND r.thread_id = %s{lock}"
    )


def _run_locked(run_id: Any, thread_id: Any) -> Run | None:
    """The run of `thread_id`, locked (the thread is locked first by the caller)."""
    with prepared.cursor() as cursor:
        cursor.execute(
            _run_locked_sql(connection.vendor, False),
            [
                Run._meta.pk.get_db_prep_value(run_id, connection),
                Thread._meta.pk.get_db_prep_value(thread_id, connection),
            ],
        )
        row = cursor.fetchone()
    return None if row is None else prepared.instance(Run, prepared.concrete_fields(Run), row)


def run_with_thread_locked(run_id: Any) -> Run | None:
    """The run with its thread, both locked: `Run.objects.select_for_update()
    .select_related("thread")…one_or_none()` without compiling the query on each call
    (on every database; the lease's read where one statement did not take it)."""
    with prepared.cursor() as cursor:
        cursor.execute(
            _run_locked_sql(connection.vendor, True),
            [Run._meta.pk.get_db_prep_value(run_id, connection)],
        )
        row = cursor.fetchone()
    return None if row is None else prepared.run_and_thread(row)[0]
