import uuid

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q

from hitl.core.models.fields import OrderedJSONField


class QuerySet(models.QuerySet):
    def one_or_none(self):
        """The row of a query narrowed to at most one by a unique key, or None.

        `.first()` adds ORDER BY pk, and compiling that costs about as much as the rest
        of such a query (Django hashes each ordering expression's signature).
        """
        return next(iter(self[:1]), None)

    async def aone_or_none(self):
        async for row in self[:1]:
            return row
        return None


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
    def duration(self):
        if self.started_at and self.finished_at:
            return self.finished_at - self.started_at
        return None


class ExpiryPolicy(models.TextChoices):
    IGNORE = "ignore", "auto-ignore"
    RESPOND = "respond", "auto-respond"
    ESCALATE = "escalate", "escalate"


class HumanInterruptQuerySet(QuerySet):
    def pending(self):
        return self.filter(status=HumanInterrupt.Status.PENDING)

    def in_order(self):
        """The order the graph asked in: by pause, then interrupt id, then request."""
        return self.order_by("created_at", "interrupt_id", "position")

    def for_reviewer(self, user):
        if user.is_superuser or user.has_perm("hitl.review_all"):
            return self
        return self.filter(reviewer_group__in=user.groups.all())


class HumanInterrupt(models.Model):
    """One action awaiting a person; a LangGraph interrupt with N requests has N rows."""

    class Kind(models.TextChoices):
        HUMAN_INTERRUPT = "human_interrupt"  # one Agent Inbox HumanInterrupt dict
        HUMAN_INTERRUPT_LIST = "human_interrupt_list"  # a list of them
        HITL_REQUEST = "hitl_request"  # langchain HumanInTheLoopMiddleware, batched
        TOOL_APPROVAL = "tool_approval"  # langchain HumanInTheLoopMiddleware, per call
        RAW = "raw"  # any other JSON value

    class Status(models.TextChoices):
        PENDING = "pending"
        RESOLVED = "resolved"
        EXPIRED = "expired"
        CANCELLED = "cancelled"

    class ResponseType(models.TextChoices):
        ACCEPT = "accept"
        IGNORE = "ignore"
        RESPONSE = "response"
        EDIT = "edit"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="interrupts")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="interrupts")
    interrupt_id = models.CharField(max_length=128)
    # Position of this request inside the interrupt value (lists, batched middleware).
    position = models.PositiveSmallIntegerField(default=0)
    kind = models.CharField(max_length=24, choices=Kind.choices)
    raw_value = OrderedJSONField(null=True, blank=True)
    response_schema = OrderedJSONField(null=True, blank=True)
    action = models.CharField(max_length=200, blank=True)
    args = OrderedJSONField(default=dict, blank=True)
    args_schema = OrderedJSONField(null=True, blank=True)
    description = models.TextField(blank=True)
    allow_accept = models.BooleanField(default=False)
    allow_edit = models.BooleanField(default=False)
    allow_respond = models.BooleanField(default=False)
    allow_ignore = models.BooleanField(default=False)
    reviewer_group = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    response_type = models.CharField(max_length=10, choices=ResponseType.choices, blank=True)
    response_args = OrderedJSONField(null=True, blank=True)
    responded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    responded_at = models.DateTimeField(null=True, blank=True)
    # A decision made with a grace period: until then its maker may undo it, and the
    # thread is not resumed. Cleared when the grace period ends (or on undo).
    undo_until = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    # What happens at expires_at: auto-ignore, auto-respond with expiry_message, or
    # escalate to escalate_to. Blank means the reviewer group's policy applies.
    expiry_policy = models.CharField(max_length=10, choices=ExpiryPolicy.choices, blank=True)
    expiry_message = models.TextField(blank=True)
    escalate_to = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    escalation_count = models.PositiveSmallIntegerField(default=0)
    # Four-eyes: distinct approvals needed (see core/quorum.py); the policy is a snapshot
    # of the group's and the interrupt's settings taken when the row was made.
    approvals_required = models.PositiveSmallIntegerField(default=1)
    approval_policy = models.JSONField(default=dict, blank=True)
    approval_round = models.PositiveIntegerField(default=0)
    # The args under approval after an edit (None: the proposed args).
    approval_args = models.JSONField(null=True, blank=True)
    # "name vN" when a rule made the decision (responded_by is then empty).
    decided_by_rule = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = HumanInterruptQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "interrupt_id", "position"], name="interrupt_unique_per_thread"
            ),
        ]
        indexes = [
            # reviewer inbox: pending items of my groups, newest first
            models.Index(
                fields=["status", "reviewer_group", "-created_at"], name="interrupt_inbox"
            ),
            # "all pending", newest first, for review_all reviewers
            models.Index(fields=["status", "-created_at"], name="interrupt_status_created"),
            # expiry sweep
            models.Index(
                fields=["expires_at"], name="interrupt_expiry", condition=Q(status="pending")
            ),
            # grace-period release sweep: decisions whose undo window has ended
            models.Index(
                fields=["undo_until"],
                name="interrupt_undo_due",
                condition=Q(undo_until__isnull=False),
            ),
        ]
        permissions = [("review_all", "Can review interrupts of every reviewer group")]

    def __str__(self) -> str:
        return f"{self.action or self.kind} ({self.status})"

    @property
    def allowed_types(self) -> list[str]:
        flags = [
            (self.allow_accept, "accept"),
            (self.allow_edit, "edit"),
            (self.allow_respond, "response"),
            (self.allow_ignore, "ignore"),
        ]
        return [name for allowed, name in flags if allowed]


