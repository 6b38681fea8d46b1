"""The suite's own machinery: a dead test connection costs one test, and each
pytest-xdist worker keeps to its own Redis db, var/ directory and ports."""

from __future__ import annotations

import asyncio
import os
import socket
import threading

import psycopg
import pytest
from asgiref.sync import SyncToAsync
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import OperationalError, connection, connections

from tests.conftest import (
    WORKER_PORTS,
    close_shared_thread_connections,
    free_port,
    reopen_dead_connections,
    replace_exhausted_pools,
    wait_for,
)
from tests.xdist_env import redis_url_for_worker, worker_index

WORKER = os.environ.get("PYTEST_XDIST_WORKER")


@pytest.mark.postgres
def test_a_test_connection_the_server_ended_is_reopened_on_an_emptied_database(
    request, test_database_url, transactional_db
):
    get_user_model().objects.create_user(username="left-behind")
    pid = connection.connection.info.backend_pid
    with psycopg.connect(test_database_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(OperationalError):
        get_user_model().objects.count()  # what every later test met before the guard

    assert reopen_dead_connections(request.config) == ["default"]

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] != pid
    # The teardown flush the dead connection could not run has been done.
    assert not get_user_model().objects.filter(username="left-behind").exists()
    assert reopen_dead_connections(request.config) == []  # a live one is left alone


@pytest.mark.postgres  # SQLite ignores a close of its in-memory test database
def test_a_connection_an_async_query_left_on_the_shared_thread_is_closed(transactional_db):
    """Async ORM calls run on asgiref's one shared thread, which outlives the test: its
    connection is closed after each test, not inherited by the next."""

    def open_there() -> bool:
        return connections["default"].connection is not None

    assert asyncio.run(get_user_model().objects.acount()) == 0
    shared = SyncToAsync.single_thread_executor
    assert shared.submit(open_there).result(timeout=30)  # Django left it open

    assert close_shared_thread_connections()
    assert not shared.submit(open_there).result(timeout=30)


@pytest.mark.postgres
def test_a_pool_left_without_a_connection_is_replaced_before_the_next_test(transactional_db):
    """Threads an earlier test left behind hold every connection: the next test's setup
    gets a fresh pool (and a warning naming them), not a 20 s timeout per test."""
    connection.close()
    pool = connection.pool
    release = threading.Event()
    taken: list[object] = []

    def hold() -> None:
        conn = pool.getconn()
        taken.append(conn)
        release.wait(60)
        pool.putconn(conn)  # back to its own pool, closed by then: the connection closes

    holders = [threading.Thread(target=hold, name=f"left-behind-{n}") for n in range(pool.max_size)]
    for thread in holders:
        thread.start()
    try:
        wait_for(lambda: len(taken) == pool.max_size, what="every connection to be taken")
        assert pool.get_stats()["pool_available"] == 0
        with pytest.warns(UserWarning, match="left-behind-0"):
            assert replace_exhausted_pools() == ["default"]
        assert connection.pool is not pool and pool.closed
        assert get_user_model().objects.count() >= 0  # a connection from the fresh pool
        connection.close()
        assert replace_exhausted_pools() == []  # a pool with connections is left alone
    finally:
        release.set()
        for thread in holders:
            thread.join(60)
    assert all(conn.closed for conn in taken)


@pytest.mark.postgres
def test_a_teardown_flush_a_writer_deadlocked_is_done_again(test_database_url, transactional_db):
    """A worker still writing when its test ends can make TRUNCATE a deadlock's victim."""
    from django.core.management import call_command

    get_user_model().objects.create_user(username="left-behind")
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    first, last = tables[0], tables[-1]  # TRUNCATE locks them in this order
    failed: list[BaseException] = []

    def flush() -> None:
        try:
            call_command("flush", database="default", interactive=False, verbosity=0)
        except BaseException as exc:
            failed.append(exc)
        finally:
            connection.close()

    with psycopg.connect(test_database_url) as writer:
        writer.execute("SET deadlock_timeout = '60s'")  # so the flush is the victim
        writer.execute(f'LOCK TABLE "{last}" IN ROW EXCLUSIVE MODE')  # a write in flight
        flushed = threading.Thread(target=flush)
        with psycopg.connect(test_database_url, autocommit=True) as admin:
            flushed.start()
            wait_for(
                lambda: admin.execute(
                    "SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                    "WHERE NOT l.granted AND c.relname = %s",
                    (last,),
                ).fetchone(),
                what="the flush to wait for the writer",
            )
            # The writer now wants a table the flush holds: the flush is ended as a
            # deadlock's victim, and the writer goes on.
            writer.execute(f'LOCK TABLE "{first}" IN ROW EXCLUSIVE MODE')
            writer.rollback()
        flushed.join(60)
    assert not flushed.is_alive() and failed == []
    assert not get_user_model().objects.filter(username="left-behind").exists()


def test_each_worker_takes_the_redis_db_below_the_previous_ones():
    assert redis_url_for_worker("redis://127.0.0.1:6379/15", 0) == "redis://127.0.0.1:6379/15"
    assert redis_url_for_worker("redis://127.0.0.1:6379/15", 1) == "redis://127.0.0.1:6379/14"
    assert redis_url_for_worker("redis://:pw@host:6380/3", 3) == "redis://:pw@host:6380/0"
    with pytest.raises(pytest.UsageError, match="fewer workers"):
        redis_url_for_worker("redis://127.0.0.1:6379/1", 2)


@pytest.mark.skipif(not WORKER, reason="runs under pytest-xdist (make test)")
def test_this_worker_has_its_own_redis_db_var_dir_and_ports():
    assert settings.VAR_DIR.name == f"pytest-{WORKER}"
    assert os.environ["HITL_VAR_DIR"] == str(settings.VAR_DIR)  # its servers' too
    if settings.REDIS_URL:
        given = os.environ["PYTEST_SUITE_REDIS_URL"]
        assert redis_url_for_worker(given, worker_index()) == settings.REDIS_URL
        assert os.environ["REDIS_URL"] == settings.REDIS_URL
    low = 20000 + worker_index() * WORKER_PORTS
    ports = [free_port() for _ in range(20)]
    assert len(set(ports)) == 20  # none given twice
    assert all(low <= port < low + WORKER_PORTS for port in ports)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports[0]))  # and free
