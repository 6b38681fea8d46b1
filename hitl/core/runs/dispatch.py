"""Hand a run to whatever executes runs: Celery workers, or this process."""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import close_old_connections

from hitl.core.errors import is_transient
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
            timer = threading.Timer(retry_after, lambda: _pool.submit(_inprocess, run_id))
            timer.daemon = True
            timer.start()
    except Exception:
        log.exception("run %s failed in-process", run_id)
    finally:
        close_old_connections()


def enqueue_run(run_id: Any) -> None:
    """Send a run to its executor; called after the creating transaction commits.

    The run's dispatched_at was stamped with the transaction that queued it, so a
    successful send costs no write. A failed send is logged, not raised, and clears
    the stamp: the run stays queued in the database and the reaper re-sends it.
    """
    executor = settings.HITL_EXECUTOR
    if executor == "manual":  # the caller drives runs itself (scripts, tests)
        return
    if executor == "celery":
        try:
            current_app.send_task(RUN_TASK, args=[str(run_id)], retry=False)
        except Exception as exc:
            if is_transient(exc):  # the broker is away: expected, no traceback
                log.warning("could not enqueue run %s (%s); the reaper re-sends it", run_id, exc)
            else:
                log.exception("could not enqueue run %s; the reaper will re-send it", run_id)
            try:
                Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(dispatched_at=None)
            except Exception as db_exc:  # the stamp then ages: re-sent after REDISPATCH_AFTER
                log.warning("run %s: could not mark the failed send (%s)", run_id, db_exc)
            return
        return
    global _pool
    with _pool_lock:
        if _pool is None:
            # Each thread waits while its run streams on the process's run engine
            # (hitl/core/worker/engine.py): as many runs in flight as threads.
            _pool = ThreadPoolExecutor(
                max_workers=settings.HITL_INPROCESS_WORKERS, thread_name_prefix="hitl-run"
            )
    _pool.submit(_inprocess, run_id)


RELEASE_TASK = "hitl.tasks.interrupt_release"


def schedule_release(interrupt_id: Any, seconds: float) -> None:
    """Release a decision when its grace period ends; called after the decision commits.

    Best effort: if the message is lost, the periodic sweep releases it anyway.
    """
    executor = settings.HITL_EXECUTOR
    if executor == "manual":
        return
    if executor == "celery":
        try:
            current_app.send_task(
                RELEASE_TASK, args=[str(interrupt_id)], countdown=seconds, retry=False
            )
        except Exception as exc:
            log.warning("could not schedule the release of %s (%s)", interrupt_id, exc)
        return
    timer = threading.Timer(seconds, _release_inprocess, args=[interrupt_id])
    timer.daemon = True
    timer.start()


def _release_inprocess(interrupt_id: Any) -> None:
    interrupt_release = _local["release"]
    close_old_connections()
    try:
        interrupt_release(interrupt_id=interrupt_id)
    except Exception:
        log.exception("releasing %s failed; the sweep tries again", interrupt_id)
    finally:
        close_old_connections()
