"""Run stops, told to the workers at once: a cancelled, rolled back or deleted run's
worker wakes and stops it within milliseconds, not at its next lease tick.

The lease tick stays the guarantee (a stop announced while Redis is away, or to a
worker that was not listening, is still noticed within a tick); this only wakes the
tick early. With Redis the announcement is a pub/sub message every worker process
hears; without it (the embedded default: one process) an event in this process.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

from hitl.core.live import events, redis

log = logging.getLogger(__name__)

CHANNEL = "hitl:runs:stopped"
_local = threading.Event()


def runs_stopped(run_ids: list[Any]) -> None:
    """Announce, once the transaction commits, that `run_ids` must stop."""
    if run_ids:
        events.send_event_on_commit(_announce)


def _announce() -> None:
    if not redis.enabled():
        _local.set()
        return
    try:
        redis.client().publish(CHANNEL, "1")
    except Exception as exc:  # the workers' next lease tick notices the stop
        log.warning("could not announce a run stop: %s", exc)


class Listener:
    """What a worker's lease thread waits on between ticks."""

    def __init__(self) -> None:
        self._pubsub: Any = None

    def wait(self, timeout: float) -> bool:
        """Block up to `timeout` seconds; True when a stop was announced meanwhile."""
        if not redis.enabled():
            woken = _local.wait(timeout)
            _local.clear()
            return woken
        try:
            if self._pubsub is None:
                self._pubsub = redis.client().pubsub(ignore_subscribe_messages=True)
                self._pubsub.subscribe(CHANNEL)
            message = self._pubsub.get_message(timeout=timeout)
            # Several stops at once wake one tick: read what else is queued.
            while message is not None and self._pubsub.get_message(timeout=0) is not None:
                pass
            return message is not None
        except Exception as exc:  # Redis is away: tick on time, subscribe again later
            log.debug("run stop listener: %s", exc)
            self.close()
            time.sleep(timeout)
            return False

    def close(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            with contextlib.suppress(Exception):  # a broken connection closes anyway
                pubsub.close()
