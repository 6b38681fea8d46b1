from django.apps import AppConfig


class ReviewConfig(AppConfig):
    """The reviewer web app: pages, fragments, sockets and template tags (no models)."""

    name = "hitl.review"
    label = "hitl_review"
    verbose_name = "HITL reviewer app"

    def ready(self) -> None:
        from hitl.core.live import events
        from hitl.review import fragments

        # Rendered once where the interrupt is published, not in every web process.
        events.subscribe(events.INTERRUPT_PENDING, fragments.attach_inbox_row)
