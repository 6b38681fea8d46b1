"""Runs: one start or resume of a thread's graph, leased by a worker."""

import uuid

from django.conf import settings
from django.db import models

from hitl.core.models.base import QuerySet
from hitl.core.models.fields import OrderedJSONField
from hitl.core.models.threads import Thread


class RunQuerySet(QuerySet):
    def active(self):
        return self.filter(status__in=[Run.Status.QUEUED, Run.Status.RUNNING])


class Run(models.Model):
    class Kind(models.TextChoices):
        START = "start"
        RESUME = "resume"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        INTERRUPTED = "interrupted"
        SUCCESS = "success"
        ERROR = "error"
        CANCELLED = "cancelled"

    TERMINAL = (Status.INTERRUPTED, Status.SUCCESS, Status.ERROR, Status.CANCELLED)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="runs")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.QUEUED)
    # start: the graph input; resume: {"resume": {interrupt_id: value}}.
    input = OrderedJSONField(default=dict, blank=True)
    # A run started from an earlier checkpoint of the thread (time travel, a fork);
    # blank: from the latest one.
    checkpoint_id = models.CharField(max_length=64, blank=True)
    result = OrderedJSONField(null=True, blank=True)
    # A structured final result the agent finished with (shown in the thread).
    final_result = OrderedJSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # Signed POSTs on interrupt and completion (host must be allow-listed).
    webhook = models.URLField(max_length=500, blank=True)
    # The LangGraph stream modes a /langgraph client started the run with, kept only when
    # they ask the worker for more than the thread stream carries (debug, tasks,
    # checkpoints, subgraphs): runs nobody asked that of stream as before.
    stream_modes = models.JSONField(default=list, blank=True)
    stream_subgraphs = models.BooleanField(default=False)
    # The RunnableConfig (configurable, recursion_limit, tags, ...) and runtime context the
    # run was started with, the assistant's merged under the request's (HITL's own
    # configurable keys are added by the worker, never stored here).
    config = models.JSONField(default=dict, blank=True)
    context = models.JSONField(default=dict, blank=True)
    # A LangGraph command's `goto` and `update` (its `resume` is in `input`), as the
    # client sent them.
    command = models.JSONField(default=dict, blank=True)
    # LangGraph breakpoints: {"before": [...], "after": [...]} (node names, or "*").
    breakpoints = models.JSONField(default=dict, blank=True)
    # "enqueue": the run waits for the runs before it on its thread (double-texting).
    multitask_strategy = models.CharField(max_length=12, blank=True)
    # The assistant the run was started on, at the version it had then (blank: a
    # registered graph's default assistant, which has no config of its own).
    assistant_id = models.CharField(max_length=100, blank=True)
    assistant_version = models.PositiveIntegerField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    lease_owner = models.CharField(max_length=200, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # Last time the run was handed to the broker; the reaper re-sends stale queued runs.
    dispatched_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = RunQuerySet.as_manager()

    # Not stored: set by run_lease_take on the run it hands to a worker. True when no earlier
    # attempt was ever claimed, so nothing of this run can be in the checkpointer yet.
    first_lease = False
    # Not stored: set by run_lease_take when asked, in the same statement. True when the
    # run's thread had no checkpoint at all when this run was claimed.
    checkpointless = False
    # The metadata key of the attempts a run had when an operator retried it: its attempt
    # budget (HITL_RUN_MAX_ATTEMPTS) counts from there.
    RETRIED_AFTER = "hitl_retried_after_attempts"

    class Meta:
        indexes = [
            # a thread's run history, latest first
            models.Index(fields=["thread", "-created_at"], name="run_thread_created"),
            # the reaper: running runs whose lease expired
            models.Index(fields=["status", "lease_expires_at"], name="run_status_lease"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} run {self.id}"

    @property
    def budget_used(self) -> int:
        """Attempts spent since the run was last retried by an operator."""
        offset = (self.metadata or {}).get(self.RETRIED_AFTER)
        return self.attempts - (offset if isinstance(offset, int) else 0)

    @property
    def duration(self):
        if self.started_at and self.finished_at:
            return self.finished_at - self.started_at
        return None
