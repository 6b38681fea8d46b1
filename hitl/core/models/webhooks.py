"""Webhook deliveries: signed POSTs on a run's interrupt and completion."""

import uuid
from urllib.parse import urlsplit

from django.db import models

from hitl.core.models.runs import Run


class WebhookDelivery(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="webhook_deliveries")
    event = models.CharField(max_length=32)
    url = models.URLField(max_length=500)
    payload = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    response_status = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "webhook deliveries"
        indexes = [
            # admin: failed deliveries first
            models.Index(fields=["status", "-created_at"], name="webhook_status_created"),
        ]

    def __str__(self) -> str:
        # The URL may be a credential (a catch-hook's path): name only its host.
        return f"{self.event} -> {urlsplit(self.url).hostname or '?'} ({self.status})"
