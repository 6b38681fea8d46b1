"""Refuse TRUNCATE of the audit trail on PostgreSQL and DELETE on SQLite too.

Both databases now refuse the same statements: any UPDATE that rewrites an audit row,
any DELETE, and (PostgreSQL) TRUNCATE, a statement-level trigger since TRUNCATE fires no
row triggers. The one exception is maintenance (`hitl.core.db.audit_guard`): `manage.py
flush`, which Django's test runner also uses between transactional tests, may empty the
table. On PostgreSQL that is the transaction-local setting `hitl.audit_maintenance`; on
SQLite the function `hitl_audit_maintenance()` that each Django connection registers
(any other client lacks it, so its DELETE fails too).
"""

from django.db import migrations

FKS = ("thread_id", "run_id", "interrupt_id", "actor_id")
MAINTENANCE = "coalesce(current_setting('hitl.audit_maintenance', true), '') = 'on'"

ROW_FUNCTION = """
CREATE OR REPLACE FUNCTION hitl_audit_append_only() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF {maintenance} THEN
            RETURN OLD;
        END IF;
        RAISE EXCEPTION 'audit events are append-only: DELETE refused'
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF NEW.id IS DISTINCT FROM OLD.id
        OR NEW.created_at IS DISTINCT FROM OLD.created_at
        OR NEW.kind IS DISTINCT FROM OLD.kind
        OR NEW.data IS DISTINCT FROM OLD.data
        {fk_changes}
    THEN
        RAISE EXCEPTION 'audit events are append-only: UPDATE refused'
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql
""".format(
    maintenance=MAINTENANCE,
    fk_changes="\n        ".join(
        f"OR (NEW.{fk} IS DISTINCT FROM OLD.{fk} AND NEW.{fk} IS NOT NULL)" for fk in FKS
    ),
)

POSTGRES_UP = f"""
{ROW_FUNCTION}
---
CREATE OR REPLACE FUNCTION hitl_audit_no_truncate() RETURNS trigger AS $$
BEGIN
    IF {MAINTENANCE} THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'audit events are append-only: TRUNCATE refused'
        USING ERRCODE = 'restrict_violation';
END;
$$ LANGUAGE plpgsql
---
DROP TRIGGER IF EXISTS hitl_audit_no_truncate ON hitl_auditevent
---
CREATE TRIGGER hitl_audit_no_truncate
    BEFORE TRUNCATE ON hitl_auditevent
    FOR EACH STATEMENT EXECUTE FUNCTION hitl_audit_no_truncate()
"""

# Back to 0004: DELETE always refused by the row trigger, TRUNCATE open.
POSTGRES_DOWN = """
DROP TRIGGER IF EXISTS hitl_audit_no_truncate ON hitl_auditevent
---
DROP FUNCTION IF EXISTS hitl_audit_no_truncate()
---
{row_function}
""".format(row_function=ROW_FUNCTION.replace(f"IF {MAINTENANCE} THEN", "IF false THEN"))

SQLITE_UP = """
CREATE TRIGGER IF NOT EXISTS hitl_audit_no_delete
BEFORE DELETE ON hitl_auditevent
FOR EACH ROW WHEN NOT hitl_audit_maintenance()
BEGIN
    SELECT RAISE(ABORT, 'audit events are append-only: DELETE refused');
END;
"""

SQLITE_DOWN = "DROP TRIGGER IF EXISTS hitl_audit_no_delete;"


def _run(sql_by_vendor):
    def apply(apps, schema_editor):
        # One statement per execute ("---" separates them): drivers refuse batches.
        for statement in sql_by_vendor.get(schema_editor.connection.vendor, "").split("---"):
            if statement.strip():
                schema_editor.execute(statement, params=None)

    return apply


class Migration(migrations.Migration):
    dependencies = [
        ("hitl", "0005_thread_run_any_permission"),
    ]

    operations = [
        migrations.RunPython(
            _run({"postgresql": POSTGRES_UP, "sqlite": SQLITE_UP}),
            _run({"postgresql": POSTGRES_DOWN, "sqlite": SQLITE_DOWN}),
        ),
    ]
