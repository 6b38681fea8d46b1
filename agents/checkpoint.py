"""Checkpointer factories: Postgres (pooled, one pool per process) or SQLite.

`get_checkpointer` gives the sync saver (request handlers, scripts); `aget_checkpointer`
the async one the run engine streams graphs with (one per process and event loop).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from typing import Any
from urllib.parse import urlparse

from agents import pools
from agents.pg_pool import (
    acheck_if_idle,
    asetup_locked,
    check_if_idle,
    close_at_exit,
    connect_kwargs,
    mark_returned,
    pg_conninfo,
    pool_max,
    setup_locked,
)
from agents.postgres_saver import ordered_async_postgres_saver
from agents.sqlite_saver import SQLITE_PRAGMAS, loop_sqlite_saver

_lock = threading.Lock()
_cache: dict[tuple[str, bool], tuple[int, Any]] = {}


def _sqlite_path(url: str) -> str:
    return url[len("sqlite:///") :] if url.startswith("sqlite:///") else ":memory:"


def _make(url: str, pool_size: int, prepare: bool = True) -> Any:
    scheme = urlparse(url).scheme
    if scheme.startswith("postgres"):
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg_pool import ConnectionPool

        pool = ConnectionPool(
            conninfo=pg_conninfo(url),
            min_size=1,
            max_size=pool_max(pool_size),
            kwargs=connect_kwargs(prepare),
            # Checked before use: a connection the server dropped is replaced, not used.
            check=check_if_idle,
            reset=mark_returned,
            configure=pools.opened,
            open=False,
        )
        pools.track(pool, "checkpointer", url)
        pool.open()
        close_at_exit(pool)
        try:
            setup_locked(pool, lambda conn: PostgresSaver(conn).setup())
        except BaseException:
            pool.close()  # the next caller makes another: this one must not linger
            raise
        return PostgresSaver(pool)
    if scheme == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        path = _sqlite_path(url)
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        for pragma in SQLITE_PRAGMAS:
            conn.execute(pragma)
        saver = SqliteSaver(conn)
        saver.setup()
        return saver
    raise ValueError(f"Unsupported checkpoint URL {url!r} (postgres://… or sqlite:///path).")


def get_checkpointer(url: str, pool_size: int = 4, *, prepare: bool = True) -> Any:
    """Return this process's checkpointer for `url`, creating it on first use.

    Keyed by pid so a forked worker child never reuses its parent's connections.
    `prepare=False` behind a pooler in transaction mode (no prepared statements).
    """
    pid = os.getpid()
    with _lock:
        cached = _cache.get((url, prepare))
        if cached is None or cached[0] != pid:
            cached = (pid, _make(url, pool_size, prepare))
            _cache[(url, prepare)] = cached
        return cached[1]


def sync_pools() -> list[Any]:
    """This process's open sync checkpointer pools (Postgres ones)."""
    pid = os.getpid()
    with _lock:
        savers = [saver for owner, saver in _cache.values() if owner == pid]
    return [s.conn for s in savers if hasattr(s.conn, "check") and not s.conn.closed]


async def _amake(url: str, pool_size: int, prepare: bool = True) -> Any:
    scheme = urlparse(url).scheme
    if scheme.startswith("postgres"):
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg_pool import AsyncConnectionPool

        pool = AsyncConnectionPool(
            conninfo=pg_conninfo(url),
            min_size=1,
            max_size=pool_max(pool_size),
            kwargs=connect_kwargs(prepare),
            check=acheck_if_idle,  # the saver marks returned connections (its _cursor)
            configure=pools.aopened,
            open=False,
        )
        pools.track(pool, "checkpointer", url)
        await pool.open()
        try:
            await asetup_locked(pool, lambda conn: AsyncPostgresSaver(conn).setup())
        except BaseException:
            await pool.close()  # the next caller makes another: this one must not linger
            raise
        return ordered_async_postgres_saver()(pool)
    if scheme == "sqlite":
        # Not autocommit: a task's writes commit together (sqlite3 begins before them).
        conn = sqlite3.connect(_sqlite_path(url), check_same_thread=False)
        for pragma in SQLITE_PRAGMAS:
            conn.execute(pragma)
        saver = loop_sqlite_saver()(conn)
        saver.setup()
        return saver
    raise ValueError(f"Unsupported checkpoint URL {url!r} (postgres://… or sqlite:///path).")


async def aget_checkpointer(url: str, pool_size: int = 4, *, prepare: bool = True) -> Any:
    """The async saver for `url`, made once per event loop (the run engine's own).

    Its pool or connection belongs to the loop that made it: call from that loop only.
    """
    import asyncio

    loop = asyncio.get_running_loop()
    cache = _acache.setdefault(loop, {})
    # Runs starting together on a fresh worker ask at once, each awaiting in _amake:
    # without the lock each made a pool of its own (32 runs, 64 sessions). One makes
    # it, the rest wait and share it.
    async with _alocks.setdefault(loop, asyncio.Lock()):
        if (url, prepare) not in cache:
            cache[(url, prepare)] = await _amake(url, pool_size, prepare)
    return cache[(url, prepare)]


async def aclose_checkpointers() -> None:
    """Close the async savers of the running loop (its pools, its SQLite connections)."""
    import asyncio

    _alocks.pop(asyncio.get_running_loop(), None)
    for saver in _acache.pop(asyncio.get_running_loop(), {}).values():
        if hasattr(saver, "aclose"):  # the SQLite saver: its connection and its thread
            await saver.aclose()
            continue
        conn = saver.conn
        if hasattr(conn, "close"):
            await conn.close()


_acache: dict[Any, dict[tuple[str, bool], Any]] = {}
_alocks: dict[Any, Any] = {}  # loop -> asyncio.Lock around making its savers
