"""The AG-UI events of one run, read off its thread's subscription (the /agui and
/langgraph streams of a run)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from hitl.core.live.waiting import TERMINAL, UNREAD, ThreadSubscription, fetch_run, waiter_read
from hitl.core.models import Run

# After a run ends, how long its last events (sent right after) may still arrive.
DRAIN_SECONDS = 2.0


async def run_events_of(
    sub: ThreadSubscription, run_id: Any, timeout: float
) -> AsyncIterator[dict[str, Any] | None]:
    """The AG-UI events of one run, in order, until it ends (or `timeout`).

    Yields None about once a second while nothing arrives, so a caller can send
    keepalives. RUN_STARTED/RUN_FINISHED/RUN_ERROR are consumed here: they decide
    which events belong to this run and when the stream is over.
    """
    run_id = str(run_id)
    current = await fetch_run(run_id)
    # Joining a run that already started: its RUN_STARTED went by before we listened.
    started = current is not None and current.status != Run.Status.QUEUED
    deadline = time.monotonic() + timeout
    ended_at: float | None = None
    while time.monotonic() < deadline:
        ended = current is None or current.status in TERMINAL
        if ended:
            # A cancelled run sends no RUN_FINISHED; others do, right after.
            ended_at = ended_at or time.monotonic()
            drained = time.monotonic() - ended_at > DRAIN_SECONDS
            # What has arrived is read first: a busy server may read the run's end in the
            # database before it reads the start and the events already queued for it.
            settled = drained or not started or current is None or current.status == "cancelled"
            if settled and sub.queue.empty():
                return
        message = await sub.get(min(1.0, max(deadline - time.monotonic(), 0)))
        if message is None or message.get("type") == "thread.changed":
            fresh = await waiter_read(lambda: fetch_run(run_id))
            current = current if fresh is UNREAD else fresh
            if message is None:
                yield None
            continue
        event = message.get("event") or {}
        kind = event.get("type")
        if kind == "RUN_STARTED":
            if event.get("runId") == run_id:
                started = True
            elif started and ended:
                return  # the next run's start: this one's part of the stream is over
            continue
        if not started:
            continue
        if kind in ("RUN_FINISHED", "RUN_ERROR"):
            if kind == "RUN_ERROR" or event.get("runId") == run_id:
                sub.heard_end = True
                return
            continue
        # The event's id in the thread's replayable log, for callers that number theirs.
        sub.last_seq = message.get("seq")
        yield event
