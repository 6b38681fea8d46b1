from django.apps import AppConfig


class ReviewConfig(AppConfig):
    """The reviewer web app: pages, fragments, sockets and template tags (no models)."""

    name = "hitl.review"
    label = "hitl_review"
    verbose_name = "HITL reviewer app"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.contrib.auth.signals import user_logged_out
        from django.db.models.signals import post_save

        from hitl.core.live import events
        from hitl.review import fragments, socket_sessions

        # Rendered once where the interrupt is published, not in every web process.
        events.subscribe(events.INTERRUPT_PENDING, fragments.attach_inbox_row)
        # Sockets check their session: a logout or a new password closes them at once.
        user_logged_out.connect(socket_sessions.on_logged_out, dispatch_uid="hitl-socket-logout")
        post_save.connect(
            socket_sessions.on_user_saved, sender=get_user_model(), dispatch_uid="hitl-socket-user"
        )
