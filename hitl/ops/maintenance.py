"""Periodic maintenance (celery beat): interrupt expiry, the run reaper, worker heartbeats.

Every sweep is safe to run concurrently on several workers: each item is handled in
its own transaction under a row lock and re-checked there.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from celery import current_app, shared_task, signals
from django.conf import settings
from django.db import close_old_connections
from django.db.models import Q
from django.utils import timezone

from hitl.compat import kombu as compat_kombu
from hitl.core import decisions, later
from hitl.core.db.connections import process_connections
from hitl.core.errors import ServiceError, is_transient
from hitl.core.live import redis as live_redis
from hitl.core.models import HumanInterrupt, Run
from hitl.core.remote.mirror import deployments_poll
from hitl.core.resources.crons import crons_fire
from hitl.ops import services as ops_services
from hitl.ops.notifications import notify_sweep

log = logging.getLogger(__name__)

SWEEP_BATCH = 200
# A queued run created this recently may still be on its way to the broker.
DISPATCH_GRACE_SECONDS = 10.0
HEARTBEAT_KEY = "hitl:worker:{}"
CONNECTIONS_KEY = "hitl:db-connections:{}"
HEARTBEAT_SECONDS = 10.0


def expire_due_interrupts(*, now: datetime | None = None, limit: int = SWEEP_BATCH) -> int:
    """Apply the expiry policy to pending interrupts whose deadline passed."""
    now = now or timezone.now()
    due = list(
        HumanInterrupt.objects.pending()
        .filter(expires_at__lte=now)
        .order_by("expires_at")
        .values_list("pk", flat=True)[:limit]
    )
    done = 0
    for pk in due:
        try:
            ops_services.interrupt_expire(interrupt_id=pk, now=now)
        except ServiceError as exc:  # answered or cancelled meanwhile: nothing to do
            log.info("interrupt %s not expired: %s", pk, exc.message)
        except Exception:
            log.exception("could not expire interrupt %s", pk)
        else:
            done += 1
    return done


def _count_done(pks: list[Any], action: Callable[[Any], Any], what: str) -> int:
    """Apply `action` to each run id; one failure is logged and does not stop the sweep."""
    done = 0
    for pk in pks:
        try:
            if action(pk):
                done += 1
        except Exception:
            log.exception("could not %s run %s", what, pk)
    return done


def reap_runs(*, now: datetime | None = None, limit: int = SWEEP_BATCH) -> dict[str, int]:
    """Requeue running runs whose lease expired; re-send queued runs the broker lost."""
    now = now or timezone.now()
    expired = list(
        Run.objects.filter(status=Run.Status.RUNNING, lease_expires_at__lt=now)
        .order_by("lease_expires_at")
        .values_list("pk", flat=True)[:limit]
    )
    requeued = _count_done(
        expired, lambda pk: ops_services.run_requeue(run_id=pk, now=now), "requeue"
    )

    if not _broker_reachable():
        # Each failed send blocks for seconds; try again on the next sweep instead.
        log.warning("broker unreachable: queued runs will be re-sent on a later sweep")
        return {"requeued": requeued, "resent": 0}
    stale_before = now - timedelta(seconds=settings.HITL_REDISPATCH_AFTER)
    grace = now - timedelta(seconds=DISPATCH_GRACE_SECONDS)
    stale = list(
        Run.objects.filter(status=Run.Status.QUEUED)
        .filter(
            # enqueue failed (broker down) ...
            Q(dispatched_at__isnull=True, created_at__lt=grace)
            # ... or the message was sent long ago and never picked up (broker lost it)
            | Q(dispatched_at__lt=stale_before)
        )
        .order_by("created_at")
        .values_list("pk", flat=True)[:limit]
    )
    resent = _count_done(
        stale,
        lambda pk: ops_services.run_redispatch(run_id=pk, stale_before=stale_before),
        "re-send",
    )
    return {"requeued": requeued, "resent": resent}


def _broker_reachable() -> bool:
    if not later.uses_broker():
        return True
    try:
        with current_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except Exception:
        return False
    return True


@shared_task(name="hitl.maintenance.expire_interrupts", ignore_result=True, time_limit=120)
def expire_interrupts_task() -> int:
    close_old_connections()
    with _skip_sweep_on_outage("expiry"):
        count = expire_due_interrupts()
        if count:
            log.info("expired %d interrupts", count)
        return count
    return 0


@shared_task(name="hitl.maintenance.reap_runs", ignore_result=True, time_limit=120)
def reap_runs_task() -> dict[str, int]:
    close_old_connections()
    with _skip_sweep_on_outage("reaper"):
        result = reap_runs()
        # Decisions whose grace period ended without their release task (a lost message).
        result["released"] = decisions.interrupt_release_due()
        if any(result.values()):
            log.info("reaper: %s", result)
        return result
    return {}


@shared_task(name="hitl.maintenance.fire_crons", ignore_result=True, time_limit=120)
def fire_crons_task() -> int:
    """Start the runs of due crons (each tick once, however many beats call this)."""
    close_old_connections()
    with _skip_sweep_on_outage("cron"):
        count = crons_fire()
        if count:
            log.info("crons started %d runs", count)
        return count
    return 0


@contextlib.contextmanager
def _skip_sweep_on_outage(name: str):
    """A sweep that meets a database or broker outage waits for the next one (seconds)."""
    try:
        yield
    except Exception as exc:
        if not is_transient(exc):
            raise
        log.warning("%s sweep skipped: %s", name, exc)
        close_old_connections()


# --- the embedded default: no beat, so the web process sweeps --------------------------------

_sweeper_lock = threading.Lock()
_sweeper_started = False


def start_inprocess_sweeper() -> None:
    """Run the periodic sweeps in this process when runs execute in-process (no beat)."""
    global _sweeper_started
    if _sweeper_started or later.executor() != later.INPROCESS:
        return
    with _sweeper_lock:
        if _sweeper_started:
            return
        _sweeper_started = True
    threading.Thread(target=_sweep_forever, name="hitl-sweeper", daemon=True).start()


def _sweep_forever() -> None:
    next_expiry = next_reap = next_remote = next_cron = 0.0
    while True:
        now = time.monotonic()
        try:
            if now >= next_remote:
                next_remote = now + settings.HITL_REMOTE_POLL_SECONDS
                deployments_poll()  # a no-op without remote deployments
            if now >= next_cron:
                next_cron = now + settings.HITL_CRON_SWEEP_SECONDS
                crons_fire()
            if now >= next_expiry:
                next_expiry = now + settings.HITL_EXPIRY_SWEEP_SECONDS
                expire_due_interrupts()
                notify_sweep()  # reminders before expiry, messages whose timer was lost
            if now >= next_reap:
                next_reap = now + settings.HITL_REAPER_SECONDS
                reap_runs()
                decisions.interrupt_release_due()
        except Exception:  # a bad sweep must not end the sweeping
            log.exception("in-process sweep failed")
        finally:
            close_old_connections()
        wake = min(next_expiry, next_reap, next_remote, next_cron)
        time.sleep(max(0.1, wake - time.monotonic()))


# --- broker outages ------------------------------------------------------------------------


@signals.worker_init.connect(weak=False, dispatch_uid="hitl-kombu-guard")
def _guard_stale_channels(**kwargs: Any) -> None:
    """Keep a worker alive when Redis goes away while runs are in flight."""
    compat_kombu.guard_stale_channels()


# --- worker heartbeats --------------------------------------------------------------------


class _WorkerHeartbeat(threading.Thread):
    """Writes `hitl:worker:<name>` = unix time every few seconds, with a TTL, and the
    process's Postgres connections (`hitl:db-connections:<name>`, JSON).

    /metrics reports them; a worker that dies stops beating and its keys expire. A
    prefork child reports its connections alone (`alive=False`), under its own name.
    """

    def __init__(self, name: str, *, alive: bool = True):
        super().__init__(name="hitl-worker-heartbeat", daemon=True)
        self.key = HEARTBEAT_KEY.format(name) if alive else None
        self.connections_key = CONNECTIONS_KEY.format(name)
        self.stop_event = threading.Event()

    def beat(self, client: Any) -> None:
        ttl = int(HEARTBEAT_SECONDS * 3)
        pipe = client.pipeline(transaction=False)
        if self.key:
            pipe.set(self.key, f"{time.time():.3f}", ex=ttl)
        pipe.set(self.connections_key, json.dumps(process_connections()), ex=ttl)
        pipe.execute()

    def run(self) -> None:
        client = live_redis.client()
        while True:
            try:
                self.beat(client)
            except Exception as exc:  # Redis restarting: keep trying, quietly
                log.debug("worker heartbeat failed: %s", exc)
            if self.stop_event.wait(HEARTBEAT_SECONDS):
                break
        with contextlib.suppress(Exception):
            client.delete(*filter(None, (self.key, self.connections_key)))


_heartbeat: _WorkerHeartbeat | None = None
_worker_name = f"celery@{socket.gethostname()}"


@signals.worker_ready.connect(weak=False, dispatch_uid="hitl-worker-heartbeat-start")
def _start_heartbeat(sender: Any = None, **kwargs: Any) -> None:
    global _heartbeat
    if not settings.REDIS_URL:
        return
    name = getattr(sender, "hostname", None) or f"{socket.gethostname()}:{os.getpid()}"
    _heartbeat = _WorkerHeartbeat(name)
    _heartbeat.start()


@signals.worker_init.connect(weak=False, dispatch_uid="hitl-worker-name")
def _remember_name(sender: Any = None, **kwargs: Any) -> None:
    """Keep the worker's name for its prefork children (forked after this)."""
    global _worker_name
    _worker_name = getattr(sender, "hostname", None) or _worker_name


@signals.worker_process_init.connect(weak=False, dispatch_uid="hitl-child-connections")
def _report_child_connections(**kwargs: Any) -> None:
    """A prefork child holds pools of its own: it reports them under `<worker>/<pid>`."""
    global _heartbeat
    if not settings.REDIS_URL:
        return
    _heartbeat = _WorkerHeartbeat(f"{_worker_name}/{os.getpid()}", alive=False)
    _heartbeat.start()


@signals.worker_shutdown.connect(weak=False, dispatch_uid="hitl-worker-heartbeat-stop")
@signals.worker_process_shutdown.connect(weak=False, dispatch_uid="hitl-child-connections-stop")
def _stop_heartbeat(**kwargs: Any) -> None:
    if _heartbeat is not None:
        _heartbeat.stop_event.set()
        _heartbeat.join(timeout=3)
