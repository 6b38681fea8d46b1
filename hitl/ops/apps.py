from django.apps import AppConfig


class OpsConfig(AppConfig):
    """Admin, maintenance, health and webhooks (no models of its own)."""

    name = "hitl.ops"
    label = "hitl_ops"
    verbose_name = "HITL operations"

    def ready(self) -> None:
        from hitl.core.live import events
        from hitl.ops import notifications, webhooks

        # Ended and paused runs with a webhook get a delivery row in the same transaction.
        events.subscribe(events.RUN_ENDED, webhooks.on_run_ended)
        # New pending items (and escalated ones) reach people by e-mail and Slack
        # (each channel's package in hitl/integrations/ registers how).
        events.subscribe(events.INTERRUPT_PENDING, notifications.on_interrupt_pending)
        from hitl.ops import assistants_admin, notify_admin  # noqa: F401 (register admins)
