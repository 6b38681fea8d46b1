"""The Celery app: settings come from Django settings with the CELERY_ prefix."""

import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

from celery import Celery, signals

from agents.registry import import_target
from hitl import heap
from hitl.compat import kombu as compat_kombu

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl.settings")


class DjangoCelerySettings(Mapping):
    """Django's CELERY_ settings under Celery's own names, read from Django once, when
    Celery first asks (Django's settings are not ready when this module is imported).

    Celery reads its settings on every send and every task it runs, each through a chain
    of names; through Django's lazy settings object every name it does not find there
    costs an exception. A send cost 820 µs of CPU that way and 440-560 µs with this
    (bench: a loop of `send_task` to the local Redis). A changed Django setting is not
    seen by Celery afterwards, as its own settings would not be.
    """

    PREFIX = "CELERY_"
    # Read by Celery's Django fixup under its Django name.
    KEPT_AS_IS = ("CELERY_DB_REUSE_MAX",)

    def __init__(self) -> None:
        self._values: dict[str, Any] | None = None

    def _read(self) -> dict[str, Any]:
        if self._values is None:
            from django.conf import settings

            names = [name for name in dir(settings) if name.startswith(self.PREFIX)]
            values = {
                name.removeprefix(self.PREFIX).lower(): getattr(settings, name) for name in names
            }
            values.update(
                (name, getattr(settings, name)) for name in self.KEPT_AS_IS if name in names
            )
            self._values = values
        return self._values

    def __getitem__(self, key: str) -> Any:
        return self._read()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())


app = Celery("hitl")
app.config_from_object(DjangoCelerySettings())
# Task modules are listed in settings.CELERY_IMPORTS.
# Web processes publish runs and workers ack them: both with one Redis client per channel,
# and a delivery's unacked entry kept by one script call per write.
compat_kombu.reuse_sync_clients()
compat_kombu.scripted_unacked()


@signals.worker_ready.connect(weak=False, dispatch_uid="hitl-worker-ready-log")
def _log_ready(sender=None, **kwargs) -> None:
    """Say, once at INFO, that this worker takes runs, and which graphs it can load."""
    from django.conf import settings

    log = logging.getLogger("hitl.worker")
    loadable = []
    for name, target in sorted(settings.HITL_GRAPHS.items()):
        try:
            import_target(target)
        except Exception as exc:  # a module web can import but this worker cannot
            log.error("graph %s (%s) cannot be imported by this worker: %s", name, target, exc)
        else:
            loadable.append(name)
    queues = sorted(q.name for q in getattr(getattr(sender, "task_consumer", None), "queues", []))
    log.info(
        "HITL worker ready to take runs: %s (queues: %s; graphs: %s)",
        getattr(sender, "hostname", "worker"),
        ", ".join(queues) or "default",
        ", ".join(loadable),
    )


@signals.worker_ready.connect(weak=False, dispatch_uid="hitl-worker-heap")
@signals.worker_process_init.connect(weak=False, dispatch_uid="hitl-child-heap")
def _settle_heap(**kwargs) -> None:
    """Keep what the worker loaded out of the collector's walks (hitl/heap.py)."""
    heap.settle()


@signals.task_postrun.connect(weak=False, dispatch_uid="hitl-task-connection-back")
def _connection_back_to_pool(**kwargs) -> None:
    """Hand a task thread's pooled database connection back after each task.

    On the threads pool every task thread would otherwise keep the connection its last
    task took (Celery's Django fixup keeps connections across tasks), and a worker's
    dozens of threads would hold more than the pool has. Handing it back is cheap: the
    pool gives it out again without a check within a second.
    """
    from django.db import connection

    if (
        connection.connection is not None
        and connection.vendor == "postgresql"
        and not connection.in_atomic_block
    ):
        connection.close()


@signals.worker_init.connect(weak=False, dispatch_uid="hitl-worker-exit-fast")
def _exit_without_collecting(**kwargs) -> None:
    """Let a stopped worker exit once its runs are done, not seconds later.

    After the last atexit hook (the run engine's, the pools') nothing is left to clean
    up, yet interpreter finalization still runs full garbage collections over the whole
    heap: seconds for a worker that held dozens of runs (37 runs done in 6.9 s, the
    process gone at 18.8 s). Frozen, the heap is left to the OS. Registered at worker
    start, before any other hook, so it runs after all of them.
    """
    import atexit
    import gc

    atexit.register(gc.freeze)
