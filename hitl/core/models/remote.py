"""Deployments of a LangGraph-Server-compatible API whose interrupts HITL reviews.

Imported by hitl/core/models/__init__.py so the models belong to the `hitl` app. The
code that polls them and delivers decisions is in hitl/core/remote/.
"""

from __future__ import annotations

from django.contrib.auth.models import Group
from django.db import models

# A mirrored thread's graph name starts with this (then "<deployment>/<graph id>"): rules
# match it like any graph name, and the worker delivers its resume runs there.
REMOTE_GRAPH_PREFIX = "remote:"


class RemoteDeployment(models.Model):
    """A LangGraph Platform, self-hosted LangGraph Server or Aegra deployment."""

    name = models.SlugField(max_length=60, unique=True)
    base_url = models.URLField(max_length=500, help_text="The root of its LangGraph API.")
    # Sent as x-api-key; never shown back (the admin field is write-only), logged or listed.
    api_key = models.TextField(blank=True)
    graphs = models.JSONField(
        default=list,
        blank=True,
        help_text="Assistant ids or graph ids to watch, as a JSON list; empty: all of them.",
    )
    reviewer_group = models.ForeignKey(
        Group,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Where its interrupts go unless the interrupt names a group.",
    )
    enabled = models.BooleanField(default=True)
    # Declared in settings (HITL_REMOTE_DEPLOYMENTS): settings win over admin edits.
    from_settings = models.BooleanField(default=False, editable=False)
    # The newest updated_at of an interrupted remote thread already mirrored.
    cursor = models.DateTimeField(null=True, blank=True, editable=False)
    last_polled_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_ok_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Why the last call failed (unreachable, key refused); blank while it works.
    last_error = models.TextField(blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<RemoteDeployment {self.name} {self.base_url}>"

    @property
    def healthy(self) -> bool:
        return self.enabled and not self.last_error

    def watches(self, *, assistant_id: str, graph_id: str) -> bool:
        return not self.graphs or assistant_id in self.graphs or graph_id in self.graphs


class RemoteThread(models.Model):
    """The local Thread that mirrors one thread of a deployment."""

    thread = models.OneToOneField(
        "hitl.Thread", primary_key=True, on_delete=models.CASCADE, related_name="remote"
    )
    deployment = models.ForeignKey(
        RemoteDeployment, on_delete=models.CASCADE, related_name="threads"
    )
    remote_thread_id = models.CharField(max_length=64)
    assistant_id = models.CharField(max_length=100, blank=True)
    graph_id = models.CharField(max_length=100, blank=True)
    # The remote thread's status and updated_at when last read.
    remote_status = models.CharField(max_length=16, blank=True)
    remote_updated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["deployment", "remote_thread_id"], name="remote_thread_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.deployment_id}:{self.remote_thread_id}"
