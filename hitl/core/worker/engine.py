"""The run engine: one event loop per process holds every run this process executes.

A thread that executes a run (a Celery task thread, or the embedded server's run
thread) claims it, hands the graph's stream to the engine's loop and waits for it, then
records the end. Graphs run with `astream` on the async checkpointer: async nodes and
tools are awaited on the loop, sync nodes run in its executor (as LangGraph Server
runs them). Database rows are only touched on the calling thread; the loop never
waits on the ORM.

The leases of every run in flight are kept by one thread per process (`Leases`): one
statement per tick for all of them, renewing them when due and noticing a cancel or a
takeover within a tick, which then cancels that run's stream. A stop announced by the
web (hitl.core.live.stops) wakes the tick at once.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import os
import threading
import time
from collections.abc import Coroutine
from typing import Any

import uvloop
from django.conf import settings
from django.db import connection
from psycopg.conninfo import conninfo_to_dict

from agents.checkpoint import aclose_checkpointers, aget_checkpointer
from agents.pg_pool import pg_conninfo
from agents.store import aclose_stores, astore_for
from hitl.core.errors import is_transient
from hitl.core.live.stops import Listener
from hitl.core.worker import lease

log = logging.getLogger(__name__)


class Engine:
    """This process's event loop thread and async checkpointer (made on first use)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid: int | None = None
        self._atexit = False
        self._saver: tuple[Any, Any, tuple] | None = None  # (loop, saver, (url, prepare))
        self._beside = False  # the saver's tables are in the database the runs are in
        self._store: tuple[Any, Any, tuple] | None = None  # (loop, store, (url, prepare))

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is not None and self._pid == os.getpid() and not self._loop.is_closed():
                return self._loop
            # uvloop: the loop's own work per step (tasks, callbacks, sockets) in C.
            loop = uvloop.new_event_loop()
            # Sync nodes and tools run here, one thread each while they block (a model
            # call): as many as the runs this process holds, and a few to spare.
            loop.set_default_executor(
                concurrent.futures.ThreadPoolExecutor(
                    max_workers=settings.HITL_RUNS_PER_WORKER + 4, thread_name_prefix="hitl-node"
                )
            )
            ready = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            threading.Thread(target=run, name="hitl-engine", daemon=True).start()
            ready.wait()
            if not self._atexit:
                atexit.register(self.shutdown)
                self._atexit = True
            self._loop, self._pid = loop, os.getpid()
            return loop

    def call(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run `coro` on the engine's loop and wait for its result on this thread."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop())
        try:
            return future.result()
        except BaseException:
            # This thread was interrupted (a soft time limit, shutdown): stop the coroutine.
            future.cancel()
            raise

    def saver(self) -> Any:
        """The async checkpointer runs stream with (bound to the engine's loop)."""
        loop = self.loop()
        key = (settings.HITL_CHECKPOINT_URL, settings.HITL_DB_PREPARE)
        cached = self._saver
        if cached is not None and cached[0] is loop and cached[2] == key:
            return cached[1]
        saver = self.call(
            aget_checkpointer(key[0], settings.HITL_CHECKPOINT_POOL_SIZE, prepare=key[1])
        )
        self._saver = (loop, saver, key)
        self._beside = connection.vendor == "postgresql" and _same_database(
            key[0], connection.settings_dict
        )
        return saver

    def checkpoints_beside_runs(self) -> bool:
        """Whether the saver's tables are set up, in the database the runs are in (the
        same server, port, database and user): a run's lease can then tell at no cost
        whether its thread has a checkpoint yet."""
        return self._saver is not None and self._beside

    def store(self) -> Any:
        """The async store graphs get (bound to the engine's loop), as LangGraph Server
        gives it: `get_store()` and the nodes' `store` argument."""
        loop = self.loop()
        key = (settings.HITL_STORE_URL or settings.HITL_CHECKPOINT_URL, settings.HITL_DB_PREPARE)
        cached = self._store
        if cached is not None and cached[0] is loop and cached[2] == key:
            return cached[1]
        store = self.call(astore_for(key[0], settings.HITL_CHECKPOINT_POOL_SIZE, prepare=key[1]))
        self._store = (loop, store, key)
        return store

    def shutdown(self, timeout: float = 5.0) -> None:
        """Close the async checkpointer's connections and stop the loop."""
        with self._lock:
            loop, self._loop, self._saver, self._store = self._loop, None, None, None
            own = loop is not None and self._pid == os.getpid()
        if not own or loop is None or loop.is_closed() or not loop.is_running():
            return
        try:
            asyncio.run_coroutine_threadsafe(aclose_stores(), loop).result(timeout)
            asyncio.run_coroutine_threadsafe(aclose_checkpointers(), loop).result(timeout)
        except Exception as exc:
            log.warning("closing the run engine's checkpointer failed: %s", exc)
        loop.call_soon_threadsafe(loop.stop)


engine = Engine()


class Hold:
    """One run in flight: its lease, and the stream to cancel when the lease is lost."""

    def __init__(self, run_id: str, worker: str):
        self.run_id, self.worker = run_id, worker
        self.lost = False
        # False once the stream ended: the run's end is being recorded (which checks
        # the lease itself); a lease that ends with it is no cancel.
        self.streaming = True
        self._task: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def attach(self) -> None:
        """Called by the run's coroutine: a lost lease now cancels it."""
        self._task, self._loop = asyncio.current_task(), asyncio.get_running_loop()
        if self.lost:
            self._task.cancel()

    def lose(self) -> None:
        self.lost = True
        if self._task is not None and self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._task.cancel)


