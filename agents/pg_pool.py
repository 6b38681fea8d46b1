"""The checkpointer's Postgres pools and their sessions: migrations run one process at a
time, a connection checked before use unless it was in use a moment ago, a write retried
on another session when its own was dropped, and the pool closed at exit.

Django's pool (hitl/postgresql) uses the same checks; the factories are in
agents/checkpoint.py and the async saver in agents/postgres_saver.py.
"""

from __future__ import annotations

import atexit
import contextlib
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

_SETUP_LOCK_ID = 0x4C47_4350  # "LGCP": serializes checkpointer migrations across processes


def _lock_statement(lock_id: int) -> bytes:
    return b"SELECT pg_try_advisory_xact_lock(%d) AS locked" % int(lock_id)


def setup_locked(pool: Any, setup: Callable[[Any], Any], lock_id: int = _SETUP_LOCK_ID) -> None:
    """Run a saver's or store's migrations (`setup(conn)`), one process at a time across
    the database.

    Worker processes starting together on a fresh database would race on CREATE TABLE IF
    NOT EXISTS (a unique violation in pg_type). The lock is a transaction's, held on one
    of the pool's connections while the setup runs on another: a session-level lock and
    its unlock would each be a transaction of their own, which a pooler in transaction
    mode may run on different server sessions (the lock then guards nothing and stays
    held). The setup runs outside that transaction, as its CREATE INDEX CONCURRENTLY
    must, and does not wait for it: an idle transaction in READ COMMITTED holds no
    snapshot once its statement is over. So the statement goes as a simple query, with
    no parameters and never prepared: a parameterized or prepared one leaves its portal,
    and the portal's snapshot, open until the next statement. Polled, not blocking, for
    the same reason: a waiting statement would hold one.
    """
    lock = _lock_statement(lock_id)
    with pool.connection() as holder:
        while True:
            with holder.transaction():
                if holder.execute(lock, prepare=False).fetchone()["locked"]:
                    with pool.connection() as conn:
                        setup(conn)
                    return
            time.sleep(0.05)


async def asetup_locked(
    pool: Any, setup: Callable[[Any], Awaitable[Any]], lock_id: int = _SETUP_LOCK_ID
) -> None:
    """setup_locked on an async pool."""
    import asyncio

    lock = _lock_statement(lock_id)
    async with pool.connection() as holder:
        while True:
            async with holder.transaction():
                if (await (await holder.execute(lock, prepare=False)).fetchone())["locked"]:
                    async with pool.connection() as conn:
                        await setup(conn)
                    return
            await asyncio.sleep(0.05)


# A pooled connection handed back less than this long ago is used without a check.
CHECK_AFTER_IDLE_SECONDS = 1.0
# How long the async saver retries a write that met a dropped session (see aretry).
WRITE_RETRY_SECONDS = 5.0
# After a dropped session, every connection is checked before use for this long: the
# server dropped its neighbours too (a failover, pg_terminate_backend).
SUSPECT_SECONDS = 10.0
_suspect_until = 0.0


def mark_returned(conn: Any) -> None:
    """A pool's reset hook: remember when the connection came back.

    Used by the sync checkpointer's pool and by Django's (hitl/settings.py); the async
    saver calls it itself as it hands a connection back."""
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


async def acheck_if_idle(conn: Any) -> None:
    """check_if_idle for the async pool; every connection is checked for a while after
    a write met a dropped session."""
    from psycopg_pool import AsyncConnectionPool

    returned = getattr(conn, "_hitl_returned", None)
    if (
        returned is None
        or time.monotonic() - returned >= CHECK_AFTER_IDLE_SECONDS
        or time.monotonic() < _suspect_until
    ):
        await AsyncConnectionPool.check_connection(conn)


async def aretry(write: Callable[[], Awaitable[Any]]) -> Any:
    """Run a checkpoint write (or read), again on another connection if its session was
    dropped.

    The saver's writes are upserts, safe to repeat. A step's writes that fail are
    otherwise lost with its run's attempt, and the redelivered run runs the finished
    node again (its side effect twice); where the database is back at once, the
    write goes through instead. Past WRITE_RETRY_SECONDS the error stands (a
    transient fault: the run goes back to the queue).
    """
    import asyncio

    import psycopg

    global _suspect_until
    deadline = time.monotonic() + WRITE_RETRY_SECONDS
    pause = 0.05
    while True:
        try:
            return await write()
        except psycopg.OperationalError:
            if time.monotonic() + pause > deadline:
                raise
            _suspect_until = time.monotonic() + SUSPECT_SECONDS
            await asyncio.sleep(pause)
            pause = min(pause * 2, 1.0)


def close_at_exit(pool: Any) -> None:
    """Close a sync psycopg pool when the process exits, while its threads still run.

    A stopped worker leaves its heap to the OS instead of collecting it (hitl/celery.py):
    a pool not closed here would never say goodbye to the server, whose sessions would
    end as dropped connections, and its `__del__` (if finalization reaches it) would
    wait for worker threads that can no longer run.
    """
    atexit.register(_close_quietly, weakref.ref(pool))


def _close_quietly(ref: weakref.ref) -> None:
    pool = ref()
    if pool is not None and not pool.closed:
        with contextlib.suppress(Exception):
            pool.close(timeout=1.0)


def pg_conninfo(url: str) -> str:
    return url.replace("postgresql+psycopg", "postgresql", 1)


def connect_kwargs(prepare: bool) -> dict[str, Any]:
    from psycopg.rows import dict_row

    # Every statement prepared on first use (as langgraph-checkpoint-postgres advises):
    # the server parses and plans the saver's few statements once per session, not once
    # per checkpoint (~1.7 ms of Postgres CPU per review cycle). Not behind a pooler in
    # transaction mode (prepare=False): the next transaction may find another session.
    return {
        "autocommit": True,
        "prepare_threshold": 0 if prepare else None,
        "row_factory": dict_row,
    }


def pool_max(pool_size: int) -> int:
    return max(pool_size, 2)  # setup_locked holds one connection while the setup uses another
