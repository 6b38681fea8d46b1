"""Django admin end to end: pages stay cheap, actions go through the services."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from hitl.core import decisions, runs
from hitl.core.models import AuditEvent, HumanInterrupt, Run, Thread

Kind = AuditEvent.Kind
pytestmark = pytest.mark.usefixtures("ops_graphs")


@pytest.fixture
def admin_client_for(admin_user) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


def start(manual_runs, user, graph="ops_gated", **input) -> Thread:
    run = runs.run_start(graph=graph, input=input, user=user)
    manual_runs(run)
    return Thread.objects.get(pk=run.thread_id)


def changelist(model: str) -> str:
    return reverse(f"admin:hitl_{model}_changelist")


def act(client, model: str, action: str, pks, **extra):
    data = {"action": action, "_selected_action": [str(pk) for pk in pks], **extra}
    return client.post(changelist(model), data, follow=True)


def test_changelists_do_not_grow_queries_with_rows(
    admin_client_for, manual_runs, requester, django_assert_max_num_queries
):
    for _ in range(3):
        start(manual_runs, requester)
    for model in ("thread", "run", "humaninterrupt", "auditevent", "artifact", "webhookdelivery"):
        with django_assert_max_num_queries(12):
            response = admin_client_for.get(changelist(model))
        assert response.status_code == 200, model
    for _ in range(5):
        start(manual_runs, requester)
    for model in ("thread", "run", "humaninterrupt", "auditevent"):
        with django_assert_max_num_queries(12):
            assert admin_client_for.get(changelist(model)).status_code == 200


def test_filters_and_uuid_search(admin_client_for, manual_runs, requester):
    thread = start(manual_runs, requester)
    other = start(manual_runs, requester)
    page = admin_client_for.get(changelist("thread"), {"q": str(thread.pk)})
    assert list(page.context["cl"].result_list) == [thread]
    page = admin_client_for.get(changelist("humaninterrupt"), {"q": str(other.pk)})
    assert [r.thread_id for r in page.context["cl"].result_list] == [other.pk]
    page = admin_client_for.get(
        changelist("thread"), {"status": "interrupted", "created_at_age": "1h"}
    )
    assert {t.pk for t in page.context["cl"].result_list} == {thread.pk, other.pk}
    page = admin_client_for.get(changelist("thread"), {"created_at_age": "older"})
    assert list(page.context["cl"].result_list) == []
    page = admin_client_for.get(changelist("run"), {"graph": "approval"})
    assert list(page.context["cl"].result_list) == []
    page = admin_client_for.get(changelist("run"), {"graph": "ops_gated", "status": "interrupted"})
    assert len(page.context["cl"].result_list) == 2


def test_thread_page_shows_inlines_and_the_audit_trail(admin_client_for, manual_runs, requester):
    thread = start(manual_runs, requester)
    page = admin_client_for.get(reverse("admin:hitl_thread_change", args=[thread.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert "Audit trail" in html and "Interrupt Created" in html and "Run Started" in html
    assert "publish" in html  # the interrupt inline


def test_cancel_action_cancels_through_the_service(admin_client_for, manual_runs, requester):
    thread = start(manual_runs, requester)
    page = act(admin_client_for, "thread", "cancel_threads", [thread.pk])
    assert "1 thread cancelled." in page.content.decode()
    thread.refresh_from_db()
    assert thread.status == "idle"
    assert HumanInterrupt.objects.get(thread=thread).status == "cancelled"
    event = AuditEvent.objects.get(thread=thread, kind=Kind.THREAD_CANCELLED)
    assert event.actor.username == "ada"


def test_retry_continues_a_failed_run_from_its_checkpoint(
    admin_client_for, manual_runs, requester, tmp_path
):
    thread = start(manual_runs, requester, graph="ops_flaky", dir=str(tmp_path))
    run = Run.objects.get(thread=thread)
    assert (run.status, thread.status) == ("error", "error")
    (tmp_path / "fixed").touch()

    page = act(admin_client_for, "run", "retry_runs", [run.pk])
    assert "1 run queued again." in page.content.decode()
    run.refresh_from_db()
    assert (run.status, run.error) == ("queued", "")
    assert manual_runs(run) == "success"
    run.refresh_from_db()
    assert run.result["steps"] == ["first", "second"]
    # Attempts go on counting (this was the run's second), with a fresh budget.
    assert (run.attempts, run.budget_used) == (2, 1)
    # The first node's checkpoint was kept: only the failed node ran again.
    assert len((tmp_path / "first.log").read_text().splitlines()) == 1
    assert len((tmp_path / "second.log").read_text().splitlines()) == 2
    retried = AuditEvent.objects.get(run=run, kind=Kind.RUN_RETRIED)
    assert "downstream service is down" in retried.data["previous_error"]
    assert retried.data["previous_attempts"] == 1
    assert Thread.objects.get(pk=thread.pk).status == "done"


def test_retry_refuses_runs_that_did_not_fail(admin_client_for, manual_runs, requester):
    thread = start(manual_runs, requester)
    run = Run.objects.get(thread=thread)
    page = act(admin_client_for, "run", "retry_runs", [run.pk])
    assert "Only failed runs can be retried; this run is interrupted." in page.content.decode()
    run.refresh_from_db()
    assert run.status == "interrupted"
    assert not AuditEvent.objects.filter(kind=Kind.RUN_RETRIED).exists()


def test_reassign_asks_for_a_group_then_moves_pending_interrupts(
    admin_client_for, manual_runs, requester, finance_group, finance_reviewer
):
    rows = [HumanInterrupt.objects.get(thread=start(manual_runs, requester)) for _ in range(2)]
    form = act(admin_client_for, "humaninterrupt", "reassign_interrupts", [r.pk for r in rows])
    assert form.status_code == 200
    assert b"Reassign" in form.content and b"finance" in form.content
    assert all(r.reviewer_group.name == "reviewers" for r in HumanInterrupt.objects.all())

    page = act(
        admin_client_for,
        "humaninterrupt",
        "reassign_interrupts",
        [r.pk for r in rows],
        apply="Reassign",
        group=finance_group.pk,
        reason="month-end",
    )
    assert "2 interrupts reassigned." in page.content.decode()
    assert {r.reviewer_group_id for r in HumanInterrupt.objects.all()} == {finance_group.pk}
    events = AuditEvent.objects.filter(kind=Kind.INTERRUPT_ASSIGNED)
    assert (
        sorted((e.data["from"], e.data["to"], e.data["reason"]) for e in events)
        == [("reviewers", "finance", "month-end")] * 2
    )
    # The new group can answer now.
    decisions.interrupt_resolve(
        interrupt_id=rows[0].pk, user=finance_reviewer, response_type="accept"
    )


def test_expire_action_applies_the_policy_and_resumes(admin_client_for, manual_runs, requester):
    thread = start(manual_runs, requester)
    row = HumanInterrupt.objects.get(thread=thread)
    page = act(admin_client_for, "humaninterrupt", "expire_interrupts", [row.pk])
    assert "1 interrupt expired." in page.content.decode()
    row.refresh_from_db()
    assert (row.status, row.response_type) == ("expired", "ignore")
    resume = Run.objects.get(thread=thread, kind="resume")
    assert manual_runs(resume) == "success"
    event = AuditEvent.objects.get(interrupt=row, kind=Kind.INTERRUPT_EXPIRED)
    assert event.actor.username == "ada"

    page = act(admin_client_for, "humaninterrupt", "expire_interrupts", [row.pk])
    assert "This interrupt is expired." in page.content.decode()


def test_the_audit_trail_is_read_only_in_admin(admin_client_for, manual_runs, requester):
    start(manual_runs, requester)
    event = AuditEvent.objects.first()
    assert admin_client_for.get(reverse("admin:hitl_auditevent_add")).status_code == 403
    assert (
        admin_client_for.post(reverse("admin:hitl_auditevent_delete", args=[event.pk])).status_code
        == 403
    )
    page = admin_client_for.get(reverse("admin:hitl_auditevent_change", args=[event.pk]))
    assert page.status_code == 200
    assert b'name="kind"' not in page.content  # shown, not editable
    response = admin_client_for.post(
        reverse("admin:hitl_auditevent_change", args=[event.pk]), {"kind": "run.failed"}
    )
    assert response.status_code == 403
    event.refresh_from_db()
    assert event.kind != "run.failed"
    # No bulk actions at all (no "delete selected").
    assert admin_client_for.get(changelist("auditevent")).context["action_form"] is None


def test_interrupt_routing_cannot_be_edited_around_the_audit(
    admin_client_for, manual_runs, requester, finance_group
):
    row = HumanInterrupt.objects.get(thread=start(manual_runs, requester))
    page = admin_client_for.get(reverse("admin:hitl_humaninterrupt_change", args=[row.pk]))
    assert b'name="reviewer_group"' not in page.content
    assert (
        admin_client_for.post(
            reverse("admin:hitl_humaninterrupt_delete", args=[row.pk])
        ).status_code
        == 403
    )


def test_policy_form_requires_an_escalation_target(admin_client_for, reviewers_group):
    response = admin_client_for.post(
        reverse("admin:hitl_reviewergrouppolicy_add"),
        {"group": reviewers_group.pk, "expire_after_seconds": 60, "expiry_policy": "escalate"},
    )
    assert response.status_code == 200
    assert b"Escalation needs a group to escalate to." in response.content


def test_only_staff_reach_admin_actions(client, reviewer, manual_runs, requester):
    thread = start(manual_runs, requester)
    client.force_login(reviewer)
    response = client.post(
        changelist("thread"), {"action": "cancel_threads", "_selected_action": [str(thread.pk)]}
    )
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    assert Thread.objects.get(pk=thread.pk).status == "interrupted"


@pytest.mark.django_db(transaction=True)
def test_deleting_threads_in_admin_drops_their_event_logs(admin_client_for, requester):
    """Admin deletes only threads without runs (runs cannot be deleted there), whose log
    still holds events such as file uploads."""
    from hitl.core.live import eventlog

    thread = Thread.objects.create(graph="approval", requester=requester)
    entry = eventlog.append(thread.pk, {"type": "CUSTOM", "name": "file.uploaded"})
    assert eventlog.read_from(thread.pk, entry)

    act(admin_client_for, "thread", "delete_selected", [thread.pk], post="yes")

    assert not Thread.objects.filter(pk=thread.pk).exists()
    assert eventlog.read_from(thread.pk, "0-0") == []
