"""Checkpointer factory: Postgres (pooled, one pool per process) or SQLite."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from typing import Any
from urllib.parse import urlparse

_lock = threading.Lock()
_cache: dict[str, tuple[int, Any]] = {}
_SETUP_LOCK_ID = 0x4C47_4350  # "LGCP": serializes checkpointer migrations across processes
# A pooled connection handed back less than this long ago is used without a check.
CHECK_AFTER_IDLE_SECONDS = 1.0


def mark_returned(conn: Any) -> None:
    """A pool's reset hook: remember when the connection came back.

    Used by this checkpointer's pool and by Django's (hitl/settings.py)."""
    conn._hitl_returned = time.monotonic()


def check_if_idle(conn: Any) -> None:
    """The pool's check: a round trip, unless the connection was in use a moment ago.

    A session the server dropped (restart, failover, pg_terminate_backend) is found
    and replaced before use. Under load every checkout would pay the round trip for a
    connection that was busy milliseconds before; those skip it, and the rare one the
    server dropped in that second fails its statement like any dropped connection
    mid-use (a transient fault: the run goes back to the queue).
    """
    from psycopg_pool import ConnectionPool

    returned = getattr(conn, "_hitl_returned", None)
    if returned is None or time.monotonic() - returned >= CHECK_AFTER_IDLE_SECONDS:
        ConnectionPool.check_connection(conn)


def _make(url: str, pool_size: int) -> Any:
    scheme = urlparse(url).scheme
    if scheme.startswith("postgres"):
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        pool = ConnectionPool(
            conninfo=url.replace("postgresql+psycopg", "postgresql", 1),
            min_size=1,
            max_size=pool_size,
            # Every statement prepared on first use (as langgraph-checkpoint-postgres
            # advises): the server parses and plans the saver's few statements once per
            # session, not once per checkpoint (~1.7 ms of Postgres CPU per review cycle).
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
            # Checked before use: a connection the server dropped is replaced, not used.
            check=check_if_idle,
            reset=mark_returned,
            open=True,
        )
        with pool.connection() as conn:
            # Worker processes starting together on a fresh database would race on
            # CREATE TABLE IF NOT EXISTS (a unique violation in pg_type): one at a time.
            # Polled, not blocking: a waiting statement would deadlock the holder's
            # CREATE INDEX CONCURRENTLY, which waits for every open transaction.
            lock = "SELECT pg_try_advisory_lock(%s) AS locked"
            while not conn.execute(lock, (_SETUP_LOCK_ID,)).fetchone()["locked"]:
                time.sleep(0.05)
            try:
                PostgresSaver(conn).setup()
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK_ID,))
        return PostgresSaver(pool)
    if scheme == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        path = url[len("sqlite:///") :] if url.startswith("sqlite:///") else ":memory:"
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA busy_timeout=20000")
        saver = SqliteSaver(conn)
        saver.setup()
        return saver
    raise ValueError(f"Unsupported checkpoint URL {url!r} (postgres://… or sqlite:///path).")


def get_checkpointer(url: str, pool_size: int = 4) -> Any:
    """Return this process's checkpointer for `url`, creating it on first use.

    Keyed by pid so a forked worker child never reuses its parent's connections.
    """
    pid = os.getpid()
    with _lock:
        cached = _cache.get(url)
        if cached is None or cached[0] != pid:
            cached = (pid, _make(url, pool_size))
            _cache[url] = cached
        return cached[1]
