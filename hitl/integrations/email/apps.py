from django.apps import AppConfig


class EmailConfig(AppConfig):
    """E-mail approvals (no models of its own: its row is in the `hitl` app)."""

    name = "hitl.integrations.email"
    label = "hitl_email"
    verbose_name = "HITL e-mail approvals"

    def ready(self) -> None:
        from hitl.core.decisions.email_links import email_links_prune
        from hitl.integrations.email import messages, transport
        from hitl.ops.notifications import Channel, channel_register

        channel_register(
            "email", Channel(render=messages.render, send=transport.send, sweep=email_links_prune)
        )
