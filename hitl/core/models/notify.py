"""Notification settings and the outbox: who hears about pending items, and every message.

Imported by hitl/core/models/__init__.py so the models belong to the `hitl` app.
"""

from __future__ import annotations

import uuid
import zoneinfo
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q


def validate_timezone(value: str) -> None:
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValidationError(f"{value!r} is not a known time zone (e.g. Europe/Berlin).") from None


class GroupNotificationSettings(models.Model):
    """How a reviewer group hears about new pending items."""

    group = models.OneToOneField(Group, on_delete=models.CASCADE, related_name="hitl_notifications")
    # E-mail each member (a member's own preferences, when they have any, decide instead).
    email_members = models.BooleanField(default=False)
    # Extra addresses (a team list), one per line or comma separated.
    email_addresses = models.TextField(blank=True)
    # A Slack-compatible incoming webhook for the group's channel (allow-listed hosts only).
    slack_webhook_url = models.URLField(max_length=500, blank=True)
    # At most one message per this many minutes to the group's own addresses (0: at once).
    digest_minutes = models.PositiveIntegerField(default=0)

    class Meta:
        verbose_name = "reviewer group notifications"
        verbose_name_plural = "reviewer group notifications"

    def __str__(self) -> str:
        return f"notifications for {self.group}"

    def addresses(self) -> list[str]:
        raw = self.email_addresses.replace(",", "\n").splitlines()
        return [a.strip() for a in raw if a.strip()]


class NotificationPreference(models.Model):
    """One user's channels, digest mode and quiet hours."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="hitl_notify"
    )
    email = models.BooleanField(default=True, help_text="E-mail me about new pending items.")
    slack_webhook_url = models.URLField(
        max_length=500, blank=True, help_text="A Slack-compatible incoming webhook URL."
    )
    digest_minutes = models.PositiveIntegerField(
        default=0, help_text="At most one message per this many minutes (0: as they come)."
    )
    quiet_start = models.TimeField(null=True, blank=True)
    quiet_end = models.TimeField(null=True, blank=True)
    timezone = models.CharField(max_length=64, default="UTC", validators=[validate_timezone])
    # Honoured only while the user holds hitl.review_all (they may answer every group's items).
    all_groups = models.BooleanField(
        default=False,
        verbose_name="notify me of items in every group",
        help_text="Only for reviewers who may review every group (hitl.review_all).",
    )

    def __str__(self) -> str:
        return f"notification preferences of {self.user}"


class Notification(models.Model):
    """One message to one destination: collected, then sent (with retries), or failed.

    While `collecting`, new pending items of the same destination join it, so a fan-out
    of many interrupts becomes one digest; it is sent at `send_after` (batching delay,
    digest window, end of quiet hours).
    """

    class Channel(models.TextChoices):
        EMAIL = "email"
        SLACK = "slack"

    class Kind(models.TextChoices):
        PENDING = "pending", "new pending items"
        REMINDER = "reminder", "expiry reminder"

    class Status(models.TextChoices):
        COLLECTING = "collecting"
        PENDING = "pending"
        SENT = "sent"
        FAILED = "failed"
        SKIPPED = "skipped"  # everything it listed was answered before it went out

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    channel = models.CharField(max_length=8, choices=Channel.choices)
    address = models.CharField(max_length=500)  # an e-mail address or a webhook URL
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.PENDING)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    group = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    # HumanInterrupt ids it lists (in arrival order).
    interrupt_ids = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.COLLECTING)
    send_after = models.DateTimeField()
    subject = models.CharField(max_length=300, blank=True)
    body = models.TextField(blank=True)  # the plain text as sent
    # What goes on the wire besides: {"html": ...} for e-mail, the JSON body for Slack.
    payload = models.JSONField(default=dict, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    # Every attempt: [{"at": iso time, "ok": bool, "error": str}].
    attempt_log = models.JSONField(default=list, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # One open digest per destination: concurrent new items join it.
            models.UniqueConstraint(
                fields=["channel", "address", "kind"],
                condition=Q(status="collecting"),
                name="notification_one_collecting",
            ),
        ]
        indexes = [
            # digest window: the destination's last sent message
            models.Index(fields=["channel", "address", "-sent_at"], name="notification_last_sent"),
            # admin: failed ones first
            models.Index(fields=["status", "-created_at"], name="notification_status"),
        ]

    def __str__(self) -> str:
        # A Slack address is a webhook URL (a secret): name only its host.
        to = self.address
        if self.channel == self.Channel.SLACK:
            to = urlsplit(to).hostname or "slack"
        return f"{self.kind} {self.channel} -> {to} ({self.status})"


class InterruptReminder(models.Model):
    """A reminder went out for this interrupt at this escalation step (once each)."""

    interrupt = models.ForeignKey("hitl.HumanInterrupt", on_delete=models.CASCADE, related_name="+")
    escalation_count = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["interrupt", "escalation_count"], name="reminder_once_per_step"
            ),
        ]

    def __str__(self) -> str:
        return f"reminder for {self.interrupt_id} (step {self.escalation_count})"
