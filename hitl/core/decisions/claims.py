"""Claim ("I'm on it") and snooze ("not now") a pending interrupt; both audited.

A claim is visible to everyone (live) and lapses after HITL_CLAIM_MINUTES; others may
still decide, after confirming. A snooze hides the item from one reviewer's own pending
list until a time they pick, or until the item changes group or escalation step.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet, Subquery
from django.utils import timezone

from hitl.core import audit
from hitl.core.access.permissions import user_can_review
from hitl.core.errors import Conflict, Invalid, NotFound
from hitl.core.live import events
from hitl.core.models import HumanInterrupt, InterruptClaim, InterruptSnooze

MAX_SNOOZE = timedelta(days=30)


def _pending_for(interrupt_id: Any, user) -> HumanInterrupt:
    """Lock a pending interrupt the user may answer; 404 / 409 otherwise."""
    try:
        interrupt_id = uuid.UUID(str(interrupt_id))
    except ValueError:
        raise NotFound("No such interrupt.") from None
    row = (
        HumanInterrupt.objects.select_for_update(of=("self",))
        .select_related("reviewer_group")
        .filter(pk=interrupt_id)
        .first()
    )
    if row is None or not user_can_review(user, row):
        raise NotFound("No such interrupt.")
    if row.status != HumanInterrupt.Status.PENDING:
        raise Conflict(f"This interrupt is {row.status}.")
    return row


def _announce(row: HumanInterrupt, change: str) -> None:
    events.interrupt_changed_on_commit(row, HumanInterrupt.Status.PENDING, change=change)


def active_claim(row: HumanInterrupt, now: datetime | None = None) -> InterruptClaim | None:
    """The row's claim if it has not lapsed (uses a select_related claim when loaded)."""
    try:
        claim = row.claim
    except InterruptClaim.DoesNotExist:
        return None
    return claim if claim.expires_at > (now or timezone.now()) else None


class ClaimHeld(Conflict):
    """Someone else is on it; the message is the API's, `holder` and `until` let a page
    say it in its own words (what to tick, where to go)."""

    def __init__(self, holder: str, until: datetime):
        super().__init__(
            f"{holder} is on it (claimed until {until:%Y-%m-%d %H:%M} UTC). "
            'Send "override_claim": true to decide anyway.'
        )
        self.holder, self.until = holder, until


def claim_refusal(row: HumanInterrupt, user, now: datetime | None = None) -> None:
    """Refuse a decision on an item someone else claimed (a client that did not confirm)."""
    claim = active_claim(row, now)
    if claim is None or claim.user_id == user.pk:
        return
    raise ClaimHeld(claim.user.get_username(), claim.expires_at)


def interrupt_claim(*, interrupt_id: Any, user, now: datetime | None = None) -> InterruptClaim:
    """Mark a pending item as mine for HITL_CLAIM_MINUTES (renewing my own claim)."""
    now = now or timezone.now()
    with transaction.atomic():
        row = _pending_for(interrupt_id, user)
        claim = InterruptClaim.objects.select_for_update().filter(interrupt=row).first()
        if claim and claim.user_id != user.pk and claim.expires_at > now:
            who = claim.user.get_username()
            raise Conflict(f"{who} is on it until {timezone.localtime(claim.expires_at):%H:%M}.")
        expires = now + timedelta(minutes=settings.HITL_CLAIM_MINUTES)
        if claim is None:
            claim = InterruptClaim(interrupt=row)
        claim.user, claim.claimed_at, claim.expires_at = user, now, expires
        claim.save()
        audit.audit_record(
            kind=audit.Kind.INTERRUPT_CLAIMED,
            thread=row.thread_id,
            interrupt=row,
            actor=user,
            data={"until": expires, "note": f"on it until {timezone.localtime(expires):%H:%M}"},
        )
        _announce(row, "claimed")
    return claim


def interrupt_unclaim(*, interrupt_id: Any, user) -> None:
    """Give up my claim on a pending item."""
    with transaction.atomic():
        row = _pending_for(interrupt_id, user)
        deleted, _ = InterruptClaim.objects.filter(interrupt=row, user=user).delete()
        if not deleted:
            raise Conflict("You have not claimed this item.")
        audit.audit_record(
            kind=audit.Kind.INTERRUPT_UNCLAIMED,
            thread=row.thread_id,
            interrupt=row,
            actor=user,
            data={"note": "released"},
        )
        _announce(row, "released")


