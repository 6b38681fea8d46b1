"""Undo with a grace period: stored and audited at once, resumed only when it ends."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from hitl.core import decisions, errors, runs
from hitl.core.models import AuditEvent, HumanInterrupt, Run
from hitl.ops.maintenance import expire_due_interrupts
from tests.review.conftest import decide_on_page, human_interrupt

pytestmark = pytest.mark.django_db


def resumes(thread) -> int:
    return Run.objects.filter(thread=thread, kind="resume").count()


def past_grace(row) -> None:
    HumanInterrupt.objects.filter(pk=row.pk).update(
        undo_until=timezone.now() - timedelta(seconds=1)
    )


def test_a_decision_with_grace_is_stored_and_audited_at_once_but_resumes_later(
    paused, reviewer, requester
):
    thread, (row,) = paused(user=requester, values=[human_interrupt()])
    decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept", grace=5)
    row.refresh_from_db()
    assert row.status == "resolved" and row.undo_until is not None
    answered = AuditEvent.objects.get(interrupt=row, kind="interrupt.answered")
    assert answered.data["grace_seconds"] == 5
    assert resumes(thread) == 0
    assert decisions.interrupt_release(interrupt_id=row.pk) is None  # not due yet
    assert resumes(thread) == 0
    assert decisions.interrupt_release_due(now=row.undo_until + timedelta(seconds=1)) == 1
    row.refresh_from_db()
    assert row.undo_until is None and resumes(thread) == 1
    assert decisions.interrupt_release_due(now=timezone.now() + timedelta(minutes=1)) == 0


def test_undo_within_grace_makes_the_item_pending_again_and_is_audited(paused, reviewer, requester):
    thread, (row,) = paused(user=requester, values=[human_interrupt()])
    decisions.interrupt_resolve(
        interrupt_id=row.pk,
        user=reviewer,
        response_type="edit",
        args={"action": "send_email", "args": {"to": "x@y.z"}},
        grace=5,
    )
    decisions.interrupt_undo(interrupt_id=row.pk, user=reviewer)
    row.refresh_from_db()
    assert (row.status, row.response_type, row.response_args, row.responded_by) == (
        "pending",
        "",
        None,
        None,
    )
    assert row.undo_until is None
    undone = AuditEvent.objects.get(interrupt=row, kind="interrupt.undone")
    assert undone.actor == reviewer and undone.data["response_type"] == "edit"
    assert decisions.interrupt_release_due(now=timezone.now() + timedelta(minutes=1)) == 0
    assert resumes(thread) == 0


def test_undo_after_the_grace_period_is_refused(paused, reviewer, requester, client_for):
    thread, (row,) = paused(user=requester, values=[human_interrupt()])
    decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept", grace=5)
    past_grace(row)
    with pytest.raises(errors.Conflict, match="Too late to undo"):
        decisions.interrupt_undo(interrupt_id=row.pk, user=reviewer)
    client = client_for(reviewer)
    response = client.post(f"/interrupts/{row.pk}/undo/", HTTP_ACCEPT="application/json")
    assert response.status_code == 409 and "Too late to undo" in response.json()["error"]
    page = client.post(f"/interrupts/{row.pk}/undo/")
    assert page.status_code == 409 and "Too late to undo" in page.content.decode()
    row.refresh_from_db()
    assert row.status == "resolved" and row.response_type == "accept"
    assert not AuditEvent.objects.filter(interrupt=row, kind="interrupt.undone").exists()


def test_under_grace_others_are_told_it_is_decided_and_cannot_undo_it(
    paused, reviewer, second_reviewer, requester, client_for
):
    _, (row,) = paused(user=requester, values=[human_interrupt()])
    decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept", grace=5)
    with pytest.raises(errors.Conflict, match=r"Already answered by rita \(who may still undo"):
        decisions.interrupt_resolve(
            interrupt_id=row.pk, user=second_reviewer, response_type="ignore"
        )
    with pytest.raises(errors.Conflict, match="Only a decision of your own"):
        decisions.interrupt_undo(interrupt_id=row.pk, user=second_reviewer)
    outcome = client_for(second_reviewer).get(f"/interrupts/{row.pk}/outcome/").content.decode()
    assert "accepted it as proposed" in outcome
    # The promise carries how long it holds; the page drops it then (live.js).
    assert re.search(r'data-undo-seconds="[1-5]\.\d"> \(they can still undo it', outcome)
    # Undone: now the other reviewer's decision wins.
    decisions.interrupt_undo(interrupt_id=row.pk, user=reviewer)
    decisions.interrupt_resolve(interrupt_id=row.pk, user=second_reviewer, response_type="ignore")
    row.refresh_from_db()
    assert (row.status, row.response_type, row.responded_by) == (
        "resolved",
        "ignore",
        second_reviewer,
    )


def test_siblings_wait_for_a_decision_under_grace(paused, reviewer, requester):
    thread, (first, second) = paused(
        user=requester, values=[human_interrupt("a"), human_interrupt("b")]
    )
    decisions.interrupt_resolve(
        interrupt_id=first.pk, user=reviewer, response_type="accept", grace=5
    )
    decisions.interrupt_resolve(interrupt_id=second.pk, user=reviewer, response_type="ignore")
    assert resumes(thread) == 0  # the first may still be undone
    past_grace(first)
    decisions.interrupt_release(interrupt_id=first.pk)
    run = Run.objects.get(thread=thread, kind="resume")
    assert sorted(v["type"] for v in run.input["resume"].values()) == ["accept", "ignore"]


def test_expiry_leaves_a_decision_under_grace_alone(paused, reviewer, requester):
    _, (row,) = paused(user=requester, values=[human_interrupt(expiry_policy="ignore")])
    decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept", grace=5)
    HumanInterrupt.objects.filter(pk=row.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert expire_due_interrupts() == 0
    decisions.interrupt_undo(interrupt_id=row.pk, user=reviewer)
    assert expire_due_interrupts() == 1  # pending again, and past its deadline
    row.refresh_from_db()
    assert row.status == "expired"


def test_browser_decisions_get_the_configured_grace_period(
    paused, client_for, reviewer, requester, settings
):
    settings.HITL_UNDO_SECONDS = 5
    thread, (row,) = paused(user=requester, values=[human_interrupt()])
    client = client_for(reviewer)
    response = decide_on_page(client, row, {"type": "accept"}, follow=True)
    page = response.content.decode()
    assert f'id="undo-{row.pk}"' in page and "Undo" in page
    row.refresh_from_db()
    assert 4 < (row.undo_until - row.responded_at).total_seconds() <= 5
    assert resumes(thread) == 0
    _, (quick,) = paused(user=requester, values=[human_interrupt()])
    data = decide_on_page(client, quick, {"type": "ignore"}, HTTP_ACCEPT="application/json").json()
    assert data["undo"]["url"] == f"/interrupts/{quick.pk}/undo/" and data["undo"]["seconds"] > 4
    response = client.post(data["undo"]["url"], follow=True)
    assert "is waiting for a decision again" in response.content.decode()
    quick.refresh_from_db()
    assert quick.status == "pending"


def test_api_decisions_are_immediate_unless_the_client_asks(
    paused, api_for, reviewer, requester, settings
):
    settings.HITL_UNDO_SECONDS = 5
    thread, (row,) = paused(user=requester, values=[human_interrupt()])
    api = api_for(reviewer)
    body = api.post(f"/api/v1/interrupts/{row.pk}/decision", {"type": "accept"}).json()
    assert body["undo_until"] is None and resumes(thread) == 1
    other, (asked,) = paused(user=requester, values=[human_interrupt()])
    response = api.post(
        f"/api/v1/interrupts/{asked.pk}/decision", {"type": "accept", "grace_seconds": 30}
    )
    assert response.status_code == 200 and response.json()["undo_until"]
    assert resumes(other) == 0
    undone = api.post(f"/api/v1/interrupts/{asked.pk}/undo")
    assert undone.status_code == 200 and undone.json()["status"] == "pending"
    assert api.post(f"/api/v1/interrupts/{asked.pk}/undo").status_code == 409
    for bad in (-1, 601, "soon"):
        response = api.post(
            f"/api/v1/interrupts/{asked.pk}/decision", {"type": "accept", "grace_seconds": bad}
        )
        assert 400 <= response.status_code < 500
    asked.refresh_from_db()
    assert asked.status == "pending"


def test_a_cancelled_thread_is_not_resumed_when_a_grace_period_ends(paused, reviewer, requester):
    thread, (row,) = paused(user=requester, values=[human_interrupt()])
    decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept", grace=5)
    runs.thread_cancel(thread=thread, user=requester)
    assert decisions.interrupt_release_due(now=timezone.now() + timedelta(minutes=1)) == 0
    with pytest.raises(errors.Conflict, match="Too late to undo"):
        decisions.interrupt_undo(interrupt_id=row.pk, user=reviewer)
    assert resumes(thread) == 0