class Artifact(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="artifacts")
    # Virtual path, e.g. /mnt/user-data/outputs/report.csv
    path = models.CharField(max_length=500)
    size = models.BigIntegerField(default=0)
    mime = models.CharField(max_length=100, blank=True)
    sha256 = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["thread", "path"], name="artifact_unique_path"),
        ]

    def __str__(self) -> str:
        return self.path


class ReviewerGroupPolicy(models.Model):
    """Per reviewer group defaults: how long interrupts wait and what happens then."""

    group = models.OneToOneField(Group, on_delete=models.CASCADE, related_name="hitl_policy")
    expire_after_seconds = models.PositiveIntegerField(null=True, blank=True)
    expiry_policy = models.CharField(
        max_length=10, choices=ExpiryPolicy.choices, default=ExpiryPolicy.IGNORE
    )
    expiry_message = models.TextField(blank=True)
    escalate_to = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Four-eyes: N distinct approvals (1 = a single reviewer decides, as before).
    approvals_required = models.PositiveSmallIntegerField(default=1)
    approval_groups = models.ManyToManyField(
        Group,
        blank=True,
        related_name="+",
        help_text="If any are chosen, approvers must belong to one of these groups.",
    )
    allow_self_approval = models.BooleanField(
        default=False, help_text="The thread's requester may approve its interrupts."
    )
    reject_ends = models.BooleanField(
        default=True, help_text="Any ignore or respond ends the interrupt at once."
    )
    rule_counts_as_approval = models.BooleanField(
        default=False, help_text="A live rule that accepts counts as (at most) one approval."
    )

    class Meta:
        verbose_name_plural = "reviewer group policies"

    def __str__(self) -> str:
        return f"policy for {self.group}"


class AppendOnly(Exception):
    """Raised when code tries to change or delete an audit event."""


class AuditEventQuerySet(models.QuerySet):
    # Deleting a thread/run/user nulls the foreign keys through the base manager, so
    # history survives; only this queryset (the app's way in) refuses changes.
    def update(self, **kwargs):
        raise AppendOnly("Audit events are append-only.")

    def delete(self):
        raise AppendOnly("Audit events are append-only.")


