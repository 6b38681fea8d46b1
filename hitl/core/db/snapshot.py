"""Reads that see one moment: a page's sections rendered from a single snapshot.

A thread page's sections take a dozen queries. On Postgres (READ COMMITTED) each one
sees what was committed when it started, so a run failing between two of them gave a
page its failure banner beside the status "running". Inside `one_moment()` every query
sees the same snapshot:

- Postgres: REPEATABLE READ, READ ONLY (per transaction, so it holds behind PgBouncer's
  transaction pooling too).
- SQLite: a deferred transaction, whose snapshot is taken at its first read. Not the
  embedded database's `BEGIN IMMEDIATE` (hitl/sqlite/): that takes the write lock, and
  every page read would queue behind the runs' writes and hold them up in turn.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hitl.core.db import prepared


@contextmanager
def one_moment(db: Any = None) -> Iterator[None]:
    """Run the block's reads against one snapshot of the database (`db`: a connection,
    the default one unless given)."""
    db = db if db is not None else prepared.db()
    if db.in_atomic_block or not db.get_autocommit():
        # Already in a transaction (a test's, or a caller's): its isolation stands.
        yield
        return
    db.ensure_connection()  # a new SQLite connection would set transaction_mode again
    deferred = db.vendor == "sqlite"
    if deferred:
        mode, db.transaction_mode = db.transaction_mode, None  # a plain, deferred BEGIN
    try:
        db.set_autocommit(False, force_begin_transaction_with_broken_autocommit=True)
    finally:
        if deferred:
            db.transaction_mode = mode
    try:
        if db.vendor == "postgresql":
            with db.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        yield
    except BaseException:
        db.rollback()
        raise
    else:
        db.commit()
    finally:
        db.set_autocommit(True)
