"""The audit record: append-only events of every transition."""

from django.conf import settings
from django.db import models

from hitl.core.models.fields import OrderedJSONField
from hitl.core.models.interrupts import HumanInterrupt
from hitl.core.models.runs import Run
from hitl.core.models.threads import Thread


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
        CRON_DISABLED = "cron.disabled"
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
