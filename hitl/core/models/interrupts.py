"""Human interrupts: one action awaiting a person, and what happens when it expires."""

import uuid

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q

from agents.contract import response_types
from hitl.core.models.base import QuerySet
from hitl.core.models.fields import OrderedJSONField
from hitl.core.models.runs import Run
from hitl.core.models.threads import Thread


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
    def answered_by(self) -> str:
        """Who answered, in words: the reviewer's username, "rule <name vN>", or ""."""
        # A rule's decision leaves responded_by empty; an expired item names the operator
        # who expired it, or no one when the system did.
        if self.responded_by:
            return self.responded_by.get_username()
        return f"rule {self.decided_by_rule}" if self.decided_by_rule else ""

    @property
    def allowed_types(self) -> list[str]:
        return response_types(self)
