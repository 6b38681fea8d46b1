"""The ledger of approved tool calls: at most one execution per decision."""

from django.db import models

from hitl.core.models.threads import Thread


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
