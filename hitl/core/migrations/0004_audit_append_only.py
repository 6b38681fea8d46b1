"""Make the audit trail append-only in the database, not only in the app.

PostgreSQL: a trigger refuses DELETE and any UPDATE of an audit row, except the one
Django issues when a thread, run, interrupt or user is deleted (its foreign key set to
NULL: `on_delete=SET_NULL`), so history outlives what it describes. SQLite gets the same
UPDATE guard; DELETE stays open there because Django's test flush empties tables with
DELETE (the app refuses it through AuditEventQuerySet). TRUNCATE, which needs the table's
owner, is left to the owner (the test suite flushes with it).
"""

from django.db import migrations

FKS = ("thread_id", "run_id", "interrupt_id", "actor_id")

POSTGRES_UP = """
CREATE OR REPLACE FUNCTION hitl_audit_append_only() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
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
---
DROP TRIGGER IF EXISTS hitl_audit_append_only ON hitl_auditevent
---
CREATE TRIGGER hitl_audit_append_only
    BEFORE UPDATE OR DELETE ON hitl_auditevent
    FOR EACH ROW EXECUTE FUNCTION hitl_audit_append_only()
""".format(
    fk_changes="\n        ".join(
        f"OR (NEW.{fk} IS DISTINCT FROM OLD.{fk} AND NEW.{fk} IS NOT NULL)" for fk in FKS
    )
)

POSTGRES_DOWN = """
DROP TRIGGER IF EXISTS hitl_audit_append_only ON hitl_auditevent
---
DROP FUNCTION IF EXISTS hitl_audit_append_only()
"""

SQLITE_UP = """
CREATE TRIGGER IF NOT EXISTS hitl_audit_append_only
BEFORE UPDATE ON hitl_auditevent
FOR EACH ROW WHEN NEW.id IS NOT OLD.id
    OR NEW.created_at IS NOT OLD.created_at
    OR NEW.kind IS NOT OLD.kind
    OR NEW.data IS NOT OLD.data
    {fk_changes}
BEGIN
    SELECT RAISE(ABORT, 'audit events are append-only: UPDATE refused');
END;
""".format(
    fk_changes="\n    ".join(
        f"OR (NEW.{fk} IS NOT OLD.{fk} AND NEW.{fk} IS NOT NULL)" for fk in FKS
    )
)

SQLITE_DOWN = "DROP TRIGGER IF EXISTS hitl_audit_append_only;"


def _run(sql_by_vendor):
    def apply(apps, schema_editor):
        # One statement per execute ("---" separates them): drivers refuse batches.
        for statement in sql_by_vendor.get(schema_editor.connection.vendor, "").split("---"):
            if statement.strip():
                schema_editor.execute(statement, params=None)

    return apply


class Migration(migrations.Migration):
    dependencies = [
        ("hitl", "0003_decision_grace_period"),
    ]

    operations = [
        migrations.RunPython(
            _run({"postgresql": POSTGRES_UP, "sqlite": SQLITE_UP}),
            _run({"postgresql": POSTGRES_DOWN, "sqlite": SQLITE_DOWN}),
        ),
    ]
