"""The checkpointer pool's check: a round trip only for connections idle a while."""

from __future__ import annotations

import time

import psycopg
import pytest

from agents.checkpoint import CHECK_AFTER_IDLE_SECONDS, check_if_idle, mark_returned

pytestmark = pytest.mark.postgres


def test_a_dropped_connection_is_found_only_once_it_was_idle(test_database_url):
    with psycopg.connect(test_database_url, autocommit=True) as admin:
        conn = psycopg.connect(test_database_url, autocommit=True)
        pid = conn.info.backend_pid
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        time.sleep(0.2)
        mark_returned(conn)
        check_if_idle(conn)  # used a moment ago: no round trip, so nothing noticed
        conn._hitl_returned = time.monotonic() - CHECK_AFTER_IDLE_SECONDS
        with pytest.raises(psycopg.OperationalError):
            check_if_idle(conn)  # idle long enough: checked, and the dead session shows
        conn.close()


@pytest.mark.django_db(transaction=True)
def test_djangos_pool_replaces_a_connection_dropped_while_idle(test_database_url):
    """Django's pool checks with the same hook: a session the server dropped while it
    sat in the pool is replaced before a request uses it."""
    from django.db import connection

    pool = connection.pool
    assert (pool._check, pool._reset) == (check_if_idle, mark_returned)  # hitl/postgresql
    connection.close()
    conn = pool.getconn()
    pid = conn.info.backend_pid
    pool.putconn(conn)
    with psycopg.connect(test_database_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    time.sleep(0.2)
    for idle in pool._pool:
        idle._hitl_returned = time.monotonic() - CHECK_AFTER_IDLE_SECONDS
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] != pid
