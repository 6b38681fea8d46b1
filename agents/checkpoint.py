"""Checkpointer factories: Postgres (pooled, one pool per process) or SQLite.

`get_checkpointer` gives the sync saver (request handlers, scripts); `aget_checkpointer`
the async one the run engine streams graphs with (one per process and event loop).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlparse

_lock = threading.Lock()
_cache: dict[str, tuple[int, Any]] = {}
_SETUP_LOCK_ID = 0x4C47_4350  # "LGCP": serializes checkpointer migrations across processes


def setup_locked(conn: Any, setup: Callable[[], Any], lock_id: int = _SETUP_LOCK_ID) -> None:
    """Run a saver's or store's migrations, one process at a time across the database.

    Worker processes starting together on a fresh database would race on CREATE TABLE IF
    NOT EXISTS (a unique violation in pg_type). Polled, not blocking: a waiting statement
    would deadlock the holder's CREATE INDEX CONCURRENTLY, which waits for every open
    transaction.
    """
    lock = "SELECT pg_try_advisory_lock(%s) AS locked"
    while not conn.execute(lock, (lock_id,)).fetchone()["locked"]:
        time.sleep(0.05)
    try:
        setup()
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (lock_id,))


async def asetup_locked(
    conn: Any, setup: Callable[[], Awaitable[Any]], lock_id: int = _SETUP_LOCK_ID
) -> None:
    """setup_locked on an async connection."""
    import asyncio

    lock = "SELECT pg_try_advisory_lock(%s) AS locked"
    while not (await (await conn.execute(lock, (lock_id,))).fetchone())["locked"]:
        await asyncio.sleep(0.05)
    try:
        await setup()
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s)", (lock_id,))


# A pooled connection handed back less than this long ago is used without a check.
CHECK_AFTER_IDLE_SECONDS = 1.0
# How long the async saver retries a write that met a dropped session (see _aretry).
WRITE_RETRY_SECONDS = 5.0
# After a dropped session, every connection is checked before use for this long: the
# server dropped its neighbours too (a failover, pg_terminate_backend).
SUSPECT_SECONDS = 10.0
_suspect_until = 0.0


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


async def amark_returned(conn: Any) -> None:
    mark_returned(conn)


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


async def _aretry(write: Callable[[], Awaitable[Any]]) -> Any:
    """Run a checkpoint write, again on another connection if its session was dropped.

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


def _pg_conninfo(url: str) -> str:
    return url.replace("postgresql+psycopg", "postgresql", 1)


def _sqlite_path(url: str) -> str:
    return url[len("sqlite:///") :] if url.startswith("sqlite:///") else ":memory:"


def _make(url: str, pool_size: int) -> Any:
    scheme = urlparse(url).scheme
    if scheme.startswith("postgres"):
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        pool = ConnectionPool(
            conninfo=_pg_conninfo(url),
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
            setup_locked(conn, PostgresSaver(conn).setup)
        return PostgresSaver(pool)
    if scheme == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        path = _sqlite_path(url)
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


def _ordered_async_postgres_saver() -> type:
    import asyncio
    import contextlib

    import psycopg
    from langgraph.checkpoint.base import WRITES_IDX_MAP
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    class OrderedAsyncPostgresSaver(AsyncPostgresSaver):
        """AsyncPostgresSaver whose task writes reach the database before the checkpoint
        that follows them, as with the sync saver, and whose writes are retried on
        another connection when their session was dropped (_aretry).

        The stock `aput_writes` serializes on a thread before taking the saver's lock,
        so the step's checkpoint, submitted after it, gets there first: a worker killed
        in between then loses writes the sync saver would have kept (and the node runs
        again). Serialized inline, the writes take the lock first.

        The stock saver's lock is one per process, around every statement: it is made
        for one shared connection. On a pool every statement has a connection of its
        own, so the lock here is one per thread, around its writes: a thread's writes
        keep their order while the runs of other threads write at the same time.
        """

        def __init__(self, conn, *args, **kwargs):
            super().__init__(conn, *args, **kwargs)
            if self.pipe is None and not isinstance(conn, psycopg.AsyncConnection):
                self.lock = contextlib.nullcontext()
            self._writers: dict[str, tuple[asyncio.Lock, int]] = {}

        @contextlib.asynccontextmanager
        async def _in_order(self, config):
            thread_id = str(config["configurable"]["thread_id"])
            lock, users = self._writers.get(thread_id, (None, 0))
            lock = lock or asyncio.Lock()
            self._writers[thread_id] = (lock, users + 1)
            try:
                async with lock:
                    yield
            finally:
                lock, users = self._writers[thread_id]
                if users > 1:
                    self._writers[thread_id] = (lock, users - 1)
                else:
                    del self._writers[thread_id]

        async def aput(self, config, checkpoint, metadata, new_versions):
            put = super().aput
            async with self._in_order(config):
                return await _aretry(lambda: put(config, checkpoint, metadata, new_versions))

        async def aput_writes(self, config, writes, task_id, task_path=""):
            async with self._in_order(config):
                await _aretry(lambda: self._aput_writes(config, writes, task_id, task_path))

        async def _aput_writes(self, config, writes, task_id, task_path):
            query = (
                self.UPSERT_CHECKPOINT_WRITES_SQL
                if all(w[0] in WRITES_IDX_MAP for w in writes)
                else self.INSERT_CHECKPOINT_WRITES_SQL
            )
            configurable = config["configurable"]
            params = self._dump_writes(
                configurable["thread_id"],
                configurable["checkpoint_ns"],
                configurable["checkpoint_id"],
                task_id,
                task_path,
                writes,
            )
            async with self._cursor(pipeline=True) as cur:
                await cur.executemany(query, params)

    return OrderedAsyncPostgresSaver


async def _amake(url: str, pool_size: int) -> Any:
    scheme = urlparse(url).scheme
    if scheme.startswith("postgres"):
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool

        pool = AsyncConnectionPool(
            conninfo=_pg_conninfo(url),
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
            check=acheck_if_idle,
            reset=amark_returned,
            open=False,
        )
        await pool.open()
        async with pool.connection() as conn:
            await asetup_locked(conn, AsyncPostgresSaver(conn).setup)
        return _ordered_async_postgres_saver()(pool)
    if scheme == "sqlite":
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        conn = await aiosqlite.connect(_sqlite_path(url))
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute("PRAGMA busy_timeout=20000")
        saver = AsyncSqliteSaver(conn)
        await saver.setup()
        return saver
    raise ValueError(f"Unsupported checkpoint URL {url!r} (postgres://… or sqlite:///path).")


async def aget_checkpointer(url: str, pool_size: int = 4) -> Any:
    """The async saver for `url`, made once per event loop (the run engine's own).

    Its pool or connection belongs to the loop that made it: call from that loop only.
    """
    import asyncio

    loop = asyncio.get_running_loop()
    cache = _acache.setdefault(loop, {})
    if url not in cache:
        cache[url] = await _amake(url, pool_size)
    return cache[url]


async def aclose_checkpointers() -> None:
    """Close the async savers of the running loop (its pools, its SQLite connections)."""
    import asyncio

    for saver in _acache.pop(asyncio.get_running_loop(), {}).values():
        conn = saver.conn
        if hasattr(conn, "close"):
            await conn.close()


_acache: dict[Any, dict[str, Any]] = {}
