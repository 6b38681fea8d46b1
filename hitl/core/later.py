"""What "later" means: the one place that reads HITL_EXECUTOR and sends work off the
caller's path (runs, decision releases, webhook deliveries, notifications, Slack updates).

One meaning per executor, whatever the work:

- ``celery``: the task goes to the broker by name. A failed send is logged (a warning
  when the broker is away, a traceback otherwise) and reported as False; the work's row
  stays in the database and its sweep sends it again (the reaper for runs and releases,
  the notification sweep, a webhook's pending delivery).
- ``inprocess`` (the embedded default): `local` runs on a daemon thread of this process,
  after `countdown` seconds, with its own database connection; a `local` that only hands
  the work to a queue of its own (`queues=True`, a run to the run threads) is called at
  once on the caller's thread when there is no countdown.
- ``manual`` (scripts, tests): nothing is sent. The send is held in this process and the
  caller drives the work itself: `run_held()` runs what is held, in the caller's thread
  (the newest HELD_MAX sends are kept).
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from celery import current_app
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import close_old_connections, connections

from hitl.core.errors import is_transient

log = logging.getLogger(__name__)

CELERY, INPROCESS, MANUAL = "celery", "inprocess", "manual"
EXECUTORS = (CELERY, INPROCESS, MANUAL)


def executor() -> str:
    """The executor setting, refused loudly when it is not one of EXECUTORS."""
    value = settings.HITL_EXECUTOR
    if value not in EXECUTORS:
        allowed = ", ".join(EXECUTORS)
        raise ImproperlyConfigured(f"HITL_EXECUTOR={value!r} is not one of: {allowed}.")
    return value


def uses_broker() -> bool:
    """Whether work goes through Celery's broker (and beat runs the sweeps)."""
    return executor() == CELERY


class Held(NamedTuple):
    """A send the manual executor kept for its caller."""

    task: str
    args: tuple[Any, ...]
    countdown: float
    local: Callable[..., Any] | None


# Bounded: a long-lived manual process (a benchmark server) that never drives its held
# work must not grow without end; the oldest sends are dropped first.
HELD_MAX = 10_000
_held: collections.deque[Held] = collections.deque(maxlen=HELD_MAX)
_held_lock = threading.Lock()


def later(
    task: str,
    *args: Any,
    countdown: float = 0,
    local: Callable[..., Any] | None = None,
    queues: bool = False,
) -> bool:
    """Have `task` (a Celery task name) run with `args` after `countdown` seconds.

    `local(*args)` is what does the work in this process (inprocess, and manual's
    `run_held`); with `queues` it only queues it and returns at once (it touches no
    database), so it needs no thread of its own. Never raises on a failed send; returns
    False then, True otherwise. Call it after the commit that recorded the work (the
    task re-reads its rows).
    """
    kind = executor()
    if kind == MANUAL:
        with _held_lock:
            _held.append(Held(task, args, countdown, local))
        return True
    if kind == CELERY:
        try:
            # The args are ids: their repr is the log's, without Celery's saferepr walk.
            # A task goes to its queue by name (the default exchange), and on Redis a
            # queue is the list its first push makes: nothing to declare per send (a
            # worker declares what it consumes). 544 -> 486 µs per send to a local Redis.
            ids = list(args)
            current_app.send_task(
                task,
                args=ids,
                countdown=countdown,
                retry=False,
                argsrepr=repr(ids),
                kwargsrepr="{}",
                declare=[],
            )
        except Exception as exc:
            if is_transient(exc):  # the broker is away: expected, no traceback
                log.warning("could not send %s%r (%s); its sweep sends it again", task, args, exc)
            else:
                log.exception("could not send %s%r; its sweep sends it again", task, args)
            return False
        return True
    if local is None:
        raise ValueError(f"{task} has no in-process form")
    if queues and countdown <= 0:
        # A thread started only to queue the work would cost more than the queueing.
        try:
            local(*args)
        except Exception:  # e.g. the process is shutting down: its sweep sends it again
            log.exception("could not queue %s%r in-process", task, args)
            return False
        return True
    timer = threading.Timer(countdown, _in_thread, args=(task, local, args))
    timer.daemon = True
    timer.start()
    return True


def _in_thread(task: str, local: Callable[..., Any], args: tuple[Any, ...]) -> None:
    close_old_connections()
    try:
        local(*args)
    except Exception:  # the work's sweep tries again
        log.exception("%s%r failed in-process", task, args)
    finally:
        # The thread ends here: its connections too, even those kept between requests
        # (the embedded SQLite database's).
        connections.close_all()


def held(task: str | None = None) -> list[Held]:
    """The sends the manual executor holds (of `task` only, when given)."""
    with _held_lock:
        return [h for h in _held if task is None or h.task == task]


def run_held(task: str | None = None) -> int:
    """Run (in this thread, countdowns ignored) and forget the held sends of `task`, or all.

    Work that sends again while it runs (a retry) is held anew, not run in this call.
    """
    with _held_lock:
        due = [h for h in _held if task is None or h.task == task]
        kept = [h for h in _held if not (task is None or h.task == task)]
        _held.clear()
        _held.extend(kept)
    for item in due:
        if item.local is not None:
            item.local(*item.args)
    return len(due)


def forget_held() -> None:
    """Drop every held send (a test's clean slate)."""
    with _held_lock:
        _held.clear()
