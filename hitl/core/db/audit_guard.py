"""The database's side of the append-only audit trail: the one switch maintenance uses.

The triggers (migrations 0004 and 0006) refuse DELETE and TRUNCATE of audit rows unless
the connection is in maintenance: on PostgreSQL the transaction-local setting
`hitl.audit_maintenance = 'on'`, on SQLite the function `hitl_audit_maintenance()` that
this module registers on every Django connection. Only `audit_maintenance()` turns it
on, and only `manage.py flush` (and so the test suite's flush between transactional
tests) uses it. Whoever can run arbitrary SQL as the tables' owner can also drop a
trigger: the guard stops the app, raw SQL slips and stray truncates, not the owner.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DEFAULT_DB_ALIAS, connections, transaction

SETTING = "hitl.audit_maintenance"
SQLITE_FUNCTION = "hitl_audit_maintenance"


def install_sqlite_function(sender, connection, **kwargs) -> None:
    """connection_created receiver: give SQLite the function its audit triggers ask."""
    if connection.vendor != "sqlite":
        return
    connection.connection.create_function(
        SQLITE_FUNCTION, 0, lambda: int(getattr(connection, "hitl_audit_maintenance", False))
    )


def _postgres_switch(connection, value: str) -> None:
    with connection.cursor() as cursor:
        # is_local=true: it ends with the transaction at the latest.
        cursor.execute("SELECT set_config(%s, %s, true)", [SETTING, value])


@contextmanager
def audit_maintenance(using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """Let the database delete and truncate audit rows inside this block (one transaction)."""
    connection = connections[using]
    with transaction.atomic(using=using):
        if connection.vendor == "postgresql":
            _postgres_switch(connection, "on")
        connection.hitl_audit_maintenance = True
        try:
            yield
        finally:
            connection.hitl_audit_maintenance = False
        # After an error the rollback undoes the setting; after success a caller's outer
        # transaction goes on, so switch it off here.
        if connection.vendor == "postgresql":
            _postgres_switch(connection, "")
