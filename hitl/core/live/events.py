"""Typed live events and the one helper that publishes them to the channel layer.

Thread groups carry the AG-UI event vocabulary (RUN_STARTED, RUN_FINISHED, ...);
inbox groups carry interrupt changes. Consumers forward them after a permission check.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, Literal, NotRequired, TypedDict

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings

from hitl.compat import channels_redis
from hitl.core.errors import is_transient
from hitl.core.live import eventlog

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
    # The event's id in the thread's replayable log (hitl.core.live.eventlog), when logged.
    seq: NotRequired[str]


class InterruptChanged(TypedDict):
    """An interrupt was created, answered, expired, cancelled or reassigned."""

    type: Literal["interrupt.changed"]
    thread_id: str
    interrupt_id: str
    reviewer_group_id: int | None
    status: str
    responded_by: NotRequired[str]
    # A pending item that changed without being new (claimed, released): rows and cards
    # are re-rendered, nobody is notified again.
    change: NotRequired[str]
    # Added by INTERRUPT_PENDING handlers: the inbox row and a plain-text notification.
    html: NotRequired[str]
    notify: NotRequired[dict[str, str]]


class InterruptProgress(TypedDict):
    """A four-eyes interrupt got an approval but is still pending (e.g. 1 of 2)."""

    type: Literal["interrupt.progress"]
    thread_id: str
    interrupt_id: str
    reviewer_group_id: int | None
    approvals: int
    required: int
    approvers: list[str]
    edited: bool


class RunEnd(TypedDict):
    """How a run ended, for waiters: enough to answer without reading it back."""

    run_id: str
    status: str
    values: Any
    # The run's pending interrupts, one per LangGraph interrupt id, ordered by it.
    interrupts: list[dict[str, Any]]


class ThreadChanged(TypedDict):
    type: Literal["thread.changed"]
    thread_id: str
    status: str
    requester_id: int | None
    # A run of the thread ended (the status alone may say busy: a rule resumed it).
    run_ended: NotRequired[bool]
    # Only on the copy sent to the thread's status group (waiters), when small.
    run_end: NotRequired[RunEnd]


class _Outbox:
    """Messages waiting on one event loop; touched only from that loop's thread."""

    def __init__(self) -> None:
        self.items: collections.deque[
            tuple[tuple[str, ...], dict[str, Any], threading.Event | None]
        ] = collections.deque()
        self.draining = False


class _Publisher:
    """Sends to the channel layer from sync code on one long-lived event loop.

    One loop per process keeps channel-layer connections pooled instead of opening
    one per message (async_to_sync would start a fresh loop each call). In the
    embedded server the loop is the ASGI server's own, so the in-memory layer works.
    A drain task runs only while messages wait, so no task is left pending when a
    loop closes.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid: int | None = None
        self._lock = threading.Lock()
        self._outbox = _Outbox()
        self._own_loop: asyncio.AbstractEventLoop | None = None
        self._atexit = False

    @property
    def server_loop(self) -> asyncio.AbstractEventLoop | None:
        """The ASGI server's loop this publisher was bound to (lives as long as the process)."""
        loop = self._loop
        return loop if loop is not None and loop is not self._own_loop else None

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            if self._loop is not loop:
                self._loop, self._pid, self._outbox = loop, os.getpid(), _Outbox()

    def _ensure_loop(self) -> tuple[asyncio.AbstractEventLoop, _Outbox]:
        with self._lock:
            if self._loop is not None and self._pid == os.getpid() and not self._loop.is_closed():
                return self._loop, self._outbox
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
            self._loop, self._pid, self._outbox = loop, os.getpid(), _Outbox()
            self._own_loop = loop
            return loop, self._outbox

    @staticmethod
    def _put(
        outbox: _Outbox, item: tuple[tuple[str, ...], dict[str, Any], threading.Event | None]
    ) -> None:
        # One drain task at a time, first in first out: messages keep publish order.
        outbox.items.append(item)
        if not outbox.draining:
            outbox.draining = True
            asyncio.get_running_loop().create_task(_Publisher._drain(outbox))

    @staticmethod
    async def _drain(outbox: _Outbox) -> None:
        layer = get_channel_layer()
        try:
            while outbox.items:
                groups, message, done = outbox.items.popleft()
                try:
                    if layer is not None:
                        await _group_send_all(layer, groups, message)
                except Exception as exc:  # a live update must never break a run
                    if is_transient(exc):
                        log.warning("could not publish to %s: %s", ", ".join(groups), exc)
                    else:
                        log.exception("could not publish to %s", ", ".join(groups))
                finally:
                    if done is not None:
                        done.set()
        finally:
            outbox.draining = False

    def send(self, group: str | list[str], message: dict[str, Any], *, wait: bool = False) -> None:
        groups = (group,) if isinstance(group, str) else tuple(dict.fromkeys(group))
        loop, outbox = self._ensure_loop()
        done = threading.Event() if wait else None
        loop.call_soon_threadsafe(self._put, outbox, (groups, message, done))
        if done is not None:
            done.wait(timeout=5)

    def close(self, timeout: float = 5.0) -> None:
        """Deliver what is queued, then stop the loop this publisher started (at exit)."""
        with self._lock:
            loop, outbox = self._loop, self._outbox
            # Only the loop this publisher started; a server's loop (bind_loop) is its own.
            own = loop is not None and loop is self._own_loop and self._pid == os.getpid()
            self._loop = None
        if not own or loop is None or loop.is_closed() or not loop.is_running():
            return

        async def stop_when_drained() -> None:
            while outbox.draining:
                await asyncio.sleep(0.01)
            loop.stop()

        asyncio.run_coroutine_threadsafe(stop_when_drained(), loop)
        deadline = time.monotonic() + timeout
        while loop.is_running() and time.monotonic() < deadline:
            time.sleep(0.01)

    def ask(self, coro_fn: Callable[[], Any], *, default: Any, timeout: float = 1.0) -> Any:
        """Run `coro_fn()` on the publisher's loop and return its result (or `default`)."""
        loop, _ = self._ensure_loop()
        future = asyncio.run_coroutine_threadsafe(coro_fn(), loop)
        try:
            return future.result(timeout=timeout)
        except Exception as exc:
            future.cancel()
            if not is_transient(exc) and not isinstance(exc, TimeoutError):
                log.exception("channel layer query failed")
            return default

    def flush(self) -> None:
        """Block until everything published so far has been handed to the layer."""
        self.send("hitl.flush", {"type": "noop"}, wait=True)


