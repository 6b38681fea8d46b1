from django.apps import AppConfig


class SlackConfig(AppConfig):
    """Slack approvals (no models of its own: its rows are in the `hitl` app)."""

    name = "hitl.integrations.slack"
    label = "hitl_slack"
    verbose_name = "HITL Slack approvals"

    def ready(self) -> None:
        from hitl.core.live import events
        from hitl.integrations.slack import messages, transport, updates
        from hitl.ops.notifications import Channel, channel_register

        channel_register(
            "slack",
            Channel(
                render=messages.render,
                send=transport.send,
                listed=updates.slack_message_track,
            ),
        )
        # Slack messages listing an item show its decision, whoever made it and where.
        events.subscribe(events.INTERRUPT_CHANGED, updates.on_interrupt_changed)
