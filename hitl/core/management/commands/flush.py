"""Django's flush, allowed to empty the append-only audit trail (see core/audit_guard.py).

Emptying every table is an operator's deliberate act, and Django's test runner flushes
between transactional tests with this very command (TRUNCATE on PostgreSQL, DELETE on
SQLite), which the audit triggers would refuse otherwise. Rows emptied this way send
no signals, so every process's cached groups, policies and rules are dropped after it.
"""

from django.core.management.commands import flush

from hitl.core.access import confcache
from hitl.core.db.audit_guard import audit_maintenance


class Command(flush.Command):
    def handle(self, **options):
        try:
            with audit_maintenance(options["database"]):
                return super().handle(**options)
        finally:
            confcache.changed()
