"""Expiry and escalation: deadlines from the graph or the group, and the sweep's outcomes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.utils import timezone

from hitl.core import decisions, errors, runs
from hitl.core.live import listeners
from hitl.core.live.publisher import publisher
from hitl.core.models import AuditEvent, HumanInterrupt, ReviewerGroupPolicy, Run
from hitl.ops import services as ops_services
from hitl.ops.maintenance import expire_due_interrupts

Kind = AuditEvent.Kind


def start(manual_runs, user, **request) -> HumanInterrupt:
    run = runs.run_start(graph="ops_gated", input={"request": request}, user=user)
    assert manual_runs(run) == "interrupted"
    return HumanInterrupt.objects.get(thread=run.thread)


def later(seconds: float = 3600):
    return timezone.now() + timedelta(seconds=seconds)


def resume_of(row) -> Run:
    return Run.objects.get(thread_id=row.thread_id, kind="resume")


def finish(manual_runs, run) -> Run:
    assert manual_runs(run) == "success"
    run.refresh_from_db()
    return run


pytestmark = pytest.mark.usefixtures("ops_graphs")


def test_the_graph_sets_the_deadline_and_policy(manual_runs, requester, finance_group):
    before = timezone.now()
    row = start(
        manual_runs,
        requester,
        expires_in=90,
        expiry_policy="escalate",
        expiry_message="late",
        escalate_to="finance",
    )
    assert before + timedelta(seconds=89) < row.expires_at < later(91)
    assert (row.expiry_policy, row.expiry_message, row.escalate_to) == (
        "escalate",
        "late",
        finance_group,
    )


def test_the_group_policy_supplies_a_default_deadline(manual_runs, requester, reviewers_group):
    ReviewerGroupPolicy.objects.create(group=reviewers_group, expire_after_seconds=600)
    row = start(manual_runs, requester)
    assert later(590) < row.expires_at < later(610)
    assert row.expiry_policy == ""  # the group's policy applies at expiry time
    assert start(manual_runs, requester, expires_in=5).expires_at < later(6)


def test_no_deadline_without_graph_or_policy(manual_runs, requester, reviewers_group):
    assert start(manual_runs, requester).expires_at is None


def test_an_overdue_interrupt_is_auto_ignored_and_the_graph_resumes(
    manual_runs, requester, reviewers_group
):
    row = start(manual_runs, requester, expires_in=1)
    assert expire_due_interrupts(now=later(0.5)) == 0  # not due yet
    assert expire_due_interrupts(now=later(2)) == 1

    row.refresh_from_db()
    assert (row.status, row.response_type, row.responded_by) == ("expired", "ignore", None)
    resume = finish(manual_runs, resume_of(row))
    assert resume.result["decision"] == {"type": "ignore", "args": None}
    event = AuditEvent.objects.get(interrupt=row, kind=Kind.INTERRUPT_EXPIRED)
    assert event.actor is None and event.data["automatic"] is True
    assert event.data["response_type"] == "ignore"
    assert expire_due_interrupts(now=later(3)) == 0  # nothing twice


def test_auto_respond_sends_the_group_message(manual_runs, requester, reviewers_group):
    ReviewerGroupPolicy.objects.create(
        group=reviewers_group,
        expire_after_seconds=60,
        expiry_policy="respond",
        expiry_message="Nobody was around; do not publish.",
    )
    row = start(manual_runs, requester)
    assert expire_due_interrupts(now=later(61)) == 1
    resume = finish(manual_runs, resume_of(row))
    assert resume.created_by is None
    assert resume.result["decision"] == {
        "type": "response",
        "args": "Nobody was around; do not publish.",
    }


def test_a_policy_the_config_forbids_falls_back_to_an_allowed_answer(
    manual_runs, requester, reviewers_group
):
    config = {
        "allow_accept": True,
        "allow_edit": False,
        "allow_respond": True,
        "allow_ignore": False,
    }
    row = start(manual_runs, requester, expires_in=1, config=config)  # ignore is not allowed
    expire_due_interrupts(now=later(2))
    row.refresh_from_db()
    assert (row.status, row.response_type) == ("expired", "response")
    assert row.response_args == ops_services.DEFAULT_EXPIRY_MESSAGE


def test_nothing_automatic_fits_closes_it_unanswered(manual_runs, requester, reviewers_group):
    config = {
        "allow_accept": True,
        "allow_edit": True,
        "allow_respond": False,
        "allow_ignore": False,
    }
    row = start(manual_runs, requester, expires_in=1, config=config)
    expire_due_interrupts(now=later(2))
    row.refresh_from_db()
    assert (row.status, row.response_type) == ("expired", "")
    assert not Run.objects.filter(thread_id=row.thread_id, kind="resume").exists()
    event = AuditEvent.objects.get(interrupt=row, kind=Kind.INTERRUPT_EXPIRED)
    assert event.data["reason"] == "no automatic answer fits this interrupt"


def receive_all(layer, channel: str) -> list[dict]:
    publisher.flush()
    messages = []

    async def drain():
        import asyncio

        while True:
            try:
                messages.append(await asyncio.wait_for(layer.receive(channel), 0.5))
            except TimeoutError:
                return

    async_to_sync(drain)()
    return messages


def test_escalation_reassigns_with_a_notice_audits_and_pushes_live(
    manual_runs,
    requester,
    reviewers_group,
    finance_group,
    finance_reviewer,
    reviewer,
    django_capture_on_commit_callbacks,
):
    ReviewerGroupPolicy.objects.create(group=finance_group, expire_after_seconds=120)
    row = start(
        manual_runs, requester, expires_in=1, expiry_policy="escalate", escalate_to="finance"
    )
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    for group in (
        listeners.inbox_group(reviewers_group.pk),
        listeners.inbox_group(finance_group.pk),
    ):
        async_to_sync(layer.group_add)(group, channel)
    async_to_sync(layer.group_add)(listeners.thread_group(row.thread_id), channel)

    now = later(2)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        assert expire_due_interrupts(now=now) == 1
    assert len(callbacks) == 3  # both inboxes and the thread's notice
    row.refresh_from_db()
    assert row.status == "pending"
    assert row.reviewer_group == finance_group
    assert row.escalation_count == 1
    assert row.expiry_policy == "" and row.escalate_to is None
    assert row.expires_at == now + timedelta(seconds=120)  # finance's own deadline
    event = AuditEvent.objects.get(interrupt=row, kind=Kind.INTERRUPT_ESCALATED)
    assert (event.data["from"], event.data["to"]) == ("reviewers", "finance")
    assert "escalated to finance" in event.data["notice"]

    received = receive_all(layer, channel)
    changes = [m for m in received if m["type"] == "interrupt.changed"]
    assert {(m["reviewer_group_id"], m["status"]) for m in changes} >= {
        (reviewers_group.pk, "escalated"),
        (finance_group.pk, "pending"),
    }
    notices = [m["event"] for m in received if m["type"] == "thread.event"]
    assert any(e.get("name") == "interrupt_escalated" for e in notices)

    # Now finance may answer, the original group may not.
    with pytest.raises((errors.Forbidden, errors.NotFound)):
        decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept")
    decisions.interrupt_resolve(interrupt_id=row.pk, user=finance_reviewer, response_type="accept")
    assert finish(manual_runs, resume_of(row)).result["decision"]["type"] == "accept"


def test_escalation_stops_after_the_limit(
    manual_runs, requester, reviewers_group, finance_group, settings
):
    settings.HITL_MAX_ESCALATIONS = 2
    for source, target in ((reviewers_group, finance_group), (finance_group, reviewers_group)):
        ReviewerGroupPolicy.objects.create(
            group=source, expire_after_seconds=10, expiry_policy="escalate", escalate_to=target
        )
    row = start(manual_runs, requester)
    expire_due_interrupts(now=later(11))
    expire_due_interrupts(now=later(22))
    row.refresh_from_db()
    assert (row.reviewer_group, row.escalation_count, row.status) == (reviewers_group, 2, "pending")
    expire_due_interrupts(now=later(33))  # a loop: the third time it is ignored instead
    row.refresh_from_db()
    assert (row.status, row.response_type) == ("expired", "ignore")


def test_an_answered_interrupt_is_not_expired(manual_runs, requester, reviewer, reviewers_group):
    row = start(manual_runs, requester, expires_in=1)
    decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept")
    assert expire_due_interrupts(now=later(2)) == 0
    with pytest.raises(errors.Conflict, match="resolved"):
        ops_services.interrupt_expire(interrupt_id=row.pk)
    row.refresh_from_db()
    assert (row.status, row.response_type, row.responded_by) == ("resolved", "accept", reviewer)
    assert Run.objects.filter(thread_id=row.thread_id, kind="resume").count() == 1


def test_people_without_staff_status_cannot_expire(manual_runs, requester, reviewer):
    row = start(manual_runs, requester)
    with pytest.raises(errors.Forbidden):
        ops_services.interrupt_expire(interrupt_id=row.pk, user=reviewer)
