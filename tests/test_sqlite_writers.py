"""The embedded database's writers queue in the process (hitl/sqlite/), not in SQLite's
busy handler, and always give the queue back.

Each test opens its own SQLite file through a private connection handler (the suite's
database is Postgres), with the embedded server's options.
"""

from __future__ import annotations

import sys
import threading

import pytest
from django.db import OperationalError
from django.db.utils import ConnectionHandler

from hitl.core.db import snapshot
from hitl.sqlite.base import writer_lock
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db

WAIT = 60.0


@pytest.fixture
def embedded(tmp_path, settings):
    """A connection handler on a fresh file, set up as settings.EMBEDDED's database."""
    options = dict(settings.EMBEDDED_SQLITE_OPTIONS)
    handler = ConnectionHandler(
        {
            "default": {
                "ENGINE": "hitl.sqlite",
                "NAME": str(tmp_path / "t.sqlite3"),
                "OPTIONS": options,
            }
        }
    )
    with handler["default"].cursor() as cursor:
        cursor.execute("CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    yield handler
    handler.close_all()


def _in_thread(handler, work):
    """Run `work(connection)` on a thread of its own (its own connection); the thread's
    error, if any, is kept in the returned dict."""
    out: dict = {}

    def run():
        try:
            out["value"] = work(handler["default"])
        except BaseException as exc:
            out["error"] = exc
        finally:
            handler["default"].close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    out["thread"] = thread
    return out


def _waits_on_the_queue(thread: threading.Thread) -> bool:
    frame = sys._current_frames().get(thread.ident)
    while frame is not None:
        if frame.f_code.co_name == "_take":
            return True
        frame = frame.f_back
    return False


def _insert(connection, name: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO item (name) VALUES (%s)", [name])


def _names(connection) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM item ORDER BY id")
        return [row[0] for row in cursor.fetchall()]


def test_a_transaction_holds_the_queue_and_an_autocommit_write_waits_in_it(embedded):
    connection = embedded["default"]
    lock = writer_lock(connection.settings_dict["NAME"])
    with _atomic(connection):
        _insert(connection, "first")
        assert lock.locked()
        other = _in_thread(embedded, lambda c: _insert(c, "second"))
        # The other thread's write waits on this process's lock, not in SQLite's sleeps.
        wait_for(lambda: _waits_on_the_queue(other["thread"]), WAIT, 0.01, "the write to queue")
        assert _names(connection) == ["first"]
    other["thread"].join(WAIT)
    assert "error" not in other
    assert not lock.locked()
    assert _names(connection) == ["first", "second"]


def test_transactions_of_two_threads_run_one_after_the_other(embedded):
    connection = embedded["default"]
    with _atomic(connection):
        _insert(connection, "first")

        def second(c):
            with _atomic(c):
                _insert(c, "second")

        other = _in_thread(embedded, second)
        wait_for(
            lambda: _waits_on_the_queue(other["thread"]), WAIT, 0.01, "the transaction to queue"
        )
    other["thread"].join(WAIT)
    assert "error" not in other
    assert _names(connection) == ["first", "second"]


def test_a_failed_transaction_gives_the_queue_back_and_writes_nothing(embedded):
    connection = embedded["default"]
    lock = writer_lock(connection.settings_dict["NAME"])
    with pytest.raises(ValueError), _atomic(connection):
        _insert(connection, "lost")
        raise ValueError("the work failed")
    assert not lock.locked()
    assert _names(connection) == []
    _insert(connection, "kept")  # and the next writer is not kept waiting
    assert _names(connection) == ["kept"]


def test_a_connection_closed_inside_a_transaction_gives_the_queue_back(embedded):
    connection = embedded["default"]
    lock = writer_lock(connection.settings_dict["NAME"])
    connection.set_autocommit(False, force_begin_transaction_with_broken_autocommit=True)
    _insert(connection, "lost")
    assert lock.locked()
    connection.close()
    assert not lock.locked()
    assert _names(embedded["default"]) == []


def test_a_queue_that_stays_taken_ends_in_the_usual_locked_error(embedded, tmp_path):
    name = embedded["default"].settings_dict["NAME"]
    impatient = ConnectionHandler(
        {
            "default": {
                "ENGINE": "hitl.sqlite",
                "NAME": name,
                "OPTIONS": {"timeout": 0.05, "transaction_mode": "IMMEDIATE"},
            }
        }
    )
    lock = writer_lock(name)
    with _atomic(embedded["default"]):
        failed = _in_thread(impatient, lambda c: _insert(c, "late"))
        failed["thread"].join(WAIT)
    assert isinstance(failed.get("error"), OperationalError)
    assert "database is locked" in str(failed["error"])
    assert not lock.locked()
    assert _names(embedded["default"]) == []


def test_reads_and_in_memory_databases_do_not_queue(embedded):
    connection = embedded["default"]
    with _atomic(connection):
        _insert(connection, "first")
        # WAL: a read on another connection goes on while this transaction writes.
        reader = _in_thread(embedded, _names)
        reader["thread"].join(WAIT)
        assert reader.get("value") == []
    memory = ConnectionHandler(
        {
            "default": {
                "ENGINE": "hitl.sqlite",
                "NAME": ":memory:",
                "OPTIONS": {"transaction_mode": "IMMEDIATE"},
            }
        }
    )["default"]
    memory.set_autocommit(False, force_begin_transaction_with_broken_autocommit=True)
    assert not writer_lock(":memory:").locked()
    memory.rollback()
    memory.set_autocommit(True)
    memory.close()


class _atomic:
    """transaction.atomic on a connection of a private handler (atomic takes an alias of
    the global one): the same BEGIN IMMEDIATE, COMMIT and ROLLBACK calls."""

    def __init__(self, connection):
        self.connection = connection

    def __enter__(self):
        self.connection.set_autocommit(False, force_begin_transaction_with_broken_autocommit=True)

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                self.connection.commit()
            else:
                self.connection.rollback()
        finally:
            self.connection.set_autocommit(True)


def test_a_read_in_one_moment_sees_one_snapshot_and_holds_no_writer_up(embedded):
    """A page's read (hitl.core.db.snapshot) is one snapshot, but not a BEGIN IMMEDIATE:
    a run's transaction on another thread neither waits for it nor shows in it."""
    connection = embedded["default"]
    lock = writer_lock(connection.settings_dict["NAME"])
    _insert(connection, "first")

    def write(c):
        with _atomic(c):
            _insert(c, "second")

    with snapshot.one_moment(connection):
        assert _names(connection) == ["first"]
        assert not lock.locked()
        other = _in_thread(embedded, write)
        other["thread"].join(WAIT)
        assert not other["thread"].is_alive() and "error" not in other, other
        assert _names(connection) == ["first"]  # still the snapshot of its first read
    assert _names(connection) == ["first", "second"]
    assert connection.transaction_mode == "IMMEDIATE"  # the next transaction writes
