from django.apps import AppConfig


class OpsConfig(AppConfig):
    """Admin, maintenance, health and webhooks (no models of its own)."""

    name = "hitl.ops"
    label = "hitl_ops"
    verbose_name = "HITL operations"

    def ready(self) -> None:
        from hitl.core import events
        from hitl.ops import webhooks

        # Ended and paused runs with a webhook get a delivery row in the same transaction.
        events.subscribe(events.RUN_ENDED, webhooks.on_run_ended)