class Leases:
    """Keeps the leases of every run this process holds, with one statement per tick."""

    # How often the rows are read (and a cancel noticed); renewed every lease/4.
    CHECK_INTERVAL = 0.5

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reserved: set[str] = set()
        self._held: dict[str, Hold] = {}
        self._thread: threading.Thread | None = None
        self._pid: int | None = None
        # Off in tests whose rows only their own open transaction can see.
        self.watching = True

    def reserve(self, run_id: str) -> bool:
        """Mark a run as taken by this process; False if it already is (a duplicate
        delivery: with one worker id per process, its lease would be taken too)."""
        with self._lock:
            if run_id in self._reserved:
                return False
            self._reserved.add(run_id)
            return True

    def unreserve(self, run_id: str) -> None:
        with self._lock:
            self._reserved.discard(run_id)

    def hold(self, run_id: str, worker: str) -> Hold:
        hold = Hold(run_id, worker)
        with self._lock:
            self._held[run_id] = hold
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._tick, name="hitl-leases", daemon=True)
                self._pid = os.getpid()
                self._thread.start()
        return hold

    def drop(self, hold: Hold) -> None:
        with self._lock:
            if self._held.get(hold.run_id) is hold:
                del self._held[hold.run_id]

    def held(self) -> int:
        with self._lock:
            return len(self._held)

    def _tick(self) -> None:
        last_renewal = time.monotonic()
        stops = Listener()  # a run stop announced wakes the tick at once
        while True:
            stops.wait(self.CHECK_INTERVAL)
            with self._lock:
                holds = list(self._held.values())
            if not holds or not self.watching:
                continue
            renew = time.monotonic() - last_renewal >= max(
                settings.HITL_RUN_LEASE_SECONDS / 4, self.CHECK_INTERVAL
            )
            owners: dict[str, list[str]] = {}
            for hold in holds:
                owners.setdefault(hold.worker, []).append(hold.run_id)
            try:
                current = lease.leases_keep(owners=owners, renew=renew)
            except Exception as exc:
                if not is_transient(exc):
                    log.exception("keeping run leases failed")
                # The database is away: keep going; each run's own next write tells.
                connection.close()
                continue
            finally:
                if connection.connection is not None and (
                    connection.errors_occurred or connection.vendor == "postgresql"
                ):
                    connection.close()  # back to the pool between ticks
            if renew:
                last_renewal = time.monotonic()
            for hold in holds:
                if hold.run_id not in current and not hold.lost and hold.streaming:
                    with self._lock:
                        still_held = self._held.get(hold.run_id) is hold
                    if still_held:
                        log.info("run %s: cancelled or taken over; stopping it", hold.run_id)
                        hold.lose()


leases = Leases()


def _same_database(url: str, django_db: dict[str, Any]) -> bool:
    """Whether the saver's `url` names the database (host, port, name and user) Django's
    connection uses; no when either cannot be read."""
    if not url.startswith(("postgres://", "postgresql://", "postgresql+psycopg://")):
        return False
    try:
        saver = conninfo_to_dict(pg_conninfo(url))
    except Exception:
        return False

    def key(host: Any, port: Any, name: Any, user: Any) -> tuple[str, ...]:
        return (str(host or ""), str(port or 5432), str(name or ""), str(user or ""))

    return key(saver.get("host"), saver.get("port"), saver.get("dbname"), saver.get("user")) == key(
        django_db.get("HOST"), django_db.get("PORT"), django_db.get("NAME"), django_db.get("USER")
    )
