"""A claim ("I'm on it") holds against /api/v1 decisions that do not override it;
/langgraph clients (which know nothing of claims) decide as before."""

from __future__ import annotations

import pytest
from django.utils import timezone

from hitl.core.decisions import claims
from hitl.core.models import InterruptClaim
from tests.review.conftest import human_interrupt, open_interrupts


@pytest.fixture
def claimed(settings, requester, reviewer):
    settings.HITL_EXECUTOR = "manual"
    _, (row,) = open_interrupts(user=requester, values=[human_interrupt("deploy")])
    claims.interrupt_claim(interrupt_id=row.pk, user=reviewer)
    return row


def test_an_api_decision_on_an_item_someone_else_claimed_is_refused_naming_them(
    claimed, api_for, second_reviewer
):
    sam = api_for(second_reviewer)
    response = sam.post(f"/api/v1/interrupts/{claimed.pk}/decision", {"type": "accept"})
    assert response.status_code == 409
    detail = response.json()["detail"]
    assert detail.startswith("rita is on it (claimed until ") and "override_claim" in detail
    claimed.refresh_from_db()
    assert claimed.status == "pending" and claimed.responded_by is None


def test_an_api_decision_that_overrides_the_claim_goes_through(claimed, api_for, second_reviewer):
    response = api_for(second_reviewer).post(
        f"/api/v1/interrupts/{claimed.pk}/decision", {"type": "accept", "override_claim": True}
    )
    assert response.status_code == 200 and response.json()["status"] == "resolved"
    claimed.refresh_from_db()
    assert claimed.responded_by.get_username() == "sam"


def test_the_claimant_and_a_lapsed_claim_need_no_override(
    claimed, api_for, reviewer, second_reviewer, settings
):
    response = api_for(reviewer).post(
        f"/api/v1/interrupts/{claimed.pk}/decision", {"type": "ignore"}
    )
    assert response.status_code == 200
    _, (other,) = open_interrupts(user=claimed.thread.requester, values=[human_interrupt("x")])
    claims.interrupt_claim(interrupt_id=other.pk, user=reviewer)
    InterruptClaim.objects.filter(interrupt=other).update(expires_at=timezone.now())
    response = api_for(second_reviewer).post(
        f"/api/v1/interrupts/{other.pk}/decision", {"type": "accept"}
    )
    assert response.status_code == 200


def test_the_langgraph_api_decides_a_claimed_item_as_before(claimed, api_for, second_reviewer):
    response = api_for(second_reviewer).post(
        f"/langgraph/threads/{claimed.thread_id}/runs",
        {"assistant_id": "approval", "command": {"resume": {"type": "accept", "args": None}}},
    )
    assert response.status_code == 200, response.content
    claimed.refresh_from_db()
    assert claimed.status == "resolved" and claimed.responded_by.get_username() == "sam"
