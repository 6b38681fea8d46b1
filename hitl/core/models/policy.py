"""Four-eyes approvals and rule-based automatic decisions (loaded by models/__init__.py)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q


class Approval(models.Model):
    """One approval toward an interrupt's quorum (N distinct approvals of the same args).

    `round` counts edits: an edit starts a new round, so approvals of earlier rounds
    (of other args) no longer count.
    """

    interrupt = models.ForeignKey(
        "hitl.HumanInterrupt", on_delete=models.CASCADE, related_name="approvals"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Set when a rule counted as one approval (only where the policy lets it).
    rule = models.ForeignKey(
        "hitl.DecisionRule", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    rule_label = models.CharField(max_length=150, blank=True)
    round = models.PositiveIntegerField(default=0)
    args = models.JSONField(null=True, blank=True)
    edited = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            # One person approves once per round; the deciding lock makes this a backstop.
            models.UniqueConstraint(
                fields=["interrupt", "user", "round"],
                name="approval_once_per_round",
                condition=Q(user__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        who = self.rule_label or (self.user.get_username() if self.user else "?")
        return f"approval by {who} (round {self.round})"


class DecisionRule(models.Model):
    """An automatic decision: matching interrupts are accepted, ignored or answered."""

    class Mode(models.TextChoices):
        OFF = "off", "off"
        DRY_RUN = "dry_run", "dry run (record only)"
        LIVE = "live", "live (decides)"

    class Outcome(models.TextChoices):
        ACCEPT = "accept", "accept"
        IGNORE = "ignore", "ignore"
        RESPOND = "respond", "respond with a text"

    name = models.SlugField(max_length=100, unique=True)
    # Bumped whenever what the rule matches or decides changes; hits and the audit
    # trail name the version that made them.
    version = models.PositiveIntegerField(default=1, editable=False)
    mode = models.CharField(max_length=8, choices=Mode.choices, default=Mode.DRY_RUN)
    priority = models.PositiveIntegerField(
        default=100, help_text="Lower runs first; the first live rule that matches decides."
    )
    graph = models.CharField(max_length=100, blank=True, help_text="Blank: any graph.")
    action = models.CharField(
        max_length=200,
        blank=True,
        help_text="Tool/action name; shell-style wildcards (delete_*). Blank: any action.",
    )
    reviewer_group = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    condition = models.TextField(
        blank=True,
        help_text="A CEL expression over args, action, graph and group, e.g. "
        'args.to.endsWith("@ourcompany.com"). Blank: always.',
    )
    outcome = models.CharField(max_length=8, choices=Outcome.choices)
    response_text = models.TextField(blank=True, help_text="The answer sent with respond.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    VERSIONED_FIELDS = (
        "graph",
        "action",
        "reviewer_group_id",
        "condition",
        "outcome",
        "response_text",
    )

    class Meta:
        ordering = ["priority", "id"]
        indexes = [
            # the evaluator: active rules in precedence order
            models.Index(fields=["mode", "priority", "id"], name="rule_mode_priority"),
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            old = DecisionRule.objects.filter(pk=self.pk).values(*self.VERSIONED_FIELDS).first()
            if old and any(old[f] != getattr(self, f) for f in self.VERSIONED_FIELDS):
                self.version += 1
        super().save(*args, **kwargs)

    @property
    def label(self) -> str:
        return f"{self.name} v{self.version}"


class RuleHit(models.Model):
    """A rule matched an interrupt: what it decided (live) or would have (dry run)."""

    rule = models.ForeignKey(DecisionRule, on_delete=models.CASCADE, related_name="hits")
    rule_version = models.PositiveIntegerField()
    interrupt = models.ForeignKey(
        "hitl.HumanInterrupt", on_delete=models.CASCADE, related_name="rule_hits"
    )
    mode = models.CharField(max_length=8, choices=DecisionRule.Mode.choices)
    outcome = models.CharField(max_length=8, choices=DecisionRule.Outcome.choices)
    # Live only: it decided (or counted as an approval); else why not (config, four-eyes).
    applied = models.BooleanField(default=False)
    skipped = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            # admin: a rule's hits, newest first
            models.Index(fields=["rule", "-created_at"], name="rulehit_rule_created"),
        ]

    def __str__(self) -> str:
        return f"{self.rule_id} {self.mode} {self.outcome}"
