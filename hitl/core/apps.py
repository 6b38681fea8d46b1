from django.apps import AppConfig


class CoreConfig(AppConfig):
    """The domain. Its label stays "hitl", so existing databases and migrations carry over."""

    name = "hitl.core"
    label = "hitl"
    verbose_name = "Human in the loop"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from hitl import logcontext
        from hitl.compat import redis_asyncio
        from hitl.core.access import confcache
        from hitl.core.db import json_contains
        from hitl.core.db.audit_guard import install_sqlite_function
        from hitl.core.decisions import interrupt_release
        from hitl.core.later import executor
        from hitl.core.remote.deliver import resume_deliver
        from hitl.core.runs import dispatch
        from hitl.core.worker import execute

        # A mistyped executor setting stops every process at startup, not at the first run.
        executor()

        # SQLite's audit triggers ask this function whether maintenance may delete rows.
        connection_created.connect(install_sqlite_function, dispatch_uid="hitl-audit-guard")
        # SQLite's side of JSON containment (metadata filters), as PostgreSQL's `@>`.
        connection_created.connect(
            json_contains.install_sqlite_function, dispatch_uid="hitl-json-contains"
        )

        # A cancelled Redis command ends even when the cancellation meets its write.
        redis_asyncio.keep_cancellations()

        # Carries request/thread/run ids from the web process into worker log lines.
        logcontext.connect_celery_signals()

        # Cached groups, policies and rules are dropped when one of them changes.
        confcache.connect_signals()

        # Runs executed in this process (the embedded default) go to the worker's engine.
        dispatch.use_local(run=execute.execute_run, release=interrupt_release)

        # Resume runs of threads mirrored from another deployment are delivered there.
        execute.use_remote(deliver=resume_deliver)
