"""Typed live events and the one helper that publishes them to the channel layer.

Thread groups carry the AG-UI event vocabulary (RUN_STARTED, RUN_FINISHED, ...);
inbox groups carry interrupt changes. Consumers forward them after a permission check.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
import uuid
from collections.abc import Callable
from typing import Any, Literal, NotRequired, TypedDict

from channels.layers import get_channel_layer

log = logging.getLogger(__name__)


def thread_group(thread_id: Any) -> str:
    return f"thread.{thread_id}"


def thread_status_group(thread_id: Any) -> str:
    """Only `thread.changed` messages: for waiters that need no streamed events."""
    return f"thread-status.{thread_id}"


def inbox_group(group_id: int | None) -> str:
    return f"inbox.{group_id if group_id is not None else 'none'}"


INBOX_ALL = "inbox.all"


def user_group(user_id: int) -> str:
    """A user's own inbox socket(s): changes of the threads they requested."""
    return f"user.{user_id}"


class ThreadEvent(TypedDict):
    """An AG-UI event on a thread stream, wrapped for the channel layer."""

    type: Literal["thread.event"]
    thread_id: str
    event: dict[str, Any]


class InterruptChanged(TypedDict):
    """An interrupt was created, answered, expired, cancelled or reassigned."""

    type: Literal["interrupt.changed"]
    thread_id: str
    interrupt_id: str
    reviewer_group_id: int | None
    status: str
    responded_by: NotRequired[str]
    # Added by INTERRUPT_PENDING handlers: the inbox row and a plain-text notification.
    html: NotRequired[str]
    notify: NotRequired[dict[str, str]]


class ThreadChanged(TypedDict):
    type: Literal["thread.changed"]
    thread_id: str
    status: str
    requester_id: int | None


class _Publisher:
    """Sends to the channel layer from sync code on one long-lived event loop.

    One loop per process keeps channel-layer connections pooled instead of opening
    one per message (async_to_sync would start a fresh loop each call). In the
    embedded server the loop is the ASGI server's own, so the in-memory layer works.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid: int | None = None
        self._lock = threading.Lock()
        self._queue: asyncio.Queue | None = None
        self._drain_task: asyncio.Task | None = None
        self._own_loop: asyncio.AbstractEventLoop | None = None
        self._atexit = False

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            if self._loop is loop:
                return
            self._loop, self._pid, self._queue = loop, os.getpid(), None
            loop.call_soon_threadsafe(self._start_drain)

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is not None and self._pid == os.getpid() and not self._loop.is_closed():
                return self._loop
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            threading.Thread(target=run, name="hitl-events", daemon=True).start()
            ready.wait()
            if not self._atexit:
                atexit.register(self.close)
                self._atexit = True
            self._loop, self._pid, self._queue = loop, os.getpid(), None
            self._own_loop = loop
            loop.call_soon_threadsafe(self._start_drain)
            return loop

    def _start_drain(self) -> None:
        # One queue drained by one task keeps messages in publish order.
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._drain_task = asyncio.get_running_loop().create_task(self._drain(self._queue))

    async def _drain(self, queue: asyncio.Queue) -> None:
        layer = get_channel_layer()
        while True:
            item = await queue.get()
            if item is None:
                return
            group, message, done = item
            try:
                if layer is not None:
                    await layer.group_send(group, message)
            except Exception:  # a live update must never break a run
                log.exception("could not publish to %s", group)
            finally:
                if done is not None:
                    done.set()

    def send(self, group: str, message: dict[str, Any], *, wait: bool = False) -> None:
        loop = self._ensure_loop()
        done = threading.Event() if wait else None

        def put() -> None:
            self._start_drain()
            assert self._queue is not None
            self._queue.put_nowait((group, message, done))

        loop.call_soon_threadsafe(put)
        if done is not None:
            done.wait(timeout=5)

    def close(self, timeout: float = 5.0) -> None:
        """Deliver what is queued, end the drain task and stop this process's own loop."""
        with self._lock:
            loop, queue, task = self._loop, self._queue, self._drain_task
            # Only the loop this publisher started; a server's loop (bind_loop) is its own.
            own = loop is not None and loop is self._own_loop and self._pid == os.getpid()
            self._loop, self._queue, self._drain_task = None, None, None
        if not own or loop is None or loop.is_closed() or not loop.is_running():
            return
        done = threading.Event()

        def finish() -> None:
            if queue is not None:
                queue.put_nowait(None)  # after everything already queued
            if task is None or task.done():
                loop.stop()
                done.set()
                return

            def stopped(_: Any) -> None:
                loop.stop()
                done.set()

            task.add_done_callback(stopped)

        loop.call_soon_threadsafe(finish)
        done.wait(timeout)

    def flush(self) -> None:
        """Block until everything published so far has been handed to the layer."""
        self.send("hitl.flush", {"type": "noop"}, wait=True)


