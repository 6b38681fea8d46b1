from django.apps import AppConfig


class CoreConfig(AppConfig):
    """The domain. Its label stays "hitl", so existing databases and migrations carry over."""

    name = "hitl.core"
    label = "hitl"
    verbose_name = "Human in the loop"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from hitl import logcontext

        # Carries request/thread/run ids from the web process into worker log lines.
        logcontext.connect_celery_signals()
