"""Claims ("I'm on it") and snoozes ("not now") of pending interrupts.

Imported by hitl/core/models.py so the models belong to the `hitl` app.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class InterruptClaim(models.Model):
    """Who is on an item, until when; a lapsed claim is as good as none."""

    interrupt = models.OneToOneField(
        "hitl.HumanInterrupt", on_delete=models.CASCADE, related_name="claim"
    )
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    claimed_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        indexes = [
            # inbox filter "claimed by me": my live claims
            models.Index(fields=["user", "expires_at"], name="claim_user_expires"),
        ]

    def __str__(self) -> str:
        return f"{self.interrupt_id} claimed by {self.user_id}"


class InterruptSnooze(models.Model):
    """One reviewer set an item aside until `until`, or until it changes (another group,
    another escalation step): the snapshot below no longer matching ends it."""

    interrupt = models.ForeignKey(
        "hitl.HumanInterrupt", on_delete=models.CASCADE, related_name="snoozes"
    )
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    until = models.DateTimeField()
    reviewer_group_id_then = models.IntegerField(null=True, blank=True)
    escalation_count_then = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["interrupt", "user"], name="snooze_once_per_user"),
        ]
        indexes = [
            # my pending list: my snoozes still running
            models.Index(fields=["user", "until"], name="snooze_user_until"),
        ]

    def __str__(self) -> str:
        return f"{self.interrupt_id} snoozed by {self.user_id} until {self.until:%Y-%m-%d %H:%M}"
