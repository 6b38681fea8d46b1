"""Celery reads Django's CELERY_ settings from one snapshot (hitl/celery.py)."""

from __future__ import annotations

from django.conf import settings

from hitl.celery import DjangoCelerySettings, app


def test_celery_sees_every_celery_setting_of_django_under_its_own_name():
    names = [name for name in dir(settings) if name.startswith("CELERY_")]
    assert "CELERY_TASK_ACKS_LATE" in names and len(names) > 10
    for name in names:
        celery_name = name.removeprefix("CELERY_").lower()
        assert app.conf[celery_name] == getattr(settings, name), name
    # The guarantees the worker's runs rest on, as Celery reads them.
    assert app.conf.task_acks_late is True and app.conf.task_reject_on_worker_lost is True
    assert app.conf.worker_prefetch_multiplier == 1
    assert app.conf.task_routes == {"hitl.tasks.run_execute": {"queue": "runs"}}
    # Celery's Django fixup reads this one under its Django name.
    assert app.conf.get("CELERY_DB_REUSE_MAX") == settings.CELERY_DB_REUSE_MAX


def test_the_snapshot_is_read_on_first_use_and_kept():
    snapshot = DjangoCelerySettings()
    assert snapshot._values is None  # nothing read when made (settings may not be ready)
    assert snapshot["task_default_queue"] == "default"
    first = snapshot._values
    assert first is not None and "task_default_queue" in snapshot and len(snapshot) == len(first)
    assert snapshot["task_default_queue"] == "default" and snapshot._values is first