publisher = _Publisher()


def publish(groups: list[str], message: dict[str, Any]) -> None:
    publisher.send(groups, message)


async def _group_send_all(layer: Any, groups: tuple[str, ...], message: dict[str, Any]) -> None:
    """group_send to each group, skipping those nobody is in.

    Most groups have no member most of the time (no inbox, no page open). channels_redis
    spends two round trips per group_send even then; one pipelined membership read for
    all the groups finds the few that need the send.
    """
    connection = (
        channels_redis.single_connection(layer)
        if channels_redis.is_redis_layer(layer) and len(groups) > 1
        else None
    )
    if connection is not None:
        since = channels_redis.live_since(layer)
        pipe = connection.pipeline(transaction=False)
        for group in groups:
            pipe.zcount(channels_redis.group_key(layer, group), since, "+inf")
        counts = await pipe.execute()
        groups = tuple(group for group, count in zip(groups, counts, strict=True) if count)
    for group in groups:
        await layer.group_send(group, message)


async def _group_has_members(group: str) -> bool:
    layer = get_channel_layer()
    if layer is None:
        return False
    if isinstance(layer, InMemoryChannelLayer):  # the embedded server: one process
        return bool(layer.groups.get(group))
    if not channels_redis.is_redis_layer(layer):
        return True  # a layer whose membership we cannot read (pubsub): assume someone
    connection = channels_redis.group_connection(layer, group)
    since = channels_redis.live_since(layer)
    return await connection.zcount(channels_redis.group_key(layer, group), since, "+inf") > 0


def groups_listened(groups: list[str]) -> bool:
    """Whether any of `groups` has a member (a socket or stream); when unsure: yes."""

    async def any_member() -> bool:
        for group in groups:
            if await _group_has_members(group):
                return True
        return False

    return publisher.ask(any_member, default=True)


# A page about to open a thread (the start form redirects to it) counts as listening for
# this long: the run's events are built from its start, not only from the step after the
# page's socket joins. Without Redis (one process) the mark is kept here.
EXPECTED_LISTENER_SECONDS = 15.0
_expected: dict[str, float] = {}


def expect_listener(thread_id: Any) -> None:
    """Count the thread's stream as listened for a while: a page is about to open it."""
    if not eventlog.expect_listener(thread_id, EXPECTED_LISTENER_SECONDS):
        now = time.monotonic()
        for key in [k for k, until in _expected.items() if until < now]:
            _expected.pop(key, None)
        _expected[str(thread_id)] = now + EXPECTED_LISTENER_SECONDS


def thread_forget(thread_id: Any, run_ids: list[Any]) -> None:
    """Forget a deleted thread's stream: its replayable event log and marks in Redis,
    its runs' stream modes, and this process's mark. Call after the delete commits.

    Channel-layer group memberships are left to expire: they hold no events, and
    sockets re-check who may view the thread (at least every second)."""
    _expected.pop(str(thread_id), None)
    eventlog.forget(thread_id, run_ids)


def _layer_on_log_redis(layer: Any) -> bool:
    """Whether the channel layer keeps its groups on the event log's Redis: then one
    round trip can ask about both."""
    return (
        eventlog.enabled()
        and channels_redis.is_redis_layer(layer)
        and channels_redis.layer_address(layer) == settings.REDIS_URL
    )


