"""LangGraph's long-term store, as LangGraph Server hands it to graphs: PostgresStore on
PostgreSQL (on the checkpointer's pool), its SQLite store embedded.

`store_for` gives the sync store (the /langgraph/store endpoints); `astore_for` the async
one the run engine binds to graphs (one per process and event loop).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from typing import Any
from urllib.parse import urlparse

from agents.checkpoint import _sqlite_path, aget_checkpointer, get_checkpointer
from agents.pg_pool import asetup_locked, setup_locked
from agents.sqlite_saver import SQLITE_PRAGMAS

_lock = threading.Lock()
_cache: dict[tuple[str, bool], tuple[int, Any]] = {}
_acache: dict[Any, dict[tuple[str, bool], Any]] = {}
_alocks: dict[Any, Any] = {}
_SETUP_LOCK_ID = 0x4C47_5354  # "LGST": serializes the store's migrations across processes


def _sqlite_conn(url: str) -> sqlite3.Connection:
    conn = sqlite3.connect(_sqlite_path(url), check_same_thread=False, isolation_level=None)
    for pragma in SQLITE_PRAGMAS:
        conn.execute(pragma)
    return conn


def _make(url: str, pool_size: int, prepare: bool) -> Any:
    scheme = urlparse(url).scheme
    if scheme.startswith("postgres"):
        from langgraph.store.postgres import PostgresStore

        pool = get_checkpointer(url, pool_size, prepare=prepare).conn
        setup_locked(pool, lambda conn: PostgresStore(conn).setup(), _SETUP_LOCK_ID)
        return PostgresStore(pool)
    if scheme == "sqlite":
        from langgraph.store.sqlite import SqliteStore

        store = SqliteStore(_sqlite_conn(url))
        try:
            store.setup()
        except sqlite3.IntegrityError:  # another process ran the same migration first
            store.setup()
        return store
    raise ValueError(f"Unsupported store URL {url!r} (postgres://… or sqlite:///path).")


def store_for(url: str, pool_size: int = 4, *, prepare: bool = True) -> Any:
    """This process's sync store for `url`, made on first use (keyed by pid);
    `prepare` as for its checkpointer's pool."""
    pid = os.getpid()
    with _lock:
        cached = _cache.get((url, prepare))
        if cached is None or cached[0] != pid:
            cached = (pid, _make(url, pool_size, prepare))
            _cache[(url, prepare)] = cached
        return cached[1]


async def _amake(url: str, pool_size: int, prepare: bool) -> Any:
    scheme = urlparse(url).scheme
    if scheme.startswith("postgres"):
        from langgraph.store.postgres.aio import AsyncPostgresStore

        pool = (await aget_checkpointer(url, pool_size, prepare=prepare)).conn
        await asetup_locked(pool, lambda conn: AsyncPostgresStore(conn).setup(), _SETUP_LOCK_ID)
        return AsyncPostgresStore(pool)
    if scheme == "sqlite":
        import aiosqlite
        from langgraph.store.sqlite.aio import AsyncSqliteStore

        # Autocommit, as the store opens its own transactions (BEGIN).
        conn = await aiosqlite.connect(_sqlite_path(url), isolation_level=None)
        for pragma in SQLITE_PRAGMAS:
            await conn.execute(pragma)
        store = AsyncSqliteStore(conn)
        try:
            await store.setup()
        except sqlite3.IntegrityError:  # another process ran the same migration first
            await store.setup()
        return store
    raise ValueError(f"Unsupported store URL {url!r} (postgres://… or sqlite:///path).")


async def astore_for(url: str, pool_size: int = 4, *, prepare: bool = True) -> Any:
    """The async store for `url`, made once per event loop (the run engine's own)."""
    import asyncio

    loop = asyncio.get_running_loop()
    cache = _acache.setdefault(loop, {})
    # Runs starting together ask at once: one makes it (and runs its setup), the rest wait.
    lock = _alocks.setdefault(loop, asyncio.Lock())
    async with lock:
        if (url, prepare) not in cache:
            cache[(url, prepare)] = await _amake(url, pool_size, prepare)
    return cache[(url, prepare)]


async def aclose_stores() -> None:
    """Close the running loop's SQLite store connections (Postgres ones share the
    checkpointer's pool, closed with it)."""
    import asyncio

    _alocks.pop(asyncio.get_running_loop(), None)
    for store in _acache.pop(asyncio.get_running_loop(), {}).values():
        if type(store.conn).__module__.startswith("aiosqlite"):
            await store.conn.close()