def interrupt_snooze(
    *, interrupt_id: Any, user, until: datetime, now: datetime | None = None
) -> InterruptSnooze:
    """Hide a pending item from my own pending list until `until` (or until it changes)."""
    now = now or timezone.now()
    if not isinstance(until, datetime) or timezone.is_naive(until):
        raise Invalid("Pick when the item should come back.")
    if until <= now:
        raise Invalid("Pick a time in the future.")
    if until > now + MAX_SNOOZE:
        raise Invalid("At most 30 days ahead.")
    with transaction.atomic():
        row = _pending_for(interrupt_id, user)
        snooze, _ = InterruptSnooze.objects.update_or_create(
            interrupt=row,
            user=user,
            defaults={
                "until": until,
                "reviewer_group_id_then": row.reviewer_group_id,
                "escalation_count_then": row.escalation_count,
            },
        )
        audit.audit_record(
            kind=audit.Kind.INTERRUPT_SNOOZED,
            thread=row.thread_id,
            interrupt=row,
            actor=user,
            data={
                "until": until,
                "note": f"not now: back at {timezone.localtime(until):%Y-%m-%d %H:%M}",
            },
        )
        events.send_event_on_commit(
            events.publish_interrupt_snoozed, user_id=user.pk, interrupt_id=row.pk, snoozed=True
        )
    return snooze


def interrupt_unsnooze(*, interrupt_id: Any, user, now: datetime | None = None) -> None:
    """Put an item I set aside back on my pending list now."""
    now = now or timezone.now()
    with transaction.atomic():
        row = _pending_for(interrupt_id, user)
        mine = InterruptSnooze.objects.filter(interrupt=row, user=user, until__gt=now)
        deleted, _ = mine.delete()
        if not deleted:
            raise Conflict("You have not set this item aside.")
        # Recorded as a snooze that ends now: the trail's kinds stay as they are.
        audit.audit_record(
            kind=audit.Kind.INTERRUPT_SNOOZED,
            thread=row.thread_id,
            interrupt=row,
            actor=user,
            data={"until": now, "note": "not now: back on my list (snooze ended early)"},
        )
        events.send_event_on_commit(
            events.publish_interrupt_snoozed, user_id=user.pk, interrupt_id=row.pk, snoozed=False
        )


def snooze_of(row: HumanInterrupt, user, now: datetime | None = None) -> InterruptSnooze | None:
    """The user's snooze of the row if it still holds (None for none, lapsed or outdated)."""
    if user is None or not user.is_authenticated:
        return None
    return InterruptSnooze.objects.filter(
        interrupt=row,
        user=user,
        until__gt=now or timezone.now(),
        reviewer_group_id_then=row.reviewer_group_id,
        escalation_count_then=row.escalation_count,
    ).first()


def _holding_snoozes(user, now: datetime | None) -> QuerySet:
    return InterruptSnooze.objects.filter(
        interrupt=OuterRef("pk"),
        user=user,
        until__gt=now or timezone.now(),
        reviewer_group_id_then=OuterRef("reviewer_group_id"),
        escalation_count_then=OuterRef("escalation_count"),
    )


def snoozed_by(user, now: datetime | None = None) -> Exists:
    """An Exists() for interrupt querysets: the user's snooze of the row still holds."""
    return Exists(_holding_snoozes(user, now))


def snoozed_until(user, now: datetime | None = None) -> Subquery:
    """A Subquery for interrupt querysets: until when the user's snooze holds (or null)."""
    return Subquery(_holding_snoozes(user, now).values("until")[:1])


def filter_claims(qs: QuerySet, claimed: str, user, now: datetime | None = None) -> QuerySet:
    """Inbox filter: "mine", "others" (claimed by someone else), "unclaimed", or
    "unclaimed_or_mine" (what the user may pick up next)."""
    now = now or timezone.now()
    live = InterruptClaim.objects.filter(interrupt=OuterRef("pk"), expires_at__gt=now)
    if claimed == "mine":
        return qs.filter(Exists(live.filter(user=user)))
    if claimed == "others":
        return qs.filter(Exists(live.exclude(user=user)))
    if claimed == "unclaimed":
        return qs.exclude(Exists(live))
    if claimed == "unclaimed_or_mine":
        return qs.exclude(Exists(live.exclude(user=user)))
    return qs
