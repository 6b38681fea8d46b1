"""Django's PostgreSQL backend whose connection pool checks only connections that sat idle.

Django builds its psycopg pool with `check=ConnectionPool.check_connection` when
CONN_HEALTH_CHECKS is on (and with none when it is off) and accepts no check of its
own in OPTIONS["pool"]. That check is a round trip on every checkout: three per review
cycle, for connections handed back milliseconds before. This backend gives the pool
the checkpointer's check instead (agents/checkpoint.py): a connection idle for a
second or more is checked, and one the server dropped is replaced before use.
"""

from __future__ import annotations

from django.db.backends.postgresql import base

from agents.checkpoint import check_if_idle, mark_returned
from hitl.compat import psycopg_pool


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self):
        pool = super().pool
        if pool is not None:
            # Set before the pool opens (Django opens it on the first connection).
            psycopg_pool.set_check(pool, check_if_idle, mark_returned)
        return pool
