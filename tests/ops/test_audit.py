"""The audit trail: every transition recorded once, and nothing can change it afterwards."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection
from django.template.loader import render_to_string

from hitl.core import decisions, errors, runs
from hitl.core.audit import audit_for_thread, audit_record
from hitl.core.db.audit_guard import audit_maintenance
from hitl.core.models import AppendOnly, AuditEvent, HumanInterrupt, Run, Thread

Kind = AuditEvent.Kind
USING_POSTGRES = connection.vendor == "postgresql"


def kinds(thread) -> list[str]:
    return list(
        AuditEvent.objects.filter(thread=thread)
        .order_by("created_at", "id")
        .values_list("kind", flat=True)
    )


@pytest.fixture
def approval_thread(manual_runs, requester, reviewers_group):
    run = runs.run_start(graph="approval", input={"request": "q3"}, user=requester)
    assert manual_runs(run) == "interrupted"
    return run.thread


def test_an_edited_answer_is_recorded_next_to_the_proposal(
    approval_thread, manual_runs, reviewer, requester
):
    row = HumanInterrupt.objects.get(thread=approval_thread)
    edited = {"to": "cfo@example.com", "subject": "Q3", "copies": 3, "urgent": True}
    decisions.interrupt_resolve(
        interrupt_id=row.pk, user=reviewer, response_type="edit", args={"args": edited}
    )
    resume = Run.objects.get(thread=approval_thread, kind="resume")
    assert manual_runs(resume) == "success"

    assert kinds(approval_thread) == [
        Kind.RUN_STARTED,
        Kind.INTERRUPT_CREATED,
        Kind.RUN_FINISHED,
        Kind.INTERRUPT_ANSWERED,
        Kind.RUN_STARTED,
        Kind.RUN_FINISHED,
    ]
    answered = AuditEvent.objects.get(thread=approval_thread, kind=Kind.INTERRUPT_ANSWERED)
    assert answered.actor == reviewer
    assert answered.interrupt_id == row.pk
    assert answered.data["response_type"] == "edit"
    assert answered.data["proposed"] == {"action": "send_email", "args": row.args}
    assert answered.data["edited_args"] == edited  # numbers stay numbers
    assert answered.data["group"] == "reviewers"
    assert answered.data["wait_seconds"] >= 0
    started = AuditEvent.objects.filter(thread=approval_thread, kind=Kind.RUN_STARTED).order_by(
        "created_at", "id"
    )
    assert [e.actor for e in started] == [requester, reviewer]
    assert [e.data["run_kind"] for e in started] == ["start", "resume"]
    finished = AuditEvent.objects.filter(kind=Kind.RUN_FINISHED).order_by("created_at", "id")
    assert [e.data["status"] for e in finished] == [
        "interrupted",
        "success",
    ]


def test_cancelling_records_the_thread_its_interrupts_and_runs(approval_thread, requester):
    runs.thread_cancel(thread=approval_thread, user=requester)
    cancelled = AuditEvent.objects.filter(thread=approval_thread).exclude(
        kind__in=[Kind.RUN_STARTED, Kind.INTERRUPT_CREATED, Kind.RUN_FINISHED]
    )
    assert sorted(e.kind for e in cancelled) == [Kind.INTERRUPT_CANCELLED, Kind.THREAD_CANCELLED]
    assert {e.actor for e in cancelled} == {requester}


def test_a_failed_run_is_recorded_with_its_error(ops_graphs, manual_runs, requester, tmp_path):
    run = runs.run_start(graph="ops_flaky", input={"dir": str(tmp_path)}, user=requester)
    assert manual_runs(run) == "error"
    failed = AuditEvent.objects.get(run=run, kind=Kind.RUN_FAILED)
    assert "the downstream service is down" in failed.data["error"]
    assert failed.data["attempt"] == 1


def test_a_refused_answer_leaves_no_audit_event(approval_thread, reviewer):
    row = HumanInterrupt.objects.get(thread=approval_thread)
    with pytest.raises(errors.Invalid):
        decisions.interrupt_resolve(
            interrupt_id=row.pk, user=reviewer, response_type="edit", args={"args": {"to": 7}}
        )
    assert not AuditEvent.objects.filter(kind=Kind.INTERRUPT_ANSWERED).exists()


def test_audit_events_cannot_be_changed_or_deleted(approval_thread):
    event = AuditEvent.objects.filter(thread=approval_thread).first()
    event.data = {"forged": True}
    with pytest.raises(AppendOnly):
        event.save()
    with pytest.raises(AppendOnly):
        event.delete()
    with pytest.raises(AppendOnly):
        AuditEvent.objects.filter(thread=approval_thread).update(data={})
    with pytest.raises(AppendOnly):
        AuditEvent.objects.all().delete()
    event.refresh_from_db()
    assert "forged" not in event.data


def test_deleting_a_thread_keeps_its_history(approval_thread):
    count = AuditEvent.objects.filter(thread=approval_thread).count()
    assert count == 3
    Thread.objects.filter(pk=approval_thread.pk).delete()
    assert AuditEvent.objects.filter(thread__isnull=True, run__isnull=True).count() == count


def test_unknown_kinds_are_refused(db):
    with pytest.raises(ValueError, match="Unknown audit event kind"):
        audit_record(kind="thread.renamed")


def test_the_thread_partial_shows_proposal_and_answer_side_by_side(approval_thread, reviewer):
    row = HumanInterrupt.objects.get(thread=approval_thread)
    decisions.interrupt_resolve(
        interrupt_id=row.pk, user=reviewer, response_type="response", args="Not <b>today</b>."
    )
    entries = audit_for_thread(approval_thread)
    assert [e.kind for e in entries][-1] == Kind.INTERRUPT_ANSWERED
    assert entries[0].actor == "quinn" and entries[1].actor == "system"
    html = render_to_string("hitl/_audit.html", {"audit": entries})
    assert "Interrupt Answered" in html
    assert "cfo" not in html and "team@example.com" in html  # the proposal
    assert "Not &lt;b&gt;today&lt;/b&gt;." in html  # the answer, escaped
    assert "<b>today" not in html


# --- append-only in the database itself ---------------------------------------------


def raw(sql: str, params=()) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def refused(sql: str, params=()) -> bool:
    """True when the database itself refuses `sql` (inside a savepoint, so the test's
    transaction stays usable on PostgreSQL)."""
    from django.db import DatabaseError, transaction

    try:
        with transaction.atomic():
            raw(sql, params)
    except DatabaseError as exc:
        assert "append-only" in str(exc)
        return True
    return False


def test_raw_sql_cannot_rewrite_an_audit_row(approval_thread, requester):
    event = AuditEvent.objects.filter(thread=approval_thread).order_by("id").first()
    other = Thread.objects.create(graph="approval", requester=requester)
    table = AuditEvent._meta.db_table
    assert refused(f"UPDATE {table} SET kind = 'run.finished' WHERE id = %s", [event.pk])
    assert refused(f"UPDATE {table} SET data = '{{}}' WHERE id = %s", [event.pk])
    assert refused(f"UPDATE {table} SET created_at = created_at WHERE id = %s", [event.pk]) is False
    assert refused(f"UPDATE {table} SET thread_id = %s WHERE id = %s", [other.pk.hex, event.pk])
    before = AuditEvent.objects.get(pk=event.pk)
    assert (before.kind, before.thread_id, before.data) == (event.kind, event.thread_id, event.data)


def test_raw_sql_cannot_delete_an_audit_row(approval_thread):
    count = AuditEvent.objects.count()
    table = AuditEvent._meta.db_table
    event = AuditEvent.objects.filter(thread=approval_thread).first()
    assert refused(f"DELETE FROM {table} WHERE id = %s", [event.pk])
    assert refused(f"DELETE FROM {table}")
    assert AuditEvent.objects.count() == count


@pytest.mark.postgres
def test_raw_sql_cannot_truncate_the_audit_trail_on_postgres(approval_thread):
    count = AuditEvent.objects.count()
    # This test's own inserts leave deferred foreign-key checks that TRUNCATE refuses first.
    raw("SET CONSTRAINTS ALL IMMEDIATE")
    assert refused(f"TRUNCATE {AuditEvent._meta.db_table}")
    assert refused(f"TRUNCATE {AuditEvent._meta.db_table} CASCADE")
    assert AuditEvent.objects.count() == count


def test_only_the_maintenance_switch_lets_the_database_empty_the_trail(approval_thread):
    table = AuditEvent._meta.db_table
    statement = f"TRUNCATE {table}" if USING_POSTGRES else f"DELETE FROM {table}"
    if USING_POSTGRES:
        raw("SET CONSTRAINTS ALL IMMEDIATE")  # see the TRUNCATE test above
    with audit_maintenance():
        raw(statement)
        assert AuditEvent.objects.count() == 0
    # Switched off again once the block ends, inside the same outer transaction.
    audit_record(kind=Kind.THREAD_CANCELLED, thread=approval_thread)
    assert refused(f"DELETE FROM {table}")
    assert AuditEvent.objects.count() == 1


def test_the_switch_is_off_again_after_a_failed_maintenance_block(approval_thread):
    count = AuditEvent.objects.count()
    with pytest.raises(RuntimeError), audit_maintenance():
        raw(f"DELETE FROM {AuditEvent._meta.db_table}")
        raise RuntimeError("maintenance went wrong")
    assert AuditEvent.objects.count() == count  # rolled back
    assert refused(f"DELETE FROM {AuditEvent._meta.db_table}")


def test_manage_py_flush_still_empties_the_trail(transactional_db, requester):
    """Django's test runner flushes between transactional tests with this very command."""
    audit_record(kind=Kind.THREAD_CANCELLED, thread=Thread.objects.create(graph="approval"))
    assert AuditEvent.objects.count() == 1
    call_command("flush", interactive=False, verbosity=0)
    assert AuditEvent.objects.count() == 0
    audit_record(kind=Kind.THREAD_CANCELLED)
    assert refused(f"DELETE FROM {AuditEvent._meta.db_table}")