class AuditEvent(models.Model):
    """Append-only record of every transition; never edited or deleted by the app."""

    class Kind(models.TextChoices):
        INTERRUPT_CREATED = "interrupt.created"
        INTERRUPT_ASSIGNED = "interrupt.assigned"
        INTERRUPT_ANSWERED = "interrupt.answered"
        INTERRUPT_UNDONE = "interrupt.undone"
        INTERRUPT_EXPIRED = "interrupt.expired"
        INTERRUPT_ESCALATED = "interrupt.escalated"
        INTERRUPT_CANCELLED = "interrupt.cancelled"
        INTERRUPT_APPROVED = "interrupt.approved"
        INTERRUPT_RULE_FAILED = "interrupt.rule_failed"
        INTERRUPT_CLAIMED = "interrupt.claimed"
        INTERRUPT_UNCLAIMED = "interrupt.unclaimed"
        INTERRUPT_SNOOZED = "interrupt.snoozed"
        RUN_STARTED = "run.started"
        RUN_FINISHED = "run.finished"
        RUN_FAILED = "run.failed"
        RUN_RETRIED = "run.retried"
        RUN_CANCELLED = "run.cancelled"
        RUN_DELETED = "run.deleted"
        THREAD_CANCELLED = "thread.cancelled"
        THREAD_DELETED = "thread.deleted"
        THREAD_COPIED = "thread.copied"
        THREAD_STATE_UPDATED = "thread.state_updated"
        THREAD_FORKED = "thread.forked"
        ASSISTANT_CREATED = "assistant.created"
        ASSISTANT_UPDATED = "assistant.updated"
        ASSISTANT_DELETED = "assistant.deleted"
        CRON_CREATED = "cron.created"
        CRON_FIRED = "cron.fired"
        CRON_DELETED = "cron.deleted"

    id = models.BigAutoField(primary_key=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    kind = models.CharField(max_length=32, choices=Kind.choices)
    thread = models.ForeignKey(
        Thread, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_events"
    )
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    interrupt = models.ForeignKey(
        HumanInterrupt,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="audit_events",
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # json, not jsonb: the trail shows proposed arguments in the order the graph wrote them.
    data = OrderedJSONField(default=dict, blank=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        indexes = [
            # a thread's audit trail in order
            models.Index(fields=["thread", "created_at"], name="audit_thread_created"),
            # analytics: decisions by kind over time
            models.Index(fields=["kind", "created_at"], name="audit_kind_created"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} at {self.created_at:%Y-%m-%d %H:%M:%S}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnly("Audit events are append-only.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnly("Audit events are append-only.")


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
        return f"{self.event} -> {self.url} ({self.status})"


class ToolExecution(models.Model):
    """The ledger of approved tool calls: at most one execution per decision.

    Written (committed) before the tool runs and completed after, so a redelivered
    run that reaches the same approved call finds it here and does not call it again.
    """

    class Status(models.TextChoices):
        STARTED = "started"
        DONE = "done"

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="tool_executions")
    interrupt_id = models.CharField(max_length=64)
    tool_call_id = models.CharField(max_length=200)
    tool = models.CharField(max_length=200)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.STARTED)
    # The tool's message as the model saw it: {"content": ..., "status": ...}.
    result = models.JSONField(null=True, blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "interrupt_id", "tool_call_id"], name="tool_execution_once"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool} ({self.status})"


# Loaded here so Django registers them with the app.
from hitl.core.models.approvals import (  # noqa: E402
    EmailActionLink,
    SlackMessage,
    SlackRequestSeen,
    SlackUserLink,
)

# Notification settings and outbox, claims and snoozes, in their own modules.
from hitl.core.models.assistants import Assistant, AssistantVersion, Cron, CronFire  # noqa: E402
from hitl.core.models.claims import InterruptClaim, InterruptSnooze  # noqa: E402
from hitl.core.models.notify import (  # noqa: E402
    GroupNotificationSettings,
    InterruptReminder,
    Notification,
    NotificationPreference,
)
from hitl.core.models.policy import Approval, DecisionRule, RuleHit  # noqa: E402
from hitl.core.models.remote import REMOTE_GRAPH_PREFIX, RemoteDeployment, RemoteThread  # noqa: E402
from hitl.core.models.sso import SsoIdentity  # noqa: E402
from hitl.core.models.tokens import ApiToken  # noqa: E402

__all__ = [
    "ApiToken",
    "Assistant",
    "AssistantVersion",
    "Cron",
    "CronFire",
    "Approval",
    "Artifact",
    "AuditEvent",
    "DecisionRule",
    "EmailActionLink",
    "GroupNotificationSettings",
    "ExpiryPolicy",
    "HumanInterrupt",
    "InterruptClaim",
    "InterruptReminder",
    "InterruptSnooze",
    "Notification",
    "NotificationPreference",
    "REMOTE_GRAPH_PREFIX",
    "RemoteDeployment",
    "RemoteThread",
    "ReviewerGroupPolicy",
    "Run",
    "RuleHit",
    "SlackMessage",
    "SlackRequestSeen",
    "SlackUserLink",
    "SsoIdentity",
    "Thread",
    "ToolExecution",
    "WebhookDelivery",
]
