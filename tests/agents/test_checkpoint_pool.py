"""The checkpointer pool's check: a round trip only for connections idle a while."""

from __future__ import annotations

import time

import psycopg
import pytest

from agents.checkpoint import CHECK_AFTER_IDLE_SECONDS, check_if_idle, mark_returned
from hitl.core.db import retry
from hitl.postgresql.base import check_pooled
from tests.conftest import wait_for

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
    assert (pool._check, pool._reset) == (check_pooled, mark_returned)  # hitl/postgresql
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


@pytest.mark.django_db(transaction=True)
def test_after_a_fault_djangos_pool_checks_connections_used_a_moment_ago(
    test_database_url, monkeypatch
):
    """Once this process met a dropped session, its neighbours in the pool (dropped with
    it, as a failover or pg_terminate_backend does) are replaced before use too, though
    they were handed back a moment ago."""
    from django.db import connection

    monkeypatch.setattr(retry, "_suspect_until", 0.0)
    connection.close()
    pool = connection.pool
    held = [pool.getconn() for _ in range(max(len(pool._pool), 2))]  # every idle one
    pids = [conn.info.backend_pid for conn in held]
    for conn in held:
        pool.putconn(conn)  # back in the pool just now: not checked by default
    with psycopg.connect(test_database_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (pids,))
        wait_for(
            lambda: (
                not admin.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)
                ).fetchone()
            ),
            what="the sessions to end",
        )
    assert not retry.connections_suspect()
    retry.suspect_connections()  # what a request that met the fault does
    assert retry.connections_suspect()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] not in pids
    connection.close()
