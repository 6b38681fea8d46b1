"""Claim ("I'm on it") and snooze ("not now"): audited, live, lapsing, and in the filters."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.utils import timezone

from hitl.core.decisions import claims
from hitl.core.live import listeners
from hitl.core.live.publisher import publisher
from hitl.core.models import AuditEvent, InterruptClaim, InterruptSnooze, Notification
from tests.review.conftest import human_interrupt


def claim(client, row, action="claim", **data):
    return client.post(f"/interrupts/{row.pk}/{action}/", data, HTTP_ACCEPT="application/json")


def pending_ids(client, **params) -> list[str]:
    html = client.get("/", {"tab": "pending", **params}).content.decode()
    return [
        line.split('data-id="')[1].split('"')[0]
        for line in html.split("\n")
        if 'class="row interrupt-row"' in line
    ]


def test_a_claim_is_audited_shown_to_others_and_refused_to_a_second_claimant(
    paused, client_for, requester, reviewer, second_reviewer
):
    _, (row,) = paused(user=requester, values=[human_interrupt("deploy")])
    rita, sam = client_for(reviewer), client_for(second_reviewer)

    assert claim(rita, row).json()["ok"] is True
    taken = claim(sam, row)
    assert taken.status_code == 409 and taken.json()["error"].startswith("rita is on it until ")
    assert InterruptClaim.objects.get(interrupt=row).user == reviewer
    event = AuditEvent.objects.get(kind="interrupt.claimed")
    assert (event.actor, event.interrupt_id) == (reviewer, row.pk)
    # Sam sees the claim in the inbox and on the card (which asks before deciding).
    assert "rita is on it" in sam.get("/").content.decode()
    page = sam.get(f"/threads/{row.thread_id}/").content.decode()
    assert 'data-claimed-by="rita"' in page and "hitl/claim.js" in page


def test_a_claim_lapses_and_can_be_released(
    paused, client_for, requester, reviewer, second_reviewer, settings
):
    settings.HITL_CLAIM_MINUTES = 10
    _, (row,) = paused(user=requester, values=[human_interrupt("deploy")])
    claims.interrupt_claim(interrupt_id=row.pk, user=reviewer)
    later = timezone.now() + timedelta(minutes=11)
    # Lapsed: sam may take it over.
    claims.interrupt_claim(interrupt_id=row.pk, user=second_reviewer, now=later)
    assert InterruptClaim.objects.get(interrupt=row).user == second_reviewer
    assert claim(client_for(reviewer), row, "unclaim").status_code == 409  # not rita's
    assert claim(client_for(second_reviewer), row, "unclaim").json()["ok"] is True
    assert not InterruptClaim.objects.exists()
    kinds = list(AuditEvent.objects.filter(interrupt=row).values_list("kind", flat=True))
    assert kinds.count("interrupt.claimed") == 2 and "interrupt.unclaimed" in kinds


def test_claims_are_published_live_without_notifying_anyone_again(
    paused, requester, reviewer, reviewers_group, django_capture_on_commit_callbacks
):
    _, (row,) = paused(user=requester, values=[human_interrupt("deploy")])
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(listeners.inbox_group(reviewers_group.pk), channel)
    reviewer.email = "rita@example.com"
    reviewer.save()
    from hitl.core.models import NotificationPreference

    NotificationPreference.objects.create(user=reviewer)
    with django_capture_on_commit_callbacks(execute=True):
        claims.interrupt_claim(interrupt_id=row.pk, user=reviewer)
    publisher.flush()
    message = async_to_sync(layer.receive)(channel)
    assert (message["status"], message["change"]) == ("pending", "claimed")
    assert "rita is on it" in message["html"]
    assert not Notification.objects.exists()


def test_the_claim_filter(paused, client_for, requester, reviewer, second_reviewer):
    _, (mine, theirs, free) = paused(
        user=requester, values=[human_interrupt("a"), human_interrupt("b"), human_interrupt("c")]
    )
    claims.interrupt_claim(interrupt_id=mine.pk, user=reviewer)
    claims.interrupt_claim(interrupt_id=theirs.pk, user=second_reviewer)
    rita = client_for(reviewer)
    assert pending_ids(rita, claimed="mine") == [str(mine.pk)]
    assert pending_ids(rita, claimed="others") == [str(theirs.pk)]
    assert pending_ids(rita, claimed="unclaimed") == [str(free.pk)]
    assert len(pending_ids(rita, claimed="bogus")) == 3  # malformed: no filter


def test_not_now_hides_an_item_from_me_only_until_the_time_or_a_change(
    paused, client_for, requester, reviewer, second_reviewer, finance_group
):
    _, (row, other) = paused(user=requester, values=[human_interrupt("a"), human_interrupt("b")])
    rita, sam = client_for(reviewer), client_for(second_reviewer)

    response = claim(rita, row, "snooze", **{"for": "1h"})
    assert response.json()["ok"] is True
    assert pending_ids(rita) == [str(other.pk)]
    assert sorted(pending_ids(sam)) == sorted([str(row.pk), str(other.pk)])
    assert sorted(pending_ids(rita, snoozed="1")) == sorted([str(row.pk), str(other.pk)])
    assert AuditEvent.objects.filter(kind="interrupt.snoozed", actor=reviewer).count() == 1
    assert rita.get("/").content.decode().count('id="pending-badge">1<') == 1

    # Back when the time passes ...
    InterruptSnooze.objects.update(until=timezone.now() - timedelta(seconds=1))
    assert sorted(pending_ids(rita)) == sorted([str(row.pk), str(other.pk)])
    # ... or when the item changes (escalated / reassigned), whichever is first.
    claim(rita, row, "snooze", **{"for": "1d"})
    assert str(row.pk) not in pending_ids(rita)
    row.escalation_count = 1
    row.save(update_fields=["escalation_count"])
    assert str(row.pk) in pending_ids(rita)


def test_un_snooze_brings_an_item_back_for_me_only_and_needs_a_snooze(
    paused, client_for, requester, reviewer, second_reviewer
):
    _, (row,) = paused(user=requester, values=[human_interrupt("a")])
    rita, sam = client_for(reviewer), client_for(second_reviewer)
    claim(rita, row, "snooze", **{"for": "1d"})
    claim(sam, row, "snooze", **{"for": "1d"})
    assert claim(rita, row, "unsnooze").json()["ok"] is True
    assert pending_ids(rita) == [str(row.pk)] and pending_ids(sam) == []
    again = claim(rita, row, "unsnooze")
    assert again.status_code == 409 and "not set this item aside" in again.json()["error"]


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({}, "Pick when the item should come back."),
        ({"for": "forever"}, "Pick when the item should come back."),
        ({"until": "yesterday"}, "Pick a date and time"),
        ({"until": "2001-01-01T10:00"}, "Pick a time in the future."),
        ({"until": "2999-01-01T10:00"}, "At most 30 days ahead."),
        ({"until": "\x00"}, "must not contain NUL"),
    ],
)
def test_bad_snoozes_are_a_400_that_changes_nothing(
    paused, client_for, requester, reviewer, data, error
):
    _, (row,) = paused(user=requester, values=[human_interrupt("a")])
    response = claim(client_for(reviewer), row, "snooze", **data)
    assert response.status_code == 400
    assert error in response.json()["error"]
    assert not InterruptSnooze.objects.exists()
    assert not AuditEvent.objects.filter(kind="interrupt.snoozed").exists()


def test_outsiders_cannot_claim_or_snooze(paused, client_for, requester, outsider):
    _, (row,) = paused(user=requester, values=[human_interrupt("a")])
    client = client_for(outsider)
    assert claim(client, row).status_code == 404
    assert claim(client, row, "snooze", **{"for": "1h"}).status_code == 404
    assert client.post(f"/interrupts/{row.pk}/claim/").status_code == 404
    assert not InterruptClaim.objects.exists() and not InterruptSnooze.objects.exists()


def test_a_decided_item_cannot_be_claimed(paused, client_for, requester, reviewer):
    from hitl.core import decisions

    _, (row,) = paused(user=requester, values=[human_interrupt("a")])
    decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept")
    response = claim(client_for(reviewer), row)
    assert response.status_code == 409 and response.json()["error"] == "This interrupt is resolved."
