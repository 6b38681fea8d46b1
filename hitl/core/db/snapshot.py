"""Reads that see one moment: a page's sections rendered from a single snapshot.

A thread page's sections take a dozen queries. On Postgres (READ COMMITTED) each one
sees what was committed when it started, so a run failing between two of them gave a
page its failure banner beside the status "running". Inside `one_moment()` every query
sees the same snapshot: REPEATABLE READ, READ ONLY on Postgres (per transaction, so it
holds behind PgBouncer's transaction pooling too); SQLite's read transaction is already
one snapshot.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction


@contextmanager
def one_moment() -> Iterator[None]:
    """Run the block's reads against one snapshot of the database."""
    if connection.in_atomic_block:
        # Already in a transaction (a test's, or a caller's): its isolation stands.
        yield
        return
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        yield
