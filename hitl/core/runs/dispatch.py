"""Hand a run, or a decision's release, to whatever executes them (hitl/core/later.py)."""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.db import close_old_connections

from hitl.core.later import later
from hitl.core.models import Run

log = logging.getLogger(__name__)
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


# Celery tasks are sent by their names; the in-process executor and releaser live in
# rooms above this one and are handed over when the app is ready (hitl/core/apps.py).
RUN_TASK = "hitl.tasks.run_execute"
_local: dict[str, Callable[..., Any]] = {}


def use_local(*, run: Callable[..., Any], release: Callable[..., Any]) -> None:
    """Name what runs a run and releases a decision when this process executes runs."""
    _local["run"], _local["release"] = run, release


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _inprocess(run_id: Any) -> None:
    execute_run = _local["run"]
    close_old_connections()
    try:
        _, retry_after = execute_run(str(run_id), worker=f"inprocess-{worker_id()}")
        if retry_after:  # busy elsewhere, or the database was away: try again later
            later(RUN_TASK, str(run_id), countdown=retry_after, local=_submit, queues=True)
    except Exception:
        log.exception("run %s failed in-process", run_id)
    finally:
        close_old_connections()


def _submit(run_id: Any) -> None:
    """Queue a run on this process's run threads (the in-process form of RUN_TASK)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            # Each thread waits while its run streams on the process's run engine
            # (hitl/core/worker/engine.py): as many runs in flight as threads.
            _pool = ThreadPoolExecutor(
                max_workers=settings.HITL_INPROCESS_WORKERS, thread_name_prefix="hitl-run"
            )
    _pool.submit(_inprocess, run_id)


def enqueue_run(run_id: Any) -> None:
    """Send a run to its executor (hitl/core/later.py); called after the creating
    transaction commits.

    The run's dispatched_at was stamped with the transaction that queued it, so a
    successful send costs no write. A failed send clears the stamp: the run stays
    queued in the database and the reaper re-sends it.
    """
    if later(RUN_TASK, str(run_id), local=_submit, queues=True):
        return
    try:
        Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(dispatched_at=None)
    except Exception as db_exc:  # the stamp then ages: re-sent after REDISPATCH_AFTER
        log.warning("run %s: could not mark the failed send (%s)", run_id, db_exc)


RELEASE_TASK = "hitl.tasks.interrupt_release"


def schedule_release(interrupt_id: Any, seconds: float) -> None:
    """Release a decision when its grace period ends; called after the decision commits.

    Best effort: if the message is lost, the periodic sweep releases it anyway.
    """
    later(RELEASE_TASK, str(interrupt_id), countdown=seconds, local=_release)


def _release(interrupt_id: Any) -> None:
    _local["release"](interrupt_id=interrupt_id)
