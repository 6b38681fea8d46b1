"""Django's SQLite backend whose writers queue inside the process instead of polling.

The embedded server runs every request and every run in one process, and each of their
transactions starts with `BEGIN IMMEDIATE` (settings: transaction_mode), so only one
writes at a time. SQLite makes the others wait by polling: its busy handler sleeps
1, 2, 5, 10... up to 100 ms between tries. A sleeper does not notice the lock come
free, and a newcomer that asks at that moment takes it first, so with eight clients
about half the busy threads sat in those sleeps, and one request in twenty waited one
to two seconds for a lock that was free most of that time (docs/benchmarks.md, "The
embedded cycle").

Here a transaction, and a write outside one (an autocommit INSERT, UPDATE or DELETE is a
transaction of its own), first takes a lock shared by this process's connections to the
same file, which wakes its next waiter the moment it is released. SQLite's own lock and
busy timeout still keep other processes (a management command) in order. Nothing
changes for in-memory databases, which tests use.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator

from django.db import OperationalError
from django.db.backends.sqlite3 import base

_locks: dict[str, threading.Lock] = {}
_guard = threading.Lock()
WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def writer_lock(name: str) -> threading.Lock:
    """The lock this process's transactions on database file `name` take first."""
    with _guard:
        return _locks.setdefault(name, threading.Lock())


def _take(lock: threading.Lock, timeout: float) -> None:
    if not lock.acquire(timeout=timeout):
        raise OperationalError("database is locked")


@contextlib.contextmanager
def _queued(lock: threading.Lock, timeout: float) -> Iterator[None]:
    _take(lock, timeout)
    try:
        yield
    finally:
        lock.release()


def _writes_alone(cursor: sqlite3.Cursor, query: str) -> bool:
    """Whether `query` writes outside a transaction: SQLite makes it one of its own."""
    return not cursor.connection.in_transaction and query.lstrip()[:7].upper().startswith(WRITES)


class QueuedCursor(base.SQLiteCursorWrapper):
    """Django's cursor, whose writes outside a transaction queue on the file's lock."""

    queue: threading.Lock
    timeout: float

    def execute(self, query, params=None):
        if not _writes_alone(self, query):
            return super().execute(query, params)
        with _queued(self.queue, self.timeout):
            return super().execute(query, params)

    def executemany(self, query, param_list):
        if not _writes_alone(self, query):
            return super().executemany(query, param_list)
        with _queued(self.queue, self.timeout):
            return super().executemany(query, param_list)


class DatabaseWrapper(base.DatabaseWrapper):
    # The file's lock and how long to wait for it, set when the connection opens (None:
    # an in-memory database, or transactions that do not take the write lock at once).
    _queue: threading.Lock | None = None
    _queue_timeout = 5.0
    _writing: threading.Lock | None = None

    def get_new_connection(self, conn_params):
        conn = super().get_new_connection(conn_params)
        queues = not self.is_in_memory_db() and self.transaction_mode == "IMMEDIATE"
        self._queue = writer_lock(str(self.settings_dict["NAME"])) if queues else None
        self._queue_timeout = float(conn_params.get("timeout", 5.0))  # sqlite3's default
        return conn

    def create_cursor(self, name=None):
        if self._queue is None:
            return super().create_cursor(name)
        cursor = self.connection.cursor(factory=QueuedCursor)
        cursor.queue, cursor.timeout = self._queue, self._queue_timeout
        return cursor

    def _start_transaction_under_autocommit(self) -> None:
        # Only a BEGIN IMMEDIATE takes the write lock; a deferred one (a read, see
        # hitl.core.db.snapshot) queues behind no writer.
        if self._queue is not None and self.transaction_mode == "IMMEDIATE":
            _take(self._queue, self._queue_timeout)
            self._writing = self._queue
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._stop_writing()
            raise

    def _stop_writing(self) -> None:
        lock, self._writing = self._writing, None
        if lock is not None:
            lock.release()

    def _ending(self, end: Callable[[], None]) -> None:
        """End the transaction (or the connection) and give the queue back, whatever happens."""
        try:
            end()
        finally:
            self._stop_writing()

    def _commit(self) -> None:
        self._ending(super()._commit)

    def _rollback(self) -> None:
        self._ending(super()._rollback)

    def _close(self) -> None:
        self._ending(super()._close)
