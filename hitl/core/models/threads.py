"""Threads: one conversation with a graph, and the LangGraph thread_id of its checkpoints."""

import uuid

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models

from hitl.core.models.base import QuerySet


class ThreadQuerySet(QuerySet):
    def for_requester(self, user):
        return self.filter(requester=user)


class Thread(models.Model):
    class Status(models.TextChoices):
        IDLE = "idle"
        BUSY = "busy"
        INTERRUPTED = "interrupted"
        ERROR = "error"
        DONE = "done"

    # Also the LangGraph thread_id of the checkpointer.
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    graph = models.CharField(max_length=100)
    title = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.IDLE)
    requester = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="threads",
    )
    reviewer_group = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ThreadQuerySet.as_manager()

    class Meta:
        indexes = [
            # inbox tabs by status, newest first
            models.Index(fields=["status", "-updated_at"], name="thread_status_updated"),
            # "my threads" for requesters
            models.Index(fields=["requester", "-updated_at"], name="thread_requester_updated"),
            # all threads, newest first (keyset pagination)
            models.Index(fields=["-updated_at", "id"], name="thread_updated"),
        ]
        # Acting on a thread for its requester (start a run, upload a file, change its
        # metadata) is the requester's; anyone else needs this.
        permissions = [
            (
                "run_any_thread",
                "Can start runs on, upload files to and change threads requested by others",
            )
        ]

    def __str__(self) -> str:
        return self.title or str(self.id)
