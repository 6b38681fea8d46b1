"""Slack approvals' rows: who a Slack member acts as, the messages to update, the replay cache.

Imported by hitl/core/models/__init__.py so the models belong to the `hitl` app; the
channel's code is in hitl/integrations/slack/.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class SlackUserLink(models.Model):
    """A Slack user (of one workspace) acts as this HITL user when they press a button."""

    slack_user_id = models.CharField(max_length=32, help_text="Slack's member id, e.g. U024BE7LH.")
    # Empty: the mapping holds for every workspace the app is installed in.
    team_id = models.CharField(max_length=32, blank=True, help_text="Workspace id (T...).")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="slack_links"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "Slack account link"
        constraints = [
            models.UniqueConstraint(fields=["slack_user_id", "team_id"], name="slack_user_once"),
        ]

    def __str__(self) -> str:
        return f"Slack {self.slack_user_id} -> {self.user}"


class SlackMessage(models.Model):
    """A Slack message that lists interrupts; where to update it once they change.

    Incoming webhooks return no message id, so `channel_id`/`ts` (for chat.update with a
    bot token) and `response_url` (valid 30 minutes) are learnt from the first button
    press on the message.
    """

    notification = models.OneToOneField(
        "hitl.Notification", on_delete=models.CASCADE, related_name="slack_message"
    )
    interrupts = models.ManyToManyField("hitl.HumanInterrupt", related_name="slack_messages")
    channel_id = models.CharField(max_length=32, blank=True)
    ts = models.CharField(max_length=32, blank=True)
    response_url = models.URLField(max_length=500, blank=True)
    response_url_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "Slack message"

    def __str__(self) -> str:
        return f"Slack message of {self.notification_id}"


class SlackRequestSeen(models.Model):
    """A signature already accepted: the same request again is a replay (pruned after 10 min)."""

    signature = models.CharField(max_length=100, unique=True)
    seen_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        verbose_name = "seen Slack request"

    def __str__(self) -> str:
        return self.signature[:16]