publisher = _Publisher()


def publish(groups: list[str], message: dict[str, Any]) -> None:
    for group in dict.fromkeys(groups):
        publisher.send(group, message)


def publish_thread_event(thread_id: Any, event: dict[str, Any]) -> None:
    message: ThreadEvent = {"type": "thread.event", "thread_id": str(thread_id), "event": event}
    publish([thread_group(thread_id)], dict(message))


# --- in-process domain events ------------------------------------------------------------
#
# Rooms above core (ops: webhooks; later notifications) subscribe here, explicitly, in
# their AppConfig.ready(); core never imports them. Handlers run inside the transaction
# that recorded the change, so what they write (a webhook delivery row) commits with it
# or not at all; anything that leaves the process they defer with transaction.on_commit.

RUN_ENDED = "run.ended"
# Handlers get the InterruptChanged message of a new pending interrupt before it is
# published and may add to it (the review room attaches the inbox row's HTML, rendered
# once in the publishing process rather than in every web process that forwards it).
INTERRUPT_PENDING = "interrupt.pending"


class RunEnded(TypedDict):
    """A run paused on interrupts, finished or failed (`run` is the locked Run row)."""

    type: Literal["run.ended"]
    run: Any


_subscribers: dict[str, list[Callable[[Any], None]]] = {}


def subscribe(kind: str, handler: Callable[[Any], None]) -> None:
    handlers = _subscribers.setdefault(kind, [])
    if handler not in handlers:
        handlers.append(handler)


def _notify(kind: str, payload: Any) -> None:
    for handler in _subscribers.get(kind, []):
        handler(payload)


def emit_run_ended(run: Any) -> None:
    event: RunEnded = {"type": "run.ended", "run": run}
    _notify(RUN_ENDED, event)


def publish_interrupt_changed(
    *,
    thread_id: Any,
    interrupt_id: Any,
    reviewer_group_id: int | None,
    status: str,
    responded_by: str = "",
) -> None:
    message: InterruptChanged = {
        "type": "interrupt.changed",
        "thread_id": str(thread_id),
        "interrupt_id": str(interrupt_id),
        "reviewer_group_id": reviewer_group_id,
        "status": status,
    }
    if responded_by:
        message["responded_by"] = responded_by
    if status == "pending":
        try:
            _notify(INTERRUPT_PENDING, message)
        except Exception:  # consumers render what a handler could not add
            log.exception("interrupt %s: a pending-interrupt handler failed", interrupt_id)
    publish([inbox_group(reviewer_group_id), INBOX_ALL, thread_group(thread_id)], dict(message))


def publish_thread_changed(*, thread_id: Any, status: str, requester_id: int | None) -> None:
    message: ThreadChanged = {
        "type": "thread.changed",
        "thread_id": str(thread_id),
        "status": status,
        "requester_id": requester_id,
    }
    groups = [thread_group(thread_id), thread_status_group(thread_id), INBOX_ALL]
    if requester_id is not None:
        groups.append(user_group(requester_id))
    # A receiver in both thread groups gets two copies; the id lets it drop one.
    publish(groups, {**message, "eid": uuid.uuid4().hex})
