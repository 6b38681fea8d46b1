"""Reviewer group defaults: expiry and four-eyes."""

from django.contrib.auth.models import Group
from django.db import models

from hitl.core.models.interrupts import ExpiryPolicy


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
