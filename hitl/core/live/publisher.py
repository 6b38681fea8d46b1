"""The one publisher of live messages: sends to the channel layer from sync code, in
order, on one long-lived event loop per process, skipping groups nobody is in.

What a message says and which groups it goes to are hitl.core.live.events' and
hitl.core.live.listeners'; this module only delivers.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import uvloop
from channels.layers import InMemoryChannelLayer, get_channel_layer

from hitl.compat import channels_redis
from hitl.core.errors import is_transient

log = logging.getLogger(__name__)

# Groups nobody joins on a single Redis: a message to one is published once on the
# layer's pub/sub channel, which every web process's hub listens to
# (hitl.compat.channels_redis.broadcasts), and handed to that group's waiters there
# (hitl.core.live.waiting). A run's end reaches its waiters so with no join or leave per
# wait, and in the one round trip that lists the other groups' members.
BROADCAST_PREFIX = "thread-status."


def is_broadcast(group: str) -> bool:
    return group.startswith(BROADCAST_PREFIX)


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
            loop = uvloop.new_event_loop()
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
                # What waits goes out together, in order: one membership read and one
                # delivery for a burst (a run's end: its status, inbox and thread groups).
                items = [outbox.items.popleft() for _ in range(min(len(outbox.items), 64))]
                try:
                    if layer is not None:
                        await _Publisher._send_all(layer, [(g, m) for g, m, _ in items])
                finally:
                    for _, _, done in items:
                        if done is not None:
                            done.set()
        finally:
            outbox.draining = False

    @staticmethod
    async def _send_all(layer: Any, sends: list[tuple[tuple[str, ...], dict[str, Any]]]) -> None:
        try:
            await _group_send_all(layer, sends)
            return
        except Exception as exc:  # a live update must never break a run
            if len(sends) > 1 and not is_transient(exc):
                # One message the layer refuses must not cost the others theirs.
                for send in sends:
                    await _Publisher._send_all(layer, [send])
                return
            groups = ", ".join(dict.fromkeys(g for targets, _ in sends for g in targets))
            if is_transient(exc):
                log.warning("could not publish to %s: %s", groups, exc)
            else:
                log.exception("could not publish to %s", groups)

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
    layer = get_channel_layer()
    if isinstance(layer, InMemoryChannelLayer):
        # One process (the embedded server): who is in a group is known here and now,
        # so groups nobody is in cost nothing (most of a run's sends). One who joins
        # after this reads what the message says after joining: the database (committed
        # before any publish) or the event log (appended before its events are sent).
        groups = [group for group in groups if memory_members(layer, group)]
        if not groups:
            return
    publisher.send(groups, message)


def memory_members(layer: InMemoryChannelLayer, group: str) -> bool:
    """Whether the in-memory layer's `group` has a member; from any thread (a dict read)."""
    return bool(layer.groups.get(group))


async def _group_send_all(layer: Any, sends: list[tuple[tuple[str, ...], dict[str, Any]]]) -> None:
    """group_send each message to its groups, in order, skipping groups nobody is in.

    Most groups have no member most of the time (no inbox, no page open). channels_redis
    spends four round trips per group_send, even then; one script lists the members of
    every group (and publishes to the broadcast groups) and a second delivers to them
    (hitl.compat.channels_redis.groups_send).
    """
    if channels_redis.is_redis_layer(layer) and await channels_redis.groups_send(
        layer, sends, is_broadcast
    ):
        return
    memory = isinstance(layer, InMemoryChannelLayer)
    for groups, message in sends:
        for group in groups:
            if memory and not memory_members(layer, group):
                continue  # the embedded server: nobody to hand it to on the loop
            await layer.group_send(group, message)
