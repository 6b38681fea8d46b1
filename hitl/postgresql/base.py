"""Django's PostgreSQL backend whose connection pool checks only connections that sat idle.

Django builds its psycopg pool with `check=ConnectionPool.check_connection` when
CONN_HEALTH_CHECKS is on (and with none when it is off) and accepts no check of its
own in OPTIONS["pool"]. That check is a round trip on every checkout: three per review
cycle, for connections handed back milliseconds before. This backend gives the pool
the checkpointer's check instead (agents/pg_pool.py): a connection idle for a
second or more is checked, and one the server dropped is replaced before use. For a
few seconds after this process met a dropped session (hitl.core.db.retry), every
connection is checked: the server usually dropped its neighbours in the pool too, and
a failed check replaces all the dead ones at once. The pool is counted with this
process's others (agents/pools.py, /metrics).
"""

from __future__ import annotations

from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool

from agents import pools
from agents.pg_pool import check_if_idle, close_at_exit, mark_returned
from hitl.compat import psycopg_pool
from hitl.core.db.retry import (
    connections_suspect,
    discard_dead_connections,
    suspect_connections,
)


def check_pooled(conn) -> None:
    try:
        if connections_suspect():
            ConnectionPool.check_connection(conn)
        else:
            check_if_idle(conn)
    except Exception:
        # The server dropped its neighbours in the pool too: check them all now. Left to
        # this check one by one, psycopg_pool pauses longer before each next one (1 s,
        # 2 s, 4 s...), and a checkout after a failover could wait past its timeout.
        suspect_connections()
        discard_dead_connections()
        raise


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self):
        pool = super().pool
        # Set before the pool opens (Django opens it on the first connection).
        if pool is not None and psycopg_pool.set_check(
            pool, check_pooled, mark_returned, pools.opened
        ):
            pools.track(pool, "django")
            close_at_exit(pool)
        return pool