def thread_stream_listened(thread_id: Any) -> bool:
    """Whether anyone listens to the thread's full event stream (a thread page, an SSE
    or AG-UI stream); waiters for a status alone listen elsewhere. When unsure: yes."""
    group = thread_group(thread_id)
    layer = get_channel_layer()
    if _layer_on_log_redis(layer):
        # The layer's Redis is the event log's: ask both in one round trip from this
        # thread, rather than through the publisher's loop and again for the log.
        since = channels_redis.live_since(layer)
        key = channels_redis.group_key(layer, group)
        return eventlog.stream_listened(key, since, thread_id)
    if _expected.get(str(thread_id), 0.0) > time.monotonic():
        return True
    # A resumable stream's client may be reconnecting (a web restart): keep its events.
    return groups_listened([group]) or eventlog.is_resumable(thread_id)


def publish_thread_event(thread_id: Any, event: dict[str, Any]) -> None:
    publish_thread_events(thread_id, [event])


def publish_thread_events(thread_id: Any, batch: list[dict[str, Any]]) -> None:
    """Log a batch of the thread's stream events and send them to its group.

    With the layer on the event log's Redis, one round trip logs them and counts the
    group's members; when it has none they are not sent (a stream that subscribes
    later reads them from the log)."""
    group = thread_group(thread_id)
    layer = get_channel_layer()
    members = None
    if _layer_on_log_redis(layer):
        members = (channels_redis.group_key(layer, group), channels_redis.live_since(layer))
    seqs, heard = eventlog.append_all(thread_id, batch, members)
    if not heard:
        return
    for event, seq in zip(batch, seqs, strict=True):
        message: ThreadEvent = {"type": "thread.event", "thread_id": str(thread_id), "event": event}
        if seq is not None:
            message["seq"] = seq
        publish([group], dict(message))


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
# Every change of an interrupt (answered, undone, claimed, approval progress), after its
# commit: ops updates the Slack messages that list it. Handlers must be cheap and never raise.
INTERRUPT_CHANGED = "interrupt.changed"


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
    change: str = "",
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
    if change:
        message["change"] = change
    if status == "pending":
        try:
            _notify(INTERRUPT_PENDING, message)
        except Exception as exc:  # consumers render what a handler could not add
            if not is_transient(exc):
                log.exception("interrupt %s: a pending-interrupt handler failed", interrupt_id)
    publish([inbox_group(reviewer_group_id), INBOX_ALL, thread_group(thread_id)], dict(message))
    _notify_changed(message)


def _notify_changed(message: Any) -> None:
    try:
        _notify(INTERRUPT_CHANGED, message)
    except Exception:  # the change is committed; a follower's failure must not undo it
        log.exception("interrupt %s: a change handler failed", message.get("interrupt_id"))


def publish_interrupt_progress(
    *,
    thread_id: Any,
    interrupt_id: Any,
    reviewer_group_id: int | None,
    approvals: int,
    required: int,
    approvers: list[str],
    edited: bool,
) -> None:
    message: InterruptProgress = {
        "type": "interrupt.progress",
        "thread_id": str(thread_id),
        "interrupt_id": str(interrupt_id),
        "reviewer_group_id": reviewer_group_id,
        "approvals": approvals,
        "required": required,
        "approvers": approvers,
        "edited": edited,
    }
    publish([inbox_group(reviewer_group_id), INBOX_ALL, thread_group(thread_id)], dict(message))
    _notify_changed(message)


def publish_thread_changed(
    *,
    thread_id: Any,
    status: str,
    requester_id: int | None,
    run_end: RunEnd | None = None,
    run_ended: bool = False,
) -> None:
    message: ThreadChanged = {
        "type": "thread.changed",
        "thread_id": str(thread_id),
        "status": status,
        "requester_id": requester_id,
    }
    if run_ended:
        message["run_ended"] = True
    groups = [thread_group(thread_id), INBOX_ALL]
    if requester_id is not None:
        groups.append(user_group(requester_id))
    # A receiver in both thread groups gets two copies; the id lets it drop one. The
    # waiters' copy goes first: a hub in both groups keeps the one that carries run_end.
    eid = uuid.uuid4().hex
    # Status-only waiters wait for an end (waiting.is_run_end); a run's start would only
    # wake them for nothing. Whoever waits for "busy" listens on the thread group.
    if status != "busy" or run_ended:
        waiters: dict[str, Any] = {**message, "eid": eid}
        if run_end is not None:
            waiters["run_end"] = run_end
        publish([thread_status_group(thread_id)], waiters)
    publish(groups, {**message, "eid": eid})


# A run's end rides along to waiters only up to this size (JSON bytes); a bigger state
# is read back from the checkpointer by the waiter instead.
RUN_END_MAX_BYTES = 64 * 1024


def run_end_summary(
    *, run_id: Any, status: str, values: Any, interrupts: list[tuple[str, Any]]
) -> RunEnd | None:
    """What a waiter needs to answer for a run that ended, or None when it is too big."""
    pending: dict[str, dict[str, Any]] = {}
    for interrupt_id, value in sorted(interrupts, key=lambda item: item[0]):
        pending.setdefault(interrupt_id, {"value": value, "id": interrupt_id})
    summary: RunEnd = {
        "run_id": str(run_id),
        "status": status,
        "values": values,
        "interrupts": list(pending.values()),
    }
    try:
        size = len(json.dumps(summary, separators=(",", ":")))
    except (TypeError, ValueError):
        return None
    return summary if size <= RUN_END_MAX_BYTES else None
