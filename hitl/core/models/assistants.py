"""Assistants (configured variants of a registered graph, versioned) and crons."""

import uuid

from django.conf import settings
from django.db import models


class Assistant(models.Model):
    """A registered graph with its own config, context and metadata (LangGraph's
    assistant). Its fields are those of its current version (`version`)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    graph = models.CharField(max_length=100)
    name = models.CharField(max_length=200, default="Untitled")
    description = models.TextField(blank=True)
    config = models.JSONField(default=dict, blank=True)
    context = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    version = models.PositiveIntegerField(default=1)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            # assistants.search by graph_id, newest first
            models.Index(fields=["graph", "-created_at"], name="assistant_graph_created"),
        ]
        permissions = [
            ("use_store", "Can read and write LangGraph's store through /langgraph/store"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.graph} v{self.version})"


class AssistantVersion(models.Model):
    """One saved version of an assistant: every update adds one; set_latest picks one."""

    assistant = models.ForeignKey(Assistant, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    graph = models.CharField(max_length=100)
    name = models.CharField(max_length=200, default="Untitled")
    description = models.TextField(blank=True)
    config = models.JSONField(default=dict, blank=True)
    context = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            # Two concurrent updates cannot both write version n+1.
            models.UniqueConstraint(fields=["assistant", "version"], name="assistant_version_once")
        ]

    def __str__(self) -> str:
        return f"{self.assistant_id} v{self.version}"


class Cron(models.Model):
    """A run started on a schedule: on one thread, or on a new thread each time."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    assistant_id = models.CharField(max_length=100)
    thread = models.ForeignKey(
        "hitl.Thread", null=True, blank=True, on_delete=models.CASCADE, related_name="crons"
    )
    schedule = models.CharField(max_length=200)
    # IANA name the schedule is read in (blank: UTC).
    timezone = models.CharField(max_length=64, blank=True)
    # What each run gets: input, metadata, config, context, webhook ... (as the request).
    payload = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    next_run_date = models.DateTimeField()
    end_time = models.DateTimeField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            # the beat's "which crons are due" scan
            models.Index(fields=["enabled", "next_run_date"], name="cron_due"),
        ]

    def __str__(self) -> str:
        return f"{self.schedule} -> {self.assistant_id}"


class CronFire(models.Model):
    """One tick of a cron, written once: the unique key makes a second beat's fire of
    the same tick fail instead of starting a second run."""

    cron = models.ForeignKey(Cron, on_delete=models.CASCADE, related_name="fires")
    scheduled_for = models.DateTimeField()
    run = models.ForeignKey("hitl.Run", null=True, blank=True, on_delete=models.SET_NULL)
    fired_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cron", "scheduled_for"], name="cron_fire_once")
        ]

    def __str__(self) -> str:
        return f"{self.cron_id} at {self.scheduled_for:%Y-%m-%d %H:%M}"
